package atomicfile

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/windows"
)

// A status file open in a reader (no FILE_SHARE_DELETE, as Go and most
// tools open a file) refuses a replace on Windows: Write retries until the
// reader lets go, and the file then holds the new content whole.
func TestWriteRetriesWhileTargetOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.status.yaml")
	if err := Write(path, []byte("old\n"), 0o644, 0o755); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	retries := 0
	renameRetried = func() {
		retries++
		if retries == 1 {
			_ = reader.Close()
		}
	}
	t.Cleanup(func() { renameRetried = func() {} })
	if err := Write(path, []byte("new\n"), 0o644, 0o755); err != nil {
		t.Fatalf("Write with the target open: %v", err)
	}
	if retries == 0 {
		t.Fatal("the open handle refused nothing: the test proves no retry")
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new\n" {
		t.Fatalf("read %q, %v; want the new content", got, err)
	}
}

// A reader that never lets go makes Write fail after renameTimeout with
// the refusal, leaving the old content and no temporary behind.
func TestWriteGivesUpWhileTargetStaysOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.status.yaml")
	if err := Write(path, []byte("old\n"), 0o644, 0o755); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	start := time.Now()
	err = Write(path, []byte("new\n"), 0o644, 0o755)
	if !errors.Is(err, windows.ERROR_ACCESS_DENIED) && !errors.Is(err, windows.ERROR_SHARING_VIOLATION) {
		t.Fatalf("Write with the target held open: %v, want the refusal", err)
	}
	if took := time.Since(start); took < renameTimeout {
		t.Errorf("gave up after %v, before renameTimeout (%v)", took, renameTimeout)
	}
	_ = reader.Close()
	got, _ := os.ReadFile(path)
	entries, _ := os.ReadDir(dir)
	if string(got) != "old\n" || len(entries) != 1 {
		t.Fatalf("after the failed write: %q and %d entries, want the old content alone", got, len(entries))
	}
}
