//go:build windows

package owner

import (
	"os"

	"golang.org/x/sys/windows"
)

var errWouldBlock error = windows.ERROR_LOCK_VIOLATION

// lockFile takes an exclusive LockFileEx on the first byte of f: Windows
// drops it when the handle closes or the process ends.
func lockFile(f *os.File, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	ol := new(windows.Overlapped)
	err := windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, ol)
	if err == windows.ERROR_IO_PENDING {
		return errWouldBlock
	}
	return err
}
