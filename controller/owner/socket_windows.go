//go:build windows

package owner

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/Microsoft/go-winio"
	"golang.org/x/sys/windows"
)

// SocketPath is the named pipe the owner of stateDir listens on, named
// after the state directory's absolute path.
func SocketPath(stateDir string) string {
	return `\\.\pipe\tether-` + stateKey(stateDir)
}

// pipeSecurity is the pipe's security descriptor: owned by tether's user
// (set explicitly: an elevated process's default owner is the
// Administrators group, which dial would refuse), protected (no inherited
// entries), full access for that owner and for SYSTEM, nobody else (the
// Unix socket's mode 0600).
func pipeSecurity(user *windows.SID) string {
	return "O:" + user.String() + "D:P(A;;GA;;;OW)(A;;GA;;;SY)"
}

// Listen creates stateDir's named pipe; call it holding the lock. go-winio
// creates the first instance with FILE_FLAG_FIRST_PIPE_INSTANCE, so a pipe
// somebody else made under that name first is refused, not joined.
func Listen(stateDir string) (net.Listener, error) {
	user, err := currentUser()
	if err != nil {
		return nil, fmt.Errorf("control pipe %s: %w", SocketPath(stateDir), err)
	}
	ln, err := winio.ListenPipe(SocketPath(stateDir), &winio.PipeConfig{
		SecurityDescriptor: pipeSecurity(user),
		InputBufferSize:    64 << 10,
		OutputBufferSize:   64 << 10,
	})
	if err != nil {
		return nil, fmt.Errorf("control pipe %s: %w", SocketPath(stateDir), err)
	}
	return ln, nil
}

// dial connects to stateDir's pipe, and only to one of tether's user's own:
// the pipe namespace is shared by every user of the host, and a pipe that
// another user created first under that name would otherwise be sent this
// user's client's requests (the Unix socket's private directory).
func dial(ctx context.Context, stateDir string) (net.Conn, error) {
	conn, err := winio.DialPipeContext(ctx, SocketPath(stateDir))
	if err != nil {
		return nil, err
	}
	if err := checkPipeOwner(conn); err != nil {
		conn.Close()
		return nil, fmt.Errorf("control pipe %s is refused: %w", SocketPath(stateDir), err)
	}
	return conn, nil
}

func checkPipeOwner(conn net.Conn) error {
	f, ok := conn.(interface{ Fd() uintptr })
	if !ok {
		return errors.New("its handle cannot be read")
	}
	sd, err := windows.GetSecurityInfo(windows.Handle(f.Fd()), windows.SE_KERNEL_OBJECT, windows.OWNER_SECURITY_INFORMATION)
	if err != nil {
		return fmt.Errorf("reading its owner: %w", err)
	}
	owner, _, err := sd.Owner()
	if err != nil {
		return fmt.Errorf("reading its owner: %w", err)
	}
	user, err := currentUser()
	if err != nil {
		return err
	}
	if owner == nil || !owner.Equals(user) {
		return fmt.Errorf("it is owned by %v, not by tether's user %s", owner, user)
	}
	return nil
}

// currentUser is the SID of the user the process runs as.
func currentUser() (*windows.SID, error) {
	tu, err := windows.GetCurrentProcessToken().GetTokenUser()
	if err != nil {
		return nil, fmt.Errorf("the process's user: %w", err)
	}
	return tu.User.Sid, nil
}
