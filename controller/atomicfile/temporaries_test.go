package atomicfile

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestTemporaryOf(t *testing.T) {
	for name, want := range map[string]string{
		".x.status.yaml.tmp-0":          "x.status.yaml",
		".x.status.yaml.tmp-4294967295": "x.status.yaml",
		".a.tmp-b.json.tmp-17":          "a.tmp-b.json",
		".x.tmp-4294967296":             "", // over a uint32: not CreateTemp's
		".x.tmp-":                       "",
		".x.tmp-12a":                    "",
		".x.tmp-+12":                    "",
		"x.tmp-12":                      "", // not hidden
		"..tmp-12":                      "", // no target
		".x.status.yaml.tmp-12.bak":     "",
		".x.status.yaml.temp-12":        "",
	} {
		got, ok := TemporaryOf(name)
		if ok != (want != "") || got != want {
			t.Errorf("TemporaryOf(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}

// What Write leaves when killed between CreateTemp and Rename is removed;
// what only looks like it, or is the temporary of a file the caller does
// not own, is left.
func TestRemoveTemporaries(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.status.yaml")
	if err := Write(path, []byte("ok\n"), 0o644, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.CreateTemp(dir, ".x.status.yaml"+tmpInfix+"*")
	if err != nil {
		t.Fatal(err)
	}
	tmp.Close()
	foreign := []string{".x.status.yaml.tmp-12.bak", ".x.status.yaml.tmp-x1", ".notes.txt.tmp-5"}
	for _, f := range foreign {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// A directory named like a temporary is not a file Write made.
	if err := os.Mkdir(filepath.Join(dir, ".y.status.yaml.tmp-9"), 0o700); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveTemporaries(dir, func(target string) bool { return strings.HasSuffix(target, ".status.yaml") })
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(removed, []string{tmp.Name()}) {
		t.Errorf("removed %v, want only %s", removed, tmp.Name())
	}
	left, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	want := append([]string{".y.status.yaml.tmp-9", "x.status.yaml"}, foreign...)
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("left %v, want %v", names, want)
	}
	if removed, err := RemoveTemporaries(filepath.Join(dir, "missing"), func(string) bool { return true }); err != nil || removed != nil {
		t.Errorf("RemoveTemporaries(missing dir) = %v, %v; want nothing", removed, err)
	}
}
