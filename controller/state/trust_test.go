//go:build unix

package state

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/controller/desired"
)

const plantedSpec = `{"origin":"x.yaml","index":0,"dir":".","manifest":"` +
	`apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: gh}\nspec: {stdio: {command: x}}\n"}`

// A state directory someone else could write is refused whole, with an
// error that names it and says why: nothing planted there is used.
func TestOpenRefusesAStateDirOthersCanWrite(t *testing.T) {
	for _, tc := range []struct{ name, dir string }{
		{"the directory", "."},
		{"a directory in it", "specs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "state")
			if err := os.MkdirAll(filepath.Join(root, "specs"), 0o700); err != nil {
				t.Fatal(err)
			}
			writeFile(t, filepath.Join(root, "specs", "gh.json"), plantedSpec)
			bad := filepath.Join(root, tc.dir)
			if err := os.Chmod(bad, 0o777); err != nil {
				t.Fatal(err)
			}
			d, err := Open(root, 0)
			if d != nil || !errors.Is(err, ErrRefused) {
				t.Fatalf("Open = %v, %v; want it refused", d, err)
			}
			for _, want := range []string{"state directory " + root + " is refused", filepath.Clean(bad) + ": writable by group or others (mode 0777)"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if err := os.Chmod(bad, 0o700); err != nil {
				t.Fatal(err)
			}
			d, err = Open(root, 0)
			if err != nil {
				t.Fatalf("after chmod 0700: %v", err)
			}
			if got, problems := d.LoadSpecs(); len(got) != 1 || len(problems) != 0 {
				t.Errorf("after chmod 0700: loaded %v, problems %v", got, problems)
			}
		})
	}
}

// A new state directory is made 0700 whatever the umask, so that it
// passes its own check.
func TestOpenMakesAPrivateDir(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	root := filepath.Join(t.TempDir(), "state")
	if _, err := Open(root, 0); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(root)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory: %v, %v; want mode 0700", fi, err)
	}
}

// A file in it that others may write, that is not a regular file, or that
// is over the limit is ignored with a problem naming it.
func TestLoadRefusesUntrustedFiles(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "state"), int64(len(plantedSpec)))
	if err != nil {
		t.Fatal(err)
	}
	specs := filepath.Join(d.Path(), "specs")
	if err := os.MkdirAll(specs, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(specs, "gh.json"), plantedSpec)
	if err := os.Chmod(filepath.Join(specs, "gh.json"), 0o666); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(specs, "big.json"), plantedSpec+" ")
	got, problems := d.LoadSpecs()
	if len(got) != 0 {
		t.Errorf("loaded %v, want nothing", got)
	}
	joined := strings.Join(slices.Sorted(func(yield func(string) bool) {
		for _, p := range problems {
			if !yield(p.Error()) {
				return
			}
		}
	}), "\n")
	for _, want := range []string{
		"big.json: ignored: file is " + itoa(len(plantedSpec)+1) + " bytes, over the limit of " + itoa(len(plantedSpec)),
		"gh.json: ignored: writable by group or others (mode 0666)",
	} {
		if !strings.Contains(joined, want) {
			t.Errorf("problems lack %q:\n%s", want, joined)
		}
	}

	// A catalog that is a FIFO is refused without blocking.
	if err := os.MkdirAll(filepath.Join(d.Path(), "catalogs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(d.catalogPath("fs"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err := d.LoadCatalog("fs"); c != nil || err == nil || !strings.Contains(err.Error(), "fs.json: ignored: not a regular file (a named pipe)") {
		t.Errorf("LoadCatalog(FIFO) = %v, %v", c, err)
	}
	if err := d.SaveCatalog("ok", &catalog.Catalog{}); err != nil {
		t.Fatal(err)
	}
	if c, err := d.LoadCatalog("ok"); c == nil || err != nil {
		t.Errorf("LoadCatalog(ok) = %v, %v", c, err)
	}
}

// What a tether killed while writing left is removed at start; a file
// that only looks like it stays.
func TestRemoveTemporaries(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "state"), 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := decode(t, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: gh}\nspec: {stdio: {command: x}}\n")
	if err := d.SaveSpec(desired.Entry{Name: "gh", Origin: "x.yaml", Conn: conn}); err != nil {
		t.Fatal(err)
	}
	specs := filepath.Join(d.Path(), "specs")
	stale := filepath.Join(specs, ".gh.json.tmp-123")
	foreign := filepath.Join(specs, ".gh.json.tmp-123.keep")
	writeFile(t, stale, "")
	writeFile(t, foreign, "")
	removed, err := d.RemoveTemporaries()
	if err != nil || !slices.Equal(removed, []string{stale}) {
		t.Errorf("RemoveTemporaries = %v, %v; want [%s]", removed, err, stale)
	}
	for _, p := range []string{foreign, filepath.Join(specs, "gh.json")} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("%s is gone: %v", p, err)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// A file where tether keeps a directory is refused too.
func TestOpenRefusesAFileForASubdirectory(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(root, "specs"), "")
	if _, err := Open(root, 0); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), filepath.Join(root, "specs")+": not a directory") {
		t.Errorf("Open with a file as specs: %v", err)
	}
}
