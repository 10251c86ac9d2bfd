// Package atomicfile writes a file so that a reader sees the old content or
// the new, never a part of one: a hidden temporary file in the same
// directory, then a rename. Status files and tether's state directory are
// written this way. On Windows the rename is retried for a bounded time
// while another process holds the target open (rename_windows.go).
package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tmpInfix is between the target's name and os.CreateTemp's random part
// in a temporary's name: ".NAME.tmp-DIGITS".
const tmpInfix = ".tmp-"

// Write replaces path with data, with mode perm whatever the umask. A
// missing directory is created (mode dirPerm) only when the first attempt
// finds it missing: at 1,000 status files every syscall of a write counts.
func Write(path string, data []byte, perm, dirPerm fs.FileMode) error {
	dir := filepath.Dir(path)
	pattern := "." + filepath.Base(path) + tmpInfix + "*"
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
		werr = rename(name, path)
	}
	if werr != nil {
		os.Remove(name)
		return werr
	}
	return nil
}

// TemporaryOf tells whether name (a file name, not a path) is exactly one
// of Write's temporaries, "." + target + ".tmp-" + os.CreateTemp's random
// part (the decimal digits of a uint32), and returns the target's name.
// A tether killed with SIGKILL between CreateTemp and Rename leaves one
// behind; anything else that merely looks like one is not tether's.
func TemporaryOf(name string) (target string, ok bool) {
	rest, ok := strings.CutPrefix(name, ".")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, tmpInfix)
	if i <= 0 {
		return "", false
	}
	digits := rest[i+len(tmpInfix):]
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		return "", false
	}
	if _, err := strconv.ParseUint(digits, 10, 32); err != nil {
		return "", false
	}
	return rest[:i], true
}

// RemoveTemporaries removes from dir (not below it) the regular files
// that are Write's temporaries of a file whose name keep accepts, and
// returns their paths. Call it only where no Write can run at the same
// time (at start): it cannot tell a leftover from a write in progress.
func RemoveTemporaries(dir string, keep func(target string) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var removed []string
	for _, e := range entries {
		target, ok := TemporaryOf(e.Name())
		if !ok || !e.Type().IsRegular() || !keep(target) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return removed, err
		}
		removed = append(removed, p)
	}
	return removed, nil
}
