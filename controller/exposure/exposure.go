// Package exposure holds the rules by which the gateway turns what servers
// offer into what agents see, as pure functions: the exposed name of a tool
// or prompt, which names must not reach agents, which claim on a
// contested name wins, and the resource rules (templates.go: which claim
// on a URI serves it, template specificity, the caps on templates)
// (docs/contract.md §5). The gateway applies them to
// live sessions; tether diff applies the same functions to predict what a
// change of manifests will expose. It imports nothing of tether's but spec
// (and uritemplate, to read templates as the gateway does) and does no I/O.
package exposure

import (
	"cmp"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// DefaultMaxNameLength is the MCP specification's bound on a tool name
// (2025-11-25, server/tools, "Tool names": 1 to 128 characters), the
// default of --max-name-length; exposed prompt names are held to it too.
const DefaultMaxNameLength = 128

// Name is the name a server's tool or prompt orig is exposed as under
// prefix: `<prefix>_<orig>`, or orig unchanged for an empty prefix.
func Name(prefix, orig string) string {
	if prefix == "" {
		return orig
	}
	return prefix + "_" + orig
}

// NameProblem says why a backend's name orig, exposed as name, must not
// reach agents; "" when it may. maxLen bounds name in characters.
//
// A name with a control character (an ESC sequence drives the terminal
// that prints it) or a bidirectional control (U+202E makes
// "evil\u202Etxt.exe" display as "evilexe.txt": Trojan Source,
// CVE-2021-42574) reads differently from what it is, and a name of
// thousands of characters is no name.
func NameProblem(orig, name string, maxLen int) string {
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
		case IsBidiControl(r):
			return fmt.Sprintf("not exposed: the name holds the bidirectional control U+%04X", r)
		case unicode.IsControl(r):
			return fmt.Sprintf("not exposed: the name holds the control character U+%04X", r)
		}
	}
	return ""
}

// IsBidiControl reports the Unicode Bidi_Control characters: the embeddings
// and overrides U+202A–U+202E, the isolates U+2066–U+2069 and the marks
// U+061C, U+200E, U+200F.
func IsBidiControl(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F || (r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

// ClaimBefore orders two connections' claims on one exposed name: the
// earlier claim first (seq: when it was made; claims made before the
// gateway's first client request all have 0), then the connection name.
// The first claim keeps the name: first come keeps it.
func ClaimBefore(aSeq uint64, aName string, bSeq uint64, bName string) int {
	if c := cmp.Compare(aSeq, bSeq); c != 0 {
		return c
	}
	return cmp.Compare(aName, bName)
}
