package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// TestListFilesAs: a copy of a tree (a git revision's) is listed by the
// tree's rules and named as the tree it stands for, problems included.
func TestListFilesAs(t *testing.T) {
	root := t.TempDir()
	writeTestFile(t, filepath.Join(root, "a.yaml"), "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: a}\nspec: {stdio: {command: x}}\n")
	writeTestFile(t, filepath.Join(root, "sub", "b.yaml"), "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: b}\nspec: {stdio: {command: x}, bogus: 1}\n")
	writeTestFile(t, filepath.Join(root, "sub", "b.yml"), "")
	writeTestFile(t, filepath.Join(root, "skipped", "c.yaml"), "")
	writeTestFile(t, filepath.Join(root, ".tetherignore"), "skipped/\n")
	files, _, err := ListFilesAs(root, "/srv/m")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Path)
	}
	if strings.Join(names, " ") != "/srv/m/a.yaml /srv/m/sub/b.yaml /srv/m/sub/b.yml" {
		t.Fatalf("files %v", names)
	}
	if e := files[1].Docs[0].Errors; len(e) == 0 || !strings.HasPrefix(e[0].Error(), "/srv/m/sub/b.yaml:") {
		t.Errorf("b.yaml's problem: %v", e)
	}
	if files[2].Err == nil || !strings.HasPrefix(files[2].Err.Error(), "/srv/m/sub/b.yml:") {
		t.Errorf("b.yml beside b.yaml: %v", files[2].Err)
	}
	if _, _, err := ListFiles(filepath.Join(root, "missing")); err == nil {
		t.Error("a missing root lists without an error")
	}
}

// TestLoadFileAsBounded: a file over spec.MaxFileSize is reported with its
// size, named as asked, without being decoded; an unreadable one too.
func TestLoadFileAsBounded(t *testing.T) {
	p := filepath.Join(t.TempDir(), "big.yaml")
	writeTestFile(t, p, strings.Repeat("#", spec.MaxFileSize+1))
	f := LoadFileAs(p, "/srv/m/big.yaml")
	if f.Path != "/srv/m/big.yaml" || len(f.Docs) != 1 || !strings.Contains(f.Docs[0].Errors[0].Error(), "over the limit") {
		t.Errorf("oversized: %+v", f)
	}
	f = LoadFileAs(filepath.Join(t.TempDir(), "gone.yaml"), "/srv/m/gone.yaml")
	if f.Err == nil || !strings.HasPrefix(f.Err.Error(), "/srv/m/gone.yaml: ") || len(f.Docs) != 0 {
		t.Errorf("missing: %+v", f)
	}
}

func writeTestFile(t *testing.T, p, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
