//go:build unix

package manifest

import (
	"io/fs"
	"syscall"
)

// fileID tells one directory from another whatever path names it: the
// device and inode of what fi describes (path is not needed on Unix).
type fileID struct{ dev, ino uint64 }

func idOf(_ string, fi fs.FileInfo) (fileID, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fileID{}, false
	}
	return fileID{uint64(st.Dev), uint64(st.Ino)}, true
}
