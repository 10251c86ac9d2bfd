// Package atomicfile writes a file so that a reader sees the old content or
// the new, never a part of one: a hidden temporary file in the same
// directory, then a rename. Status files and tether's state directory are
// written this way.
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// Write replaces path with data, with mode perm whatever the umask. A
// missing directory is created (mode dirPerm) only when the first attempt
// finds it missing: at 1,000 status files every syscall of a write counts.
func Write(path string, data []byte, perm, dirPerm fs.FileMode) error {
	dir := filepath.Dir(path)
	pattern := "." + filepath.Base(path) + ".tmp-*"
	tmp, err := os.CreateTemp(dir, pattern)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, dirPerm); err == nil {
			tmp, err = os.CreateTemp(dir, pattern)
		}
	}
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, werr := tmp.Write(data)
	if werr == nil {
		werr = tmp.Chmod(perm) // on the open file: no second path lookup
	}
	cerr := tmp.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Rename(name, path)
	}
	if werr != nil {
		os.Remove(name)
		return werr
	}
	return nil
}
