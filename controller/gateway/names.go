package gateway

import (
	"strings"
	"unicode"

	"github.com/tether-mcp/tether/controller/exposure"
	"github.com/tether-mcp/tether/spec"
)

// Names and texts a backend offers reach agents, which show them to people
// and to models. A name with a control character (an ESC sequence drives
// the terminal that prints it) or a bidirectional control (U+202E makes
// "evil\u202Etxt.exe" display as "evilexe.txt": Trojan Source,
// CVE-2021-42574) reads differently from what it is, and a name of
// thousands of characters is no name; such a tool or prompt is not exposed
// and is reported instead (docs/contract.md §5).

// DefaultMaxNameLength is the MCP specification's bound on a tool name, the
// default of Options.MaxNameLength (controller/exposure, the rules' home).
const DefaultMaxNameLength = exposure.DefaultMaxNameLength

// shownNameLength bounds a name as status and logs show it.
const shownNameLength = exposure.ShownLength

// nameProblem says why a backend's name orig, exposed as name, must not
// reach agents; "" when it may (exposure.NameProblem, shared with tether diff).
func nameProblem(orig, name string, maxLen int) string {
	return exposure.NameProblem(orig, name, maxLen)
}

// isBidiControl reports the Unicode Bidi_Control characters.
func isBidiControl(r rune) bool { return exposure.IsBidiControl(r) }

// cleanText returns a description or title without bidirectional controls
// and control characters other than newline and tab: a description is
// prose for a model and a person, where a line break and a tab are
// formatting, and the rest only hides or reorders what the text says. A
// text that needs no change is returned as it is.
func cleanText(s string) string {
	if !needsCleaning(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\n' || r == '\t' {
			return r
		}
		if isBidiControl(r) || unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

func needsCleaning(s string) bool {
	for _, r := range s {
		if r != '\n' && r != '\t' && (isBidiControl(r) || unicode.IsControl(r)) {
			return true
		}
	}
	return false
}

// shownName is a name as status and logs show it: kind and name, the name
// quoted with Go escapes when it holds anything but printable ASCII, cut to
// shownNameLength characters.
func shownName(kind, name string) string { return kind + exposure.Shown(name) }

// nameWarning is the status entry of a name the gateway does not serve as
// offered.
func nameWarning(kind, name, problem string) spec.NameWarning {
	return spec.NameWarning{Name: shownName(kind, name), Warning: problem}
}
