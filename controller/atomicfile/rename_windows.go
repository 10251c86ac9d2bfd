package atomicfile

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// renameTimeout bounds how long rename retries a replace that another
// process's open handle refuses (docs/reliability.md): os.Rename is
// MoveFileEx with MOVEFILE_REPLACE_EXISTING, atomic, but it fails with
// ERROR_ACCESS_DENIED or ERROR_SHARING_VIOLATION while the target is open
// without FILE_SHARE_DELETE, which is how Go, most editors and virus
// scanners open a file to read it. Such a reader holds it for
// milliseconds; one that holds it longer gets the error, and the write is
// tried again on the next change, as any failed status write is.
const renameTimeout = time.Second

// renameRetried is called after each refused attempt (tests release the
// handle there).
var renameRetried = func() {}

func rename(oldpath, newpath string) error {
	deadline := time.Now().Add(renameTimeout)
	wait := time.Millisecond
	for {
		err := os.Rename(oldpath, newpath)
		if err == nil || !refused(err) || time.Now().After(deadline) {
			return err
		}
		renameRetried()
		time.Sleep(wait) // no event says a handle was closed: back off
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// refused tells an open handle's refusal from a real error.
func refused(err error) bool {
	return errors.Is(err, windows.ERROR_ACCESS_DENIED) || errors.Is(err, windows.ERROR_SHARING_VIOLATION)
}
