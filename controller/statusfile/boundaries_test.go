package statusfile

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// TestPlainSafeBoundaries: a plain scalar starts with a letter, a to z or A
// to Z (not the characters beside them), and is at most 200 bytes.
func TestPlainSafeBoundaries(t *testing.T) {
	for s, want := range map[string]bool{
		"a" + strings.Repeat("x", 199): true,
		"a" + strings.Repeat("x", 200): false,
		"aa":                           true,
		"zz":                           true,
		"AA":                           true,
		"ZZ":                           true,
		"`a":                           false,
		"{a":                           false,
		"@a":                           false,
		"[a":                           false,
		"":                             false,
	} {
		if got := plainSafe(s); got != want {
			t.Errorf("plainSafe(%.12q… %d bytes) = %v, want %v", s, len(s), got, want)
		}
	}
}

// TestCutInvalidUTF8: a string that is no UTF-8 (a server's bytes) is cut
// without reading before its start.
func TestCutInvalidUTF8(t *testing.T) {
	if got := cut("\x80\x80\x80abc", 2); got != "…" {
		t.Errorf("cut = %q, want %q", got, "…")
	}
}

// TestCutWarningsCarriesTheCount: a list cut before keeps counting what it
// left out, and a list that fits gets no count.
func TestCutWarningsCarriesTheCount(t *testing.T) {
	w := func(n string) spec.NameWarning { return spec.NameWarning{Name: n, Warning: "w"} }
	more := func(k string) spec.NameWarning { return spec.NameWarning{Name: moreWarnings, Warning: k} }
	for _, c := range []struct {
		name string
		in   []spec.NameWarning
		n    int
		want []spec.NameWarning
	}{
		{"fits", []spec.NameWarning{w("a"), w("b")}, 2, []spec.NameWarning{w("a"), w("b")}},
		{"cut", []spec.NameWarning{w("a"), w("b"), w("c")}, 1, []spec.NameWarning{w("a"), more("and 2 more")}},
		{"cut before, fits now", []spec.NameWarning{w("a"), more("and 5 more")}, 2, []spec.NameWarning{w("a"), more("and 5 more")}},
		{"cut before, cut again", []spec.NameWarning{w("a"), w("b"), more("and 5 more")}, 1, []spec.NameWarning{w("a"), more("and 6 more")}},
		{"a name like the count's, no count", []spec.NameWarning{w("a"), more("not a count")}, 2, []spec.NameWarning{w("a"), more("not a count")}},
		{"the last is no count", []spec.NameWarning{more("and 5 more"), w("b")}, 2, []spec.NameWarning{more("and 5 more"), w("b")}},
	} {
		if got := cutWarnings(c.in, c.n, 100); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestSplitDocumentsDropsEmpty: separators with nothing between them make
// no documents.
func TestSplitDocumentsDropsEmpty(t *testing.T) {
	if got := SplitDocuments([]byte("---\n\n---\na: 1\n---\n")); len(got) != 1 || string(got[0]) != "a: 1\n" {
		t.Errorf("SplitDocuments = %q, want one document", got)
	}
}
