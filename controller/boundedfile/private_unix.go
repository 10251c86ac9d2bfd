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

// CheckAncestor returns why fi, a directory above one that tether keeps
// for itself, lets someone else replace what is under it: it is owned by
// another user than tether's or root, or group or others may write it and
// it is not sticky (in a sticky directory, as /tmp, only an entry's owner
// may rename or remove it).
func CheckAncestor(fi fs.FileInfo) error {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		if uid := os.Geteuid(); st.Uid != 0 && int64(st.Uid) != int64(uid) {
			return fmt.Errorf("owned by uid %d, neither tether's user (uid %d) nor root", st.Uid, uid)
		}
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("writable by group or others and not sticky (mode %04o)", perm)
	}
	return nil
}
