package statusfile

import (
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/tether-mcp/tether/controller/atomicfile"
	"github.com/tether-mcp/tether/controller/manifest"
)

// RemoveTemporaries removes the temporaries of status files that a tether
// killed while it wrote one (SIGKILL between write and rename) left in the
// status directories, and returns their paths. Only names that are
// exactly a status file's temporary are touched, never anything else
// beside the manifests. Call it at start, before the first Put.
func (w *Writer) RemoveTemporaries() ([]string, error) {
	top := w.root
	if w.statusDir != "" {
		top = w.statusDir
	}
	var all []string
	err := filepath.WalkDir(top, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil // what cannot be read is left alone
		}
		if p != top && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir // the state directory, a ConfigMap's ..data
		}
		removed, err := atomicfile.RemoveTemporaries(p, func(target string) bool {
			return strings.HasSuffix(target, manifest.StatusSuffix)
		})
		all = append(all, removed...)
		return err
	})
	return all, err
}
