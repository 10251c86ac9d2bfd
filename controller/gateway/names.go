package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tether-mcp/tether/spec"
)

// Names and texts a backend offers reach agents, which show them to people
// and to models. A name with a control character (an ESC sequence drives
// the terminal that prints it) or a bidirectional control (U+202E makes
// "evil\u202Etxt.exe" display as "evilexe.txt": Trojan Source,
// CVE-2021-42574) reads differently from what it is, and a name of
// thousands of characters is no name; such a tool or prompt is not exposed
// and is reported instead (docs/contract.md §5).

// DefaultMaxNameLength is the MCP specification's bound on a tool name
// (2025-11-25, server/tools, "Tool names": 1 to 128 characters), the
// default of Options.MaxNameLength; the gateway holds exposed prompt names
// to it too.
const DefaultMaxNameLength = 128

// shownNameLength bounds a name as status and logs show it.
const shownNameLength = 80

// nameProblem says why a backend's name orig, exposed as name, must not
// reach agents; "" when it may. maxLen bounds name in characters.
func nameProblem(orig, name string, maxLen int) string {
	if orig == "" || name == "" {
		return "not exposed: an empty name"
	}
	if !utf8.ValidString(name) {
		return "not exposed: the name is not valid UTF-8"
	}
	if n := utf8.RuneCountInString(name); n > maxLen {
		return fmt.Sprintf("not exposed: the name has %d characters, over the limit of %d (--max-name-length)", n, maxLen)
	}
	for _, r := range name {
		switch {
		case isBidiControl(r):
			return fmt.Sprintf("not exposed: the name holds the bidirectional control U+%04X", r)
		case unicode.IsControl(r):
			return fmt.Sprintf("not exposed: the name holds the control character U+%04X", r)
		}
	}
	return ""
}

// isBidiControl reports the Unicode Bidi_Control characters: the embeddings
// and overrides U+202A–U+202E, the isolates U+2066–U+2069 and the marks
// U+061C, U+200E, U+200F.
func isBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

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
func shownName(kind, name string) string {
	plain := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '"' {
			plain = false
			break
		}
	}
	if !plain {
		name = strconv.QuoteToASCII(name)
	}
	if len(name) > shownNameLength {
		name = name[:shownNameLength-3] + "..."
	}
	return kind + name
}

// nameWarning is the status entry of a name the gateway does not serve as
// offered.
func nameWarning(kind, name, problem string) spec.NameWarning {
	return spec.NameWarning{Name: shownName(kind, name), Warning: problem}
}
