//go:build unix

package boundedfile

import (
	"fmt"
	"io/fs"
	"os"
	"syscall"
)

// CheckPrivate returns why fi, a file or directory that tether keeps for
// itself and acts on (the state directory, docs/contract.md), cannot be
// trusted: it is owned by another user than tether's, or group or others
// may write it, so that someone else could have planted what it holds.
// fi is best the one Read returns, found on the file that was read.
func CheckPrivate(fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); int64(st.Uid) != int64(uid) {
			return fmt.Errorf("owned by uid %d, not by tether's user (uid %d)", st.Uid, uid)
		}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("writable by group or others (mode %04o)", perm)
	}
	return nil
}
