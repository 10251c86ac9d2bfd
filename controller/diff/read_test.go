package diff

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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

// gitOut runs git in dir with input and returns its trimmed output.
func gitOut(t *testing.T, dir, input string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(input)
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir,
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

func needGit(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
}

// TestReadRevisionStaysInItsTree: a crafted commit whose tree holds a
// symlink d → a directory outside and a tree d with a manifest (git
// mktree takes both) must not write outside the temporary copy; a link
// that climbs out (../..) is not kept either, one inside the tree is.
func TestReadRevisionStaysInItsTree(t *testing.T) {
	needGit(t)
	repo := t.TempDir()
	outside := t.TempDir()
	git(t, repo, "init", "--quiet", "--initial-branch=main")
	manifestBlob := gitOut(t, repo, doc("a", "  stdio: {command: srv}\n"), "hash-object", "-w", "--stdin")
	abs := gitOut(t, repo, outside, "hash-object", "-w", "--stdin")
	climb := gitOut(t, repo, "../../../../../../../../../.."+outside, "hash-object", "-w", "--stdin")
	inside := gitOut(t, repo, "real", "hash-object", "-w", "--stdin")
	sub := gitOut(t, repo, "100644 blob "+manifestBlob+"\tx.yaml\n", "mktree")
	m := gitOut(t, repo, "120000 blob "+abs+"\td\n040000 tree "+sub+"\td\n"+
		"120000 blob "+climb+"\te\n040000 tree "+sub+"\te\n"+
		"120000 blob "+inside+"\tin\n040000 tree "+sub+"\treal\n", "mktree")
	top := gitOut(t, repo, "040000 tree "+m+"\tm\n", "mktree")
	commit := gitOut(t, repo, "", "commit-tree", top, "-m", "crafted")
	dir := filepath.Join(repo, "m")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := ReadRevision(context.Background(), dir, commit)
	if left, _ := os.ReadDir(outside); len(left) != 0 {
		t.Fatalf("ReadRevision wrote outside its copy: %v", left)
	}
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, strings.TrimPrefix(f.Path, dir+string(filepath.Separator)))
	}
	// d/x.yaml and e/x.yaml are the tree's own; in/x.yaml is real/x.yaml
	// reached through the link first (a directory is listed once).
	if want := []string{"d/x.yaml", "e/x.yaml", "in/x.yaml"}; !slices.Equal(got, want) {
		t.Errorf("files %v, want %v", got, want)
	}
}

// TestReadRevisionAsCommitted: the revision is read as committed, not as
// git archive exports it (.gitattributes' export-ignore hides a file,
// export-subst rewrites one), and its non-manifest files are never read:
// one bigger than the limit of what is read changes nothing.
func TestReadRevisionAsCommitted(t *testing.T) {
	needGit(t)
	repo := t.TempDir()
	git(t, repo, "init", "--quiet", "--initial-branch=main")
	dir := filepath.Join(repo, "m")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(dir, 0o755))
	must(os.WriteFile(filepath.Join(dir, ".gitattributes"), []byte("hidden.yaml export-ignore\nsubst.yaml export-subst\n"), 0o644))
	must(os.WriteFile(filepath.Join(dir, "hidden.yaml"), []byte(doc("hidden", "  stdio: {command: srv}\n")), 0o644))
	must(os.WriteFile(filepath.Join(dir, "subst.yaml"), []byte(doc("subst", "  stdio: {command: srv, args: [\"$Format:%H$\"]}\n")), 0o644))
	big, err := os.Create(filepath.Join(dir, "data.bin"))
	must(err)
	must(big.Truncate(MaxRevisionBytes + 1<<20))
	must(big.Close())
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "--quiet", "-m", "one")

	files, err := ReadRevision(context.Background(), dir, "HEAD")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[0].Path != filepath.Join(dir, "hidden.yaml") || files[0].Docs[0].Conn == nil {
		t.Fatalf("files %+v, want hidden.yaml and subst.yaml", files)
	}
	if c := files[1].Docs[0].Conn; c == nil || c.Spec.Stdio == nil || !slices.Equal(c.Spec.Stdio.Args, []string{"$Format:%H$"}) {
		t.Errorf("subst.yaml: %+v, want its args as committed", files[1].Docs[0])
	}
}
