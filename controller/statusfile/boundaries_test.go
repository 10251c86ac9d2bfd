package statusfile

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/desired"
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

// TestPath: beside the manifest, or at the same place under the status
// directory; a manifest outside the tree goes to the status directory's top.
func TestPath(t *testing.T) {
	for _, c := range []struct{ statusDir, manifest, want string }{
		{"", "/m/sub/a.yaml", "/m/sub/a.status.yaml"},
		{"/s", "/m/a.yml", "/s/a.status.yaml"},
		{"/s", "/m/sub/deeper/a.yaml", "/s/sub/deeper/a.status.yaml"},
		{"/s", "/elsewhere/a.yaml", "/s/a.status.yaml"},
	} {
		if got := Path("/m", c.statusDir, c.manifest); got != c.want {
			t.Errorf("Path(/m, %q, %s) = %s, want %s", c.statusDir, c.manifest, got, c.want)
		}
	}
}

// TestWriterLeavesAnEarlierRunsSameBytesAlone: at a restart, a status file
// that already holds the bytes the first Put renders is not written again
// (no new inode, which on some file systems costs hundreds of µs).
func TestWriterLeavesAnEarlierRunsSameBytesAlone(t *testing.T) {
	w, m := writerFor(t, []string{"a"})
	e := desired.Entry{Name: "a", Origin: m}
	if err := w.Put(e, attemptStatus(3)); err != nil {
		t.Fatal(err)
	}
	before, err := os.Stat(w.Path(m))
	if err != nil {
		t.Fatal(err)
	}
	again := NewWriter(filepath.Dir(m), "", func(string) []string { return []string{"a"} })
	if err := again.Put(e, attemptStatus(3)); err != nil {
		t.Fatal(err)
	}
	after, err := os.Stat(w.Path(m))
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(before, after) {
		t.Errorf("the next run's first Put rewrote a status file that held its bytes already")
	}
}
