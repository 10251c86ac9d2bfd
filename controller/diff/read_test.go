package diff

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

func git(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

// TestReadRevision: a revision's tree is read with the daemon's limits (a
// manifest over 1 MiB is reported by its size, not copied), named as the
// work tree's files; a directory the revision does not have holds nothing;
// a revision that does not exist is an error.
func TestReadRevision(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	repo := t.TempDir()
	git(t, repo, "init", "--quiet", "--initial-branch=main")
	dir := filepath.Join(repo, "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(doc("a", "  stdio: {command: srv}\n")), 0o644))
	must(os.WriteFile(filepath.Join(dir, "big.yaml"), []byte(strings.Repeat("#", spec.MaxFileSize+10)), 0o644))
	must(os.WriteFile(filepath.Join(dir, "exact.yaml"), []byte(strings.Repeat("#", spec.MaxFileSize)), 0o644))
	must(os.WriteFile(filepath.Join(dir, "notes.txt"), []byte(strings.Repeat("x", 1<<20)), 0o644))
	must(os.WriteFile(filepath.Join(dir, ".tetherignore"), []byte("drafts/\n"), 0o644))
	must(os.MkdirAll(filepath.Join(dir, "drafts"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "drafts", "x.yaml"), []byte("not: a manifest\n"), 0o644))
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "--quiet", "-m", "one")
	must(os.RemoveAll(dir)) // the work tree changes nothing of the revision
	must(os.MkdirAll(dir, 0o755))

	files, err := ReadRevision(context.Background(), dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 || files[0].Path != filepath.Join(dir, "a.yaml") || files[0].Docs[0].Conn == nil {
		t.Fatalf("files %+v", files)
	}
	if e := files[1].Docs[0].Errors; files[1].Path != filepath.Join(dir, "big.yaml") || len(e) == 0 ||
		!strings.Contains(e[0].Error(), "1048586 bytes, over the limit") {
		t.Errorf("big.yaml: %v", e)
	}
	if f := files[2]; f.Path != filepath.Join(dir, "exact.yaml") || f.Err != nil || len(f.Docs) != 0 {
		t.Errorf("a manifest of exactly the limit (comments only): %+v", f)
	}

	other := filepath.Join(repo, "other")
	must(os.MkdirAll(other, 0o755))
	if files, err := ReadRevision(context.Background(), other, "HEAD"); err != nil || len(files) != 0 {
		t.Errorf("a directory the revision lacks: %v %v", files, err)
	}
	if _, err := ReadRevision(context.Background(), dir, "no-such-branch"); err == nil || !strings.Contains(err.Error(), "not a revision") {
		t.Errorf("a missing revision: %v", err)
	}
	if _, err := ReadRevision(context.Background(), dir, "--output=/tmp/x"); err == nil {
		t.Error("an option taken for a revision")
	}
}
