// Command hostileserver is an MCP server that tries what a malicious or
// compromised server would, for tether's sandbox tests
// (cmd/tether/sandbox_e2e_test.go, docs/security.md): each tool makes one
// attempt and answers "ok: ..." when it succeeded or "refused: ..." with the
// error when the kernel stopped it, and the server keeps serving either
// way. It speaks real MCP (the go-sdk's server) over stdio.
//
// It lives under testdata so that `go build ./...` leaves it alone; the
// tests build it explicitly.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"time"
	"unsafe"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/sys/unix"
)

// rlimitNPROC is RLIMIT_NPROC, which package syscall does not name.
const rlimitNPROC = 6

type pathArgs struct {
	Path string `json:"path"`
}

type addrArgs struct {
	Addr string `json:"addr"`
}

type fdArgs struct {
	FD int `json:"fd"`
}

type noArgs struct{}

func answer(format string, args ...any) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, args...)}}}, nil, nil
}

func outcome(err error, ok string) (*mcp.CallToolResult, any, error) {
	if err != nil {
		return answer("refused: %v", err)
	}
	return answer("ok: %s", ok)
}

func main() {
	s := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "read_file", Description: "read a file"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		b, err := os.ReadFile(a.Path)
		return outcome(err, string(b))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "chmod", Description: "set a file's mode to 0600"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		return outcome(os.Chmod(a.Path, 0o600), "chmod 0600 "+a.Path)
	})
	mcp.AddTool(s, &mcp.Tool{Name: "write_file", Description: "create a file"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		err := os.WriteFile(a.Path, []byte("written by hostileserver\n"), 0o600)
		return outcome(err, "wrote "+a.Path)
	})
	mcp.AddTool(s, &mcp.Tool{Name: "connect", Description: "open a TCP connection"}, func(_ context.Context, _ *mcp.CallToolRequest, a addrArgs) (*mcp.CallToolResult, any, error) {
		c, err := net.DialTimeout("tcp", a.Addr, 5*time.Second)
		if err == nil {
			_ = c.Close()
		}
		return outcome(err, "connected to "+a.Addr)
	})
	mcp.AddTool(s, &mcp.Tool{Name: "connect_unix", Description: "connect to a Unix socket file"}, func(_ context.Context, _ *mcp.CallToolRequest, a pathArgs) (*mcp.CallToolResult, any, error) {
		c, err := net.DialTimeout("unix", a.Path, 5*time.Second)
		if err == nil {
			_ = c.Close()
		}
		return outcome(err, "connected to "+a.Path)
	})
	mcp.AddTool(s, &mcp.Tool{Name: "io_uring", Description: "set up an io_uring, whose socket and connect operations are no syscalls"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		var params [120]byte // struct io_uring_params
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		if errno != 0 {
			return outcome(errno, "")
		}
		_ = unix.Close(int(fd))
		return outcome(nil, "an io_uring")
	})
	mcp.AddTool(s, &mcp.Tool{Name: "connect_mptcp", Description: "open a Multipath TCP connection"}, func(ctx context.Context, _ *mcp.CallToolRequest, a addrArgs) (*mcp.CallToolResult, any, error) {
		d := net.Dialer{Timeout: 5 * time.Second}
		d.SetMultipathTCP(true)
		c, err := d.DialContext(ctx, "tcp", a.Addr)
		mptcp := false
		if err == nil {
			mptcp, _ = c.(*net.TCPConn).MultipathTCP()
			_ = c.Close()
		}
		return outcome(err, fmt.Sprintf("connected to %s (multipath: %v)", a.Addr, mptcp))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "send_udp", Description: "send a UDP datagram"}, func(_ context.Context, _ *mcp.CallToolRequest, a addrArgs) (*mcp.CallToolResult, any, error) {
		c, err := net.Dial("udp", a.Addr)
		if err == nil {
			_, err = c.Write([]byte("hello"))
			_ = c.Close()
		}
		return outcome(err, "sent to "+a.Addr)
	})
	mcp.AddTool(s, &mcp.Tool{Name: "signal_parent", Description: "send SIGWINCH to the parent (tether)"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		ppid := os.Getppid()
		err := syscall.Kill(ppid, syscall.SIGWINCH)
		return outcome(err, fmt.Sprintf("signalled %d", ppid))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "interfaces", Description: "list the network interfaces that are up"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		ifs, err := net.Interfaces()
		var up []string
		for _, i := range ifs {
			if i.Flags&net.FlagUp != 0 {
				up = append(up, i.Name)
			}
		}
		return outcome(err, fmt.Sprint(up))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "limits", Description: "the process's resource limits"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		var as, nproc, nofile syscall.Rlimit
		err := errors.Join(syscall.Getrlimit(syscall.RLIMIT_AS, &as), syscall.Getrlimit(rlimitNPROC, &nproc), syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile))
		return outcome(err, fmt.Sprintf("as=%d nproc=%d nofile=%d", as.Max, nproc.Max, nofile.Max))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "tmpdir", Description: "the TMPDIR the server got"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		return answer("ok: %s", os.Getenv("TMPDIR"))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "read_fd", Description: "read an inherited file descriptor"}, func(_ context.Context, _ *mcp.CallToolRequest, a fdArgs) (*mcp.CallToolResult, any, error) {
		buf := make([]byte, 4096)
		n, err := syscall.Pread(a.FD, buf, 0)
		if n < 0 {
			n = 0
		}
		return outcome(err, string(buf[:n]))
	})
	mcp.AddTool(s, &mcp.Tool{Name: "capabilities", Description: "the process's capability sets (their bits) and how many the bounding set holds"}, func(_ context.Context, _ *mcp.CallToolRequest, _ noArgs) (*mcp.CallToolResult, any, error) {
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			return outcome(err, "")
		}
		bounding, ambient := 0, 0
		for c := 0; c < 64; c++ {
			if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in == 1 {
				bounding++
			}
			if in, err := unix.PrctlRetInt(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_IS_SET, uintptr(c), 0, 0); err == nil && in == 1 {
				ambient++
			}
		}
		return answer("ok: effective=%x permitted=%x inheritable=%x ambient=%d bounding=%d",
			uint64(data[1].Effective)<<32|uint64(data[0].Effective), uint64(data[1].Permitted)<<32|uint64(data[0].Permitted),
			uint64(data[1].Inheritable)<<32|uint64(data[0].Inheritable), ambient, bounding)
	})
	if err := s.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
