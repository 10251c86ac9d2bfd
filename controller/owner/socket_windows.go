//go:build windows

package owner

import (
	"context"
	"fmt"
	"net"

	"github.com/Microsoft/go-winio"
)

// SocketPath is the named pipe the owner of stateDir listens on, named
// after the state directory's absolute path.
func SocketPath(stateDir string) string {
	return `\\.\pipe\tether-` + stateKey(stateDir)
}

// ownerOnly is the pipe's security descriptor: protected (no inherited
// entries), full access for its creator-owner and for SYSTEM, nobody else
// (the Unix socket's mode 0600).
const ownerOnly = "D:P(A;;GA;;;OW)(A;;GA;;;SY)"

// Listen creates stateDir's named pipe; call it holding the lock. go-winio
// creates the first instance with FILE_FLAG_FIRST_PIPE_INSTANCE, so a pipe
// somebody else made under that name first is refused, not joined.
func Listen(stateDir string) (net.Listener, error) {
	ln, err := winio.ListenPipe(SocketPath(stateDir), &winio.PipeConfig{
		SecurityDescriptor: ownerOnly,
		InputBufferSize:    64 << 10,
		OutputBufferSize:   64 << 10,
	})
	if err != nil {
		return nil, fmt.Errorf("control pipe %s: %w", SocketPath(stateDir), err)
	}
	return ln, nil
}

func dial(ctx context.Context, stateDir string) (net.Conn, error) {
	return winio.DialPipeContext(ctx, SocketPath(stateDir))
}
