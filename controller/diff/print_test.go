package diff

import (
	"bytes"
	"strings"
	"testing"
)

// Resource URIs and templates reach the text output as their servers wrote
// them: their control and bidirectional characters are escaped, so an ESC
// sequence or U+202E cannot drive or reorder the terminal.
func TestTextEscapesWhatServersWrote(t *testing.T) {
	esc := "file:///x\x1b]0;pwned\x07"
	bidi := "file:///\u202etxt.exe"
	tmpl := "file:///{path}\x1b[2J"
	r := &Result{Against: "x", Connections: []Connection{{
		Name: "a", Change: Added, Catalog: "known",
		Resources:         &Names{Added: []string{esc, "file:///plain"}, Removed: []string{bidi}},
		ResourceTemplates: &Names{Added: []string{tmpl}},
	}}, CollisionsMade: []Collision{{Name: "resource:" + bidi, Owner: "a", Loser: "b"}}}
	var out bytes.Buffer
	if err := Text(&out, r, false); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	if strings.ContainsAny(s, "\x1b\x07\u202e") {
		t.Errorf("raw control or bidi characters in\n%q", s)
	}
	for _, want := range []string{
		`+ resource "file:///x\x1b]0;pwned\a"`,
		`- resource "file:///\u202etxt.exe"`,
		`+ resource template "file:///{path}\x1b[2J"`,
		`! "resource:file:///\u202etxt.exe": b loses it to a`,
		"+ resource file:///plain\n", // a plain one as it is
	} {
		if !strings.Contains(s, want) {
			t.Errorf("no %q in\n%s", want, s)
		}
	}
}
