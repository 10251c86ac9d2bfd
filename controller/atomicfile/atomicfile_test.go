//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Write creates a missing directory (a --status-dir tree), replaces
// the file whole, leaves no temporary file, and writes mode 0644 whatever
// the umask, so that other users' tools can read status.
func TestWrite(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "status", "team-a", "x.status.yaml")
	for _, data := range []string{"first\n", "second\n"} {
		if err := Write(path, []byte(data), 0o644, 0o755); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != data {
			t.Fatalf("read %q, %v; want %q", got, err, data)
		}
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := fi.Mode().Perm(); mode != 0o644 {
		t.Errorf("mode %v, want 0644", mode)
	}
	entries, err := os.ReadDir(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only the status file: %v", len(entries), entries)
	}
}
