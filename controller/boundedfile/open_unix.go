//go:build unix

package boundedfile

import (
	"os"
	"syscall"
)

// open opens path for reading without blocking: open(2) of a FIFO waits
// for a writer unless O_NONBLOCK is given. For a regular file the flag
// changes nothing, so the file is read as it is. O_NOCTTY keeps a
// terminal device from becoming tether's controlling terminal before it is
// refused.
func open(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}

// openIn is open of name within root.
func openIn(root *os.Root, name string) (*os.File, error) {
	return root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}
