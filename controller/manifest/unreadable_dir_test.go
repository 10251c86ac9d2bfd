//go:build unix

package manifest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tether-mcp/tether/controller/desired"
)

// deepTree makes directories below root until their path is longer than
// the system takes (ENAMETOOLONG): a directory of the tree that cannot be
// listed even by root, whom permission bits do not stop. It returns the
// first directory whose path is too long.
func deepTree(t *testing.T, root string) string {
	t.Helper()
	name := strings.Repeat("d", 200)
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { r.Close() }()
	p := root
	for len(p) < 4096 { // PATH_MAX on Linux; others are shorter
		if err := r.Mkdir(name, 0o755); err != nil {
			t.Fatal(err)
		}
		next, err := r.OpenRoot(name)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		r = next
		p = filepath.Join(p, name)
	}
	return p
}

// TestSourceKeepsConnectionsOfUnreadableDirectory: ListTree reports a
// directory below the root that cannot be listed, and lists the rest; the
// source keeps the connections declared there, with an error, and removes
// those of readable directories that are gone.
func TestSourceKeepsConnectionsOfUnreadableDirectory(t *testing.T) {
	root := t.TempDir()
	deep := deepTree(t, root)
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte(manifest("a", "")), 0o644); err != nil {
		t.Fatal(err)
	}

	tree, err := ListTree(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(tree.Unreadable) != 1 {
		t.Fatalf("unreadable = %v, want one directory", tree.Unreadable)
	}
	var bad string
	for dir, err := range tree.Unreadable {
		bad = dir
		if !errors.Is(err, syscall.ENAMETOOLONG) {
			t.Errorf("%s: %v, want ENAMETOOLONG", dir, err)
		}
	}
	if !strings.HasPrefix(deep, bad) {
		t.Errorf("unreadable %s is not on the way to %s", bad, deep)
	}
	if want := []string{filepath.Join(root, "a.yaml")}; len(tree.Files) != 1 || tree.Files[0] != want[0] {
		t.Errorf("files = %v, want %v", tree.Files, want)
	}

	// The store knows connections from an earlier listing: b declared in
	// the directory that cannot be listed now, c in one that is gone.
	conn := decode("x.yaml", manifest("b", ""))[0].Conn
	store := desired.NewStore()
	store.Replace(map[string]desired.Entry{
		"b": {Name: "b", Origin: filepath.Join(bad, "b.yaml"), Dir: bad, Conn: conn},
		"c": {Name: "c", Origin: filepath.Join(root, "gone", "c.yaml"), Dir: filepath.Join(root, "gone"), Conn: conn},
	})
	if err := NewSource(SourceOptions{Root: root}, store).Sync(); err != nil {
		t.Fatal(err)
	}
	if _, ok := store.Get("a"); !ok {
		t.Error("a, beside the unreadable directory, is not listed")
	}
	if e, ok := store.Get("b"); !ok || e.Conn != conn || !strings.Contains(e.ManifestError, "directory "+bad+" cannot be read") {
		t.Errorf("b = %+v (ok=%v); want its spec kept, with the error", e, ok)
	}
	if _, ok := store.Get("c"); ok {
		t.Error("c survived the removal of its directory")
	}
}
