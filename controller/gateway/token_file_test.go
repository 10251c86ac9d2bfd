//go:build unix

package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An auth token file that is a FIFO, a device or too big is refused at
// once with an error naming it: start-up must not hang on it.
func TestReadTokenRefusesWhatIsNotATokenFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("t", maxTokenFileSize+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		fifo: "gateway: auth token file: open " + fifo + ": not a regular file (a named pipe)",
		zero: "gateway: auth token file: open " + zero + ": not a regular file (a device)",
		big:  "gateway: auth token file: read " + big + ": file is 65537 bytes, over the limit of 65536",
	} {
		if b, err := readToken(file); err == nil || err.Error() != want || b != nil {
			t.Errorf("readToken(%s) = %q, %v; want %q", file, b, err, want)
		}
	}
}
