//go:build unix

// Package boundedfiletest makes the files a hostile tree plants where a
// reader expects a small regular file, for the tests of every reader of
// controller/boundedfile.
package boundedfiletest

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Hostile makes, in dir, a FIFO (reading it would wait for a writer), a
// symlink to /dev/zero (it never ends) and a regular file one byte over
// limit, and returns their paths.
func Hostile(t testing.TB, dir string, limit int) (fifo, zero, big string) {
	t.Helper()
	fifo = filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	zero = filepath.Join(dir, "zero")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big = filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("s", limit+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return fifo, zero, big
}
