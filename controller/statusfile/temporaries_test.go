package statusfile

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// Only a status file's temporary is removed, in the tree or under
// --status-dir, never what merely looks like one nor anything in a hidden
// directory (the state directory cleans its own).
func TestRemoveTemporaries(t *testing.T) {
	for _, separate := range []bool{false, true} {
		root := t.TempDir()
		top, statusDir := root, ""
		if separate {
			statusDir = t.TempDir()
			top = statusDir
		}
		stale := []string{
			filepath.Join(top, ".a.status.yaml.tmp-1"),
			filepath.Join(top, "team", ".b.status.yaml.tmp-4294967295"),
		}
		kept := []string{
			filepath.Join(top, ".a.yaml.tmp-1"),                   // a manifest's, not tether's
			filepath.Join(top, ".a.status.yaml.tmp-1x"),           // not CreateTemp's
			filepath.Join(top, ".tether", ".c.status.yaml.tmp-2"), // hidden directory
			filepath.Join(top, "a.status.yaml"),
		}
		for _, p := range append(slices.Clone(stale), kept...) {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		removed, err := NewWriter(root, statusDir, nil).RemoveTemporaries()
		slices.Sort(removed)
		if err != nil || !slices.Equal(removed, stale) {
			t.Errorf("status dir %q: removed %v, %v; want %v", statusDir, removed, err, stale)
		}
		for _, p := range kept {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s was removed: %v", p, err)
			}
		}
	}
}
