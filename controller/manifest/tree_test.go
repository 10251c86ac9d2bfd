package manifest

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestListTree(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"a.yaml", "b.yml", "a.status.yaml", ".hidden.yaml", "notes.txt", "x.yaml~",
		"sub/c.yaml", "sub/.git/d.yaml",
		"prom/rules.yml", "keep/prom/e.yaml", "deep/kustomization.yaml", "deep/f.yaml",
		"cm/..2026_a/g.yaml",
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// ConfigMap layout: visible links into the hidden ..data directory.
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..2026_a", filepath.Join(root, "cm", "..data")))
	must(os.Symlink(filepath.Join("..data", "g.yaml"), filepath.Join(root, "cm", "g.yaml")))
	// A symlink cycle must not loop.
	must(os.Symlink("..", filepath.Join(root, "sub", "loop")))
	must(os.WriteFile(filepath.Join(root, IgnoreFile), []byte("# not manifests\n/prom/\nkustomization.yaml\n"), 0o644))

	tree, err := ListTree(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tree.Files {
		rel, _ := filepath.Rel(root, f)
		got = append(got, rel)
	}
	want := []string{"a.yaml", "b.yml", "cm/g.yaml", "deep/f.yaml", "keep/prom/e.yaml", "sub/c.yaml"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	if tree.Unreadable != nil || tree.BadIgnoreFiles != nil {
		t.Errorf("a readable tree reported unreadable directories %v, bad ignore files %v", tree.Unreadable, tree.BadIgnoreFiles)
	}
}
