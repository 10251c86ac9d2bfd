//go:build unix

package owner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tether-mcp/tether/controller/boundedfile"
)

// maxSocketPath is the longest Unix socket path every platform binds
// (sun_path is 108 bytes on Linux, 104 on the BSDs and macOS, with its NUL).
const maxSocketPath = 103

// SocketPath is where the owner of stateDir listens: tether.sock in the
// state directory (mode 0700, so only tether's user reaches it), or, when
// that path is too long for a socket, a socket named after the directory
// in a directory of tether's user's own under the temporary directory.
func SocketPath(stateDir string) string {
	p := filepath.Join(canonical(stateDir), SocketName)
	if len(p) <= maxSocketPath {
		return p
	}
	return filepath.Join(shortSocketDir(), stateKey(stateDir)+".sock")
}

func shortSocketDir() string {
	return filepath.Join(os.TempDir(), "tether-"+strconv.Itoa(os.Getuid()))
}

// Listen listens on stateDir's socket. Call it holding the lock: a socket
// file found there is a dead owner's and is removed. The socket is mode
// 0600.
func Listen(stateDir string) (net.Listener, error) {
	path := SocketPath(stateDir)
	if filepath.Dir(path) == shortSocketDir() {
		if err := privateDir(filepath.Dir(path)); err != nil {
			return nil, err
		}
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("control socket %s: removing a dead owner's: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	// The state directory is 0700 already; the mode is the socket's own
	// authentication where it lives elsewhere.
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("control socket %s: %w", path, err)
	}
	return ln, nil
}

// privateDir makes dir (mode 0700) or checks that the one there is tether's
// user's alone: another user's would let them plant a socket that a bridge
// would send its client's requests to.
func privateDir(dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("control socket directory %s: %w", dir, err)
	}
	fi, err := os.Lstat(dir)
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory")
	}
	if err == nil {
		err = boundedfile.CheckPrivate(fi)
	}
	if err != nil {
		return fmt.Errorf("control socket directory %s is refused: %w", dir, err)
	}
	return nil
}

// dial connects to stateDir's socket, and only to one of tether's user's
// own in a directory others cannot write: a bridge sends it its client's
// requests, and tether connect or tether get may be pointed at a directory
// another user made (a shared checkout) where they could plant a socket.
func dial(ctx context.Context, stateDir string) (net.Conn, error) {
	path := SocketPath(stateDir)
	if err := checkSocket(path); err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// checkSocket checks that the socket at path and its directory are tether's
// user's and that nobody else may write them (the owner made the state
// directory 0700 and the socket 0600).
func checkSocket(path string) error {
	dir := filepath.Dir(path)
	if dir == shortSocketDir() {
		if err := privateDir(dir); err != nil {
			return err
		}
	} else if fi, err := os.Stat(dir); err == nil {
		if err := boundedfile.CheckPrivate(fi); err != nil {
			return fmt.Errorf("control socket %s is refused: its directory: %w", path, err)
		}
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	if err := boundedfile.CheckPrivate(fi); err != nil {
		return fmt.Errorf("control socket %s is refused: %w", path, err)
	}
	return nil
}
