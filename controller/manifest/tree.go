package manifest

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Tree is one listing of a manifest directory tree.
type Tree struct {
	// Files are the manifest paths, as reached from the root (symlinks not
	// resolved, so a ConfigMap's foo.yaml stays foo.yaml), sorted.
	Files []string
	// Dirs are the directories to watch: every directory walked, and the real
	// directories behind symlinked ones.
	Dirs []string
	// Unreadable are the directories below the root that could not be
	// listed (permissions, a passing EMFILE), with why. What they held is
	// unknown, not gone: the source keeps the connections declared there.
	Unreadable map[string]error
	// BadIgnoreFiles are the .tetherignore files that cannot be used (not
	// a regular file, too big, unreadable), with why. Their directories
	// are listed without their rules: one bad file must not hide a tree.
	BadIgnoreFiles map[string]error
}

// ListTree walks root recursively and returns the manifests below it. Hidden
// entries are skipped (that skips a ConfigMap's ..data and ..<timestamp>
// directories, while the visible symlinks into them are followed). Symlinked
// directories are followed once each (cycles are cut by device and inode).
func ListTree(root string) (Tree, error) {
	var t Tree
	seen := map[fileID]bool{}
	var walk func(dir string, rules []ignoreRule) error
	// A directory below the root that cannot be read is reported, not
	// fatal: one lost+found must not make the whole tree look empty.
	descend := func(p string, rules []ignoreRule) {
		if err := walk(p, rules); err != nil && !os.IsNotExist(err) {
			if t.Unreadable == nil {
				t.Unreadable = map[string]error{}
			}
			t.Unreadable[p] = err
		}
	}
	walk = func(dir string, rules []ignoreRule) error {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if id, ok := idOf(dir, fi); ok {
			if seen[id] {
				return nil
			}
			seen[id] = true
		}
		t.Dirs = append(t.Dirs, dir)
		more, err := readIgnoreFile(dir)
		if err != nil {
			if t.BadIgnoreFiles == nil {
				t.BadIgnoreFiles = map[string]error{}
			}
			t.BadIgnoreFiles[filepath.Join(dir, IgnoreFile)] = err
		}
		if more != nil {
			rules = append(rules[:len(rules):len(rules)], more...)
		}
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
					if ignored(rules, p, true) {
						continue
					}
					// Watch the link's own directory too: a swap of the link is
					// an event there, not in the target.
					descend(p, rules)
					continue
				}
			}
			if ignored(rules, p, typ.IsDir()) {
				continue
			}
			switch {
			case typ.IsDir():
				descend(p, rules)
			case typ.IsRegular() && IsManifestName(name):
				t.Files = append(t.Files, p)
			}
		}
		return nil
	}
	if err := walk(root, nil); err != nil {
		return Tree{}, err
	}
	sort.Strings(t.Files)
	return t, nil
}
