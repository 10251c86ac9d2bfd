package controller

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// IsManifestName reports whether a file name (not a path) names a manifest:
// .yaml/.yml, not a status file, not hidden, not an editor temporary.
func IsManifestName(name string) bool {
	if name == "" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "#") {
		return false
	}
	if strings.HasSuffix(name, "~") || strings.Contains(name, "___jb_") {
		return false
	}
	if strings.HasSuffix(name, ".status.yaml") || strings.HasSuffix(name, ".status.yml") {
		return false
	}
	return strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml")
}

// Tree is one listing of a manifest directory tree.
type Tree struct {
	// Files are the manifest paths, as reached from the root (symlinks not
	// resolved, so a ConfigMap's foo.yaml stays foo.yaml), sorted.
	Files []string
	// Dirs are the directories to watch: every directory walked, and the real
	// directories behind symlinked ones.
	Dirs []string
}

// ListTree walks root recursively and returns the manifests below it. Hidden
// entries are skipped (that skips a ConfigMap's ..data and ..<timestamp>
// directories, while the visible symlinks into them are followed). Symlinked
// directories are followed once each (cycles are cut by device and inode).
func ListTree(root string) (Tree, error) {
	var t Tree
	seen := map[fileID]bool{}
	var walk func(dir string) error
	walk = func(dir string) error {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if id, ok := idOf(fi); ok {
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		t.Dirs = append(t.Dirs, dir)
		entries, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p := filepath.Join(dir, name)
			typ := e.Type()
			if typ&fs.ModeSymlink != 0 {
				fi, err := os.Stat(p)
				if err != nil {
					continue // dangling link: nothing to read
				}
				typ = fi.Mode().Type()
				if fi.IsDir() {
					// Watch the link's own directory too: a swap of the link is
					// an event there, not in the target.
					if err := walk(p); err != nil && !os.IsNotExist(err) {
						return err
					}
					continue
				}
			}
			switch {
			case typ.IsDir():
				if err := walk(p); err != nil && !os.IsNotExist(err) {
					return err
				}
			case typ.IsRegular() && IsManifestName(name):
				t.Files = append(t.Files, p)
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return Tree{}, err
	}
	sort.Strings(t.Files)
	return t, nil
}
