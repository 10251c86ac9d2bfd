// Package boundedfile reads the files tether takes from outside —
// manifests, .tetherignore files, status files, valueFrom.file secrets,
// token files, the state directory's files — so that a hostile one meets a
// limit: only a regular file is read, it is opened without blocking (a
// FIFO would otherwise hold the opener until a writer comes), and at most a
// given number of bytes is read (a symlink to /dev/zero never ends). It is
// a leaf: it imports nothing of tether's, so that the CLI's packages can
// use it too (docs/architecture.md).
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ErrNotRegular is wrapped by the error for a path that names a FIFO, a
// device, a socket or a directory.
var ErrNotRegular = errors.New("not a regular file")

// TooLargeError is the error for a file over the limit; Size is what it
// was found to hold (at least Limit+1 when it grew while read).
type TooLargeError struct {
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("file is %d bytes, over the limit of %d", e.Size, e.Limit)
}

// Read reads the regular file at path (a symlink is followed), of at most
// limit bytes. It returns the file's information as found on the open
// file, so that a caller's checks of mode and owner hold for what was
// read. Every error is an *fs.PathError naming path: a missing file is
// fs.ErrNotExist, a FIFO or device wraps ErrNotRegular, a file over the
// limit wraps a *TooLargeError. Nothing of the content is ever in an error.
func Read(path string, limit int64) ([]byte, fs.FileInfo, error) {
	return read(path, limit, func() (*os.File, error) { return open(path) })
}

// ReadIn is Read of name within root (os.Root): the file is found from the
// directory root holds open, not by a path that someone could redirect
// after the directory was checked, and a symlink that leaves root is
// refused. Errors name name as given.
func ReadIn(root *os.Root, name string, limit int64) ([]byte, fs.FileInfo, error) {
	return read(name, limit, func() (*os.File, error) { return openIn(root, name) })
}

func read(path string, limit int64, opener func() (*os.File, error)) ([]byte, fs.FileInfo, error) {
	f, fi, err := openChecked(path, opener)
	if err != nil {
		return nil, fi, err
	}
	defer f.Close()
	if fi.Size() > limit {
		return nil, fi, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: fi.Size(), Limit: limit}}
	}
	// The file may grow between Stat and read: read one byte past the
	// limit, so that a file grown too big is still refused.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fi, &fs.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit {
		return nil, fi, &fs.PathError{Op: "read", Path: path, Err: &TooLargeError{Size: int64(len(data)), Limit: limit}}
	}
	return data, fi, nil
}

// Open opens the regular file at path for reading, without blocking, and
// returns it with its information as found on the open file. A FIFO,
// device, socket or directory is refused (an *fs.PathError wrapping
// ErrNotRegular, with the information) and closed unread. For a reader
// that reads only a part of a file; the caller bounds what it reads.
func Open(path string) (*os.File, fs.FileInfo, error) {
	return openChecked(path, func() (*os.File, error) { return open(path) })
}

func openChecked(path string, opener func() (*os.File, error)) (*os.File, fs.FileInfo, error) {
	f, err := opener()
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fi, &fs.PathError{Op: "open", Path: path, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(fi.Mode()))}
	}
	return f, fi, nil
}

// kind names what a path that is not a regular file is, for its error.
func kind(m fs.FileMode) string {
	for _, k := range kinds {
		if m&k.bit != 0 {
			return k.name
		}
	}
	return "mode " + m.String()
}

var kinds = []struct {
	bit  fs.FileMode
	name string
}{
	{fs.ModeDir, "a directory"},
	{fs.ModeNamedPipe, "a named pipe"},
	{fs.ModeSocket, "a socket"},
	{fs.ModeDevice, "a device"},
}
