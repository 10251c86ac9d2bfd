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
	root := filepath.Join(t.TempDir(), "state") // made under the usual umask: its parent must pass Open's check
	old := syscall.Umask(0)
	defer syscall.Umask(old)
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

// A state directory whose parent lets someone else rename it is refused:
// the parent is writable by others and not sticky, or owned by another
// user than tether's or root. A sticky one (as /tmp) is fine.
func TestOpenRefusesAParentOthersCanSwap(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(parent string) error
		want  string
	}{
		{"others may write it", func(p string) error { return os.Chmod(p, 0o777) }, "writable by group or others and not sticky (mode 0777)"},
		{"group may write it", func(p string) error { return os.Chmod(p, 0o770) }, "writable by group or others and not sticky (mode 0770)"},
		{"sticky", func(p string) error { return os.Chmod(p, 0o777|os.ModeSticky) }, ""},
		{"another user's", func(p string) error {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the directory to another user")
			}
			return os.Chown(p, 4242, -1)
		}, "owned by uid 4242, neither tether's user"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := filepath.Join(t.TempDir(), "parent")
			root := filepath.Join(parent, "state")
			if err := os.MkdirAll(root, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := tc.setup(parent); err != nil {
				t.Fatal(err)
			}
			d, err := Open(root, 0)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Open: %v", err)
				}
				d.Close()
				return
			}
			if d != nil || !errors.Is(err, ErrRefused) {
				t.Fatalf("Open = %v, %v; want it refused", d, err)
			}
			for _, want := range []string{"state directory " + root + " is refused", "the directory above it " + parent + ": " + tc.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

// After Open, every read goes through the directory it opened and
// checked: a directory swapped in at the same path (the real one renamed
// away) is never read.
func TestReadsGoThroughTheOpenedDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state")
	d, err := Open(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	conn := decode(t, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: gh}\nspec: {stdio: {command: checked}}\n")
	if err := d.SaveSpec(desired.Entry{Name: "gh", Origin: "x.yaml", Conn: conn}); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path, path+".away"); err != nil {
		t.Fatal(err)
	}
	for _, sub := range []string{"specs", "groups"} {
		if err := os.MkdirAll(filepath.Join(path, sub), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(path, "specs", "gh.json"), plantedSpec)
	writeFile(t, filepath.Join(path, "groups", "123.json"), `{"pgid":123}`)
	got, problems := d.LoadSpecs()
	if len(problems) != 0 || got["gh"].Conn == nil || got["gh"].Conn.Spec.Stdio.Command != "checked" {
		t.Errorf("LoadSpecs = %+v, %v; want the spec saved in the checked directory", got, problems)
	}
	if list, err := d.Files("groups").ReadDir(); err == nil || len(list) != 0 {
		t.Errorf("groups of the swapped-in directory listed: %v, %v", list, err)
	}
}

// The ledger's files (Files) pass the same checks as specs and catalogs:
// one that group or others may write, another user's, a FIFO or one over
// the limit is refused with why.
func TestFilesRefusesUntrustedFiles(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "state"), 64)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	groups := filepath.Join(d.Path(), "groups")
	if err := os.MkdirAll(groups, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(groups, "1.json"), `{"pgid":1}`)
	writeFile(t, filepath.Join(groups, "2.json"), `{"pgid":2}`)
	if err := os.Chmod(filepath.Join(groups, "2.json"), 0o620); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(groups, "3.json"), strings.Repeat(" ", 65))
	if err := syscall.Mkfifo(filepath.Join(groups, "4.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	f := d.Files("groups")
	if data, err := f.ReadFile("1.json"); err != nil || string(data) != `{"pgid":1}` {
		t.Errorf("ReadFile(1.json) = %q, %v", data, err)
	}
	cases := map[string]string{
		"2.json":    "writable by group or others (mode 0620)",
		"3.json":    "over the limit of 64",
		"4.json":    "not a regular file (a named pipe)",
		"../x.json": "not a file name",
	}
	if os.Geteuid() == 0 {
		writeFile(t, filepath.Join(groups, "5.json"), `{"pgid":5}`)
		if err := os.Chown(filepath.Join(groups, "5.json"), 4242, -1); err != nil {
			t.Fatal(err)
		}
		cases["5.json"] = "owned by uid 4242, not by tether's user"
	}
	for name, want := range cases {
		if data, err := f.ReadFile(name); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadFile(%s) = %q, %v; want an error with %q", name, data, err, want)
		}
	}
	if list, err := f.ReadDir(); err != nil || len(list) < 4 {
		t.Errorf("ReadDir = %v, %v", list, err)
	}
}

// TestOpenRefusesAnAncestorOthersCanSwap: every directory above the state
// directory is checked, not only its parent: one further up that others
// may write lets them rename the whole branch away.
func TestOpenRefusesAnAncestorOthersCanSwap(t *testing.T) {
	up := filepath.Join(t.TempDir(), "up")
	root := filepath.Join(up, "parent", "state")
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(up, 0o777); err != nil {
		t.Fatal(err)
	}
	d, err := Open(root, 0)
	if d != nil || !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "the directory above it "+up+": ") {
		t.Fatalf("Open = %v, %v; want it refused, naming %s", d, err, up)
	}
}
