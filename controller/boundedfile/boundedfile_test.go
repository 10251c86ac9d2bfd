package boundedfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadRegular(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, limit := range []int64{5, 6} {
		data, fi, err := Read(p, limit)
		if err != nil || string(data) != "12345" || fi == nil || fi.Size() != 5 {
			t.Errorf("Read(limit %d) = %q, %v, %v; want the content", limit, data, fi, err)
		}
	}
	// A symlink to a regular file is read: ConfigMaps mount files so.
	link := filepath.Join(dir, "link")
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	if data, _, err := Read(link, 5); err != nil || string(data) != "12345" {
		t.Errorf("Read(symlink) = %q, %v", data, err)
	}
}

func TestReadTooLarge(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("12345"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, fi, err := Read(p, 4)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != 5 || tl.Limit != 4 || data != nil || fi == nil {
		t.Fatalf("Read(limit 4) = %q, %v, %v; want a TooLargeError of 5 over 4", data, fi, err)
	}
	if want := p + ": file is 5 bytes, over the limit of 4"; !strings.HasSuffix(err.Error(), want) {
		t.Errorf("error %q does not end with %q", err, want)
	}
}

// A file that is small when stat'ed and grows before it is read is still
// refused: /proc files stat as 0 bytes and hold more.
func TestReadGrown(t *testing.T) {
	const p = "/proc/self/status"
	fi, err := os.Stat(p)
	if err != nil || fi.Size() != 0 {
		t.Skip("no /proc file that stats as empty")
	}
	data, _, err := Read(p, 8)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != 9 || data != nil {
		t.Fatalf("Read(%s, 8) = %q, %v; want a TooLargeError of at least 9 bytes", p, data, err)
	}
}

func TestReadNotRegular(t *testing.T) {
	dir := t.TempDir()
	zero := filepath.Join(dir, "zero")
	if err := os.Symlink(os.DevNull, zero); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"directory": dir,
		"device":    zero,
	}
	if p := mkfifo(t, dir); p != "" {
		cases["named pipe"] = p
	}
	for what, p := range cases {
		data, fi, err := Read(p, 1<<20)
		if !errors.Is(err, ErrNotRegular) || data != nil || fi == nil {
			t.Errorf("%s: Read = %q, %v, %v; want ErrNotRegular", what, data, fi, err)
			continue
		}
		if !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "a "+what) {
			t.Errorf("%s: error %q names neither the path nor what it is", what, err)
		}
	}
}

func TestReadMissing(t *testing.T) {
	p := filepath.Join(t.TempDir(), "gone")
	if _, _, err := Read(p, 1); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestKind(t *testing.T) {
	for m, want := range map[fs.FileMode]string{
		fs.ModeDir:                        "a directory",
		fs.ModeNamedPipe:                  "a named pipe",
		fs.ModeSocket:                     "a socket",
		fs.ModeDevice | fs.ModeCharDevice: "a device",
		fs.ModeIrregular:                  "mode ?---------",
	} {
		if got := kind(m); got != want {
			t.Errorf("kind(%v) = %q, want %q", m, got, want)
		}
	}
}
