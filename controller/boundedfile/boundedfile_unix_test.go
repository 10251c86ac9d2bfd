//go:build unix

package boundedfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// mkfifo makes a FIFO no one writes to: an open(2) without O_NONBLOCK
// would wait for a writer forever, and the test with it.
func mkfifo(t *testing.T, dir string) string {
	p := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckPrivate(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		perm os.FileMode
		want string
	}{
		{0o700, ""},
		{0o755, ""},
		{0o720, "writable by group or others (mode 0720)"},
		{0o702, "writable by group or others (mode 0702)"},
		{0o777, "writable by group or others (mode 0777)"},
	} {
		if err := os.Chmod(dir, tc.perm); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(dir)
		if err != nil {
			t.Fatal(err)
		}
		err = CheckPrivate(fi)
		if (err == nil) != (tc.want == "") || (err != nil && err.Error() != tc.want) {
			t.Errorf("mode %o: CheckPrivate = %v, want %q", tc.perm, err, tc.want)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// Owned by someone else: only root can make such a file here.
	if os.Geteuid() != 0 {
		return
	}
	p := filepath.Join(dir, "theirs")
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 4242, 4242); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckPrivate(fi); err == nil || !strings.Contains(err.Error(), "owned by uid 4242, not by tether's user (uid 0)") {
		t.Errorf("CheckPrivate(uid 4242) = %v", err)
	}
}

// ReadIn reads within an os.Root as Read does by path: a FIFO is refused
// without waiting for a writer, a file over the limit is refused, and a
// symlink out of the root is not followed.
func TestReadIn(t *testing.T) {
	dir := t.TempDir()
	mkfifo(t, dir)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if data, fi, err := ReadIn(root, "f", 10); err != nil || string(data) != "0123456789" || fi.Size() != 10 {
		t.Errorf("ReadIn(f) = %q, %v, %v", data, fi, err)
	}
	if _, _, err := ReadIn(root, "f", 9); err == nil || !strings.Contains(err.Error(), "over the limit of 9") {
		t.Errorf("ReadIn over the limit: %v", err)
	}
	if _, _, err := ReadIn(root, "fifo", 10); err == nil || !strings.Contains(err.Error(), "fifo: not a regular file (a named pipe)") {
		t.Errorf("ReadIn(fifo): %v", err)
	}
	if data, _, err := ReadIn(root, "out", 10); err == nil {
		t.Errorf("ReadIn followed a symlink out of the root: %q", data)
	}
}
