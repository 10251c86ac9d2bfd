//go:build !unix

package boundedfile

import "os"

// open opens path for reading. Outside unix a FIFO is not a file of the
// file system: a Windows named pipe (\\.\pipe\…) opens at once or fails
// when busy, and Read refuses it on its mode before reading.
func open(path string) (*os.File, error) {
	return os.Open(path)
}

// openIn is open of name within root.
func openIn(root *os.Root, name string) (*os.File, error) {
	return root.Open(name)
}
