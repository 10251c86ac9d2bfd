//go:build !windows

package atomicfile

import "os"

// rename replaces newpath with oldpath: rename(2) does it atomically, open
// readers of the old file keep reading it.
func rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
