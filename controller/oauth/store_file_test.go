//go:build unix

package oauth

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// A token file that is a FIFO, too big, or writable by others is refused
// with an error naming it, never read or trusted.
func TestLoadRefusesUntrustedTokenFiles(t *testing.T) {
	s := NewStore(t.TempDir())
	if err := os.MkdirAll(s.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(s.Path("fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path("big"), []byte(strings.Repeat(" ", MaxTokenFileSize+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Save("shared", &Record{AccessToken: "a-token"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(s.Path("shared"), 0o666); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"fifo":   "token file " + s.Path("fifo") + ": not a regular file (a named pipe)",
		"big":    "token file " + s.Path("big") + ": file is 65537 bytes, over the limit of 65536",
		"shared": "token file " + s.Path("shared") + ": writable by group or others (mode 0666)",
	} {
		if r, err := s.Load(name); r != nil || err == nil || err.Error() != want {
			t.Errorf("Load(%s) = %v, %v; want %q", name, r, err, want)
		}
	}
	if err := os.Chmod(s.Path("shared"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Load("shared"); err != nil || r == nil || r.AccessToken != "a-token" {
		t.Errorf("Load(shared, 0600) = %v, %v", r, err)
	}
}
