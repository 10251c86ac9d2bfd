//go:build unix

package manifest

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/spec"
)

// TestIgnoreFileHostile: a .tetherignore that is a FIFO, a link to
// /dev/zero or over the manifest limit is reported, not read (a FIFO held
// the listing forever), and its directory is listed without its rules; a
// good one beside them still applies.
func TestIgnoreFileHostile(t *testing.T) {
	root := t.TempDir()
	for _, f := range []string{"a.yaml", "zero/b.yaml", "big/c.yaml", "good/d.yaml", "good/skip.yaml"} {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fifo := filepath.Join(root, IgnoreFile)
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(root, "zero", IgnoreFile)
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(root, "big", IgnoreFile)
	if err := os.WriteFile(big, []byte("c.yaml\n"+strings.Repeat("#", spec.MaxFileSize)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "good", IgnoreFile), []byte("skip.yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tree, err := ListTree(root)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range tree.Files {
		rel, _ := filepath.Rel(root, f)
		got = append(got, rel)
	}
	if want := []string{"a.yaml", "big/c.yaml", "good/d.yaml", "zero/b.yaml"}; !reflect.DeepEqual(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	want := map[string]string{
		fifo: "not a regular file (a named pipe)",
		zero: "not a regular file (a device)",
		big:  "over the limit of 1048576",
	}
	if len(tree.BadIgnoreFiles) != len(want) {
		t.Errorf("bad ignore files = %v, want %d", tree.BadIgnoreFiles, len(want))
	}
	for f, w := range want {
		if err := tree.BadIgnoreFiles[f]; err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %v, want %q", f, err, w)
		}
	}
}

// TestSourceReportsBadIgnoreFileOnce: the source logs a bad ignore file
// once while it stays bad, again when it breaks anew after a fix.
func TestSourceReportsBadIgnoreFileOnce(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.yaml"), []byte(manifest("a", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	ignore := filepath.Join(root, IgnoreFile)
	if err := os.Symlink("/dev/null", ignore); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, d)
	count := func() int { return strings.Count(logs.String(), "cannot use an ignore file") }
	sync := func() {
		t.Helper()
		if err := src.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	sync()
	sync()
	if n := count(); n != 1 {
		t.Fatalf("logged %d times while it stayed bad, want once:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "file="+ignore) || !strings.Contains(logs.String(), `err="not a regular file (a device)"`) {
		t.Errorf("the log line does not name the file and the problem:\n%s", logs.String())
	}
	if _, ok := d.Get("a"); !ok {
		t.Error("the manifest beside a bad ignore file is not listed")
	}
	// Another problem with the same file is news.
	if err := os.Remove(ignore); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(ignore, 0o644); err != nil {
		t.Fatal(err)
	}
	sync()
	if n := count(); n != 2 || !strings.Contains(logs.String(), "a named pipe") {
		t.Fatalf("a new problem logged %d times in all, want 2:\n%s", n, logs.String())
	}
	// Fixed, then broken the same way again: logged again.
	if err := os.Remove(ignore); err != nil {
		t.Fatal(err)
	}
	sync()
	if n := count(); n != 2 {
		t.Fatalf("logged after the fix:\n%s", logs.String())
	}
	if err := syscall.Mkfifo(ignore, 0o644); err != nil {
		t.Fatal(err)
	}
	sync()
	if n := count(); n != 3 {
		t.Errorf("broken again after a fix: logged %d times in all, want 3:\n%s", n, logs.String())
	}
}

// TestSourceSaysWhyNoLastValid: with the state directory refused, a
// connection that has no valid spec says why none was kept; a valid one
// and one invalid now but valid before keep their messages as they are.
func TestSourceSaysWhyNoLastValid(t *testing.T) {
	root := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(root, name+".yaml"), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("good", manifest("good", ""))
	write("bad", manifest("bad", "  helthCheck: {}\n"))
	write("later", manifest("later", ""))
	d := desired.NewStore()
	src := NewSource(SourceOptions{Root: root, NoLastValid: "state directory X is refused"}, d)
	if err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	write("later", manifest("later", "  helthCheck: {}\n"))
	if err := src.Sync(); err != nil {
		t.Fatal(err)
	}
	if e, _ := d.Get("bad"); e.Conn != nil || !strings.HasSuffix(e.ManifestError, "spec.helthCheck: unknown field (no last valid spec is kept: state directory X is refused)") {
		t.Errorf("bad: %q", e.ManifestError)
	}
	if e, _ := d.Get("later"); e.Conn == nil || !strings.HasSuffix(e.ManifestError, "spec.helthCheck: unknown field") {
		t.Errorf("later (valid before): %q", e.ManifestError)
	}
	if e, _ := d.Get("good"); e.Conn == nil || e.ManifestError != "" {
		t.Errorf("good: %+v", e)
	}
}
