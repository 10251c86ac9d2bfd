//go:build unix

package connection

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// Helpers that find and run the real peers that hack/install-peers.sh installs.

// repoRoot finds the module root from the test's working directory.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/tether-mcp/tether\n") {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("repository root (go.mod of github.com/tether-mcp/tether) not found above the working directory")
		}
		dir = parent
	}
}

// peer returns the path of a peer binary relative to the repository root. A
// missing peer skips the test, except under CI=true where it fails.
func peer(t testing.TB, rel, install string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), rel)
	if _, err := os.Stat(p); err != nil {
		msg := fmt.Sprintf("peer %s is missing (%v); install it with: %s", rel, err, install)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return p
}

func npmEverything(t testing.TB) string {
	return peer(t, "hack/peers/node_modules/.bin/mcp-server-everything", "cd hack/peers && npm ci")
}

func goEverything(t testing.TB) string {
	return peer(t, "bin/everything-server",
		"go build -o bin/everything-server github.com/modelcontextprotocol/go-sdk/conformance/everything-server")
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// httpPeer is an HTTP server process started by a test.
type httpPeer struct {
	cmd    *exec.Cmd
	port   int
	exited chan struct{} // closed once the server has been reaped
}

// kill kills the server and waits until it is reaped: the kernel tears
// down its sockets only then.
func (p *httpPeer) kill(t testing.TB) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		t.Fatal("killed server not reaped within 5s")
	}
}

// startHTTPPeer starts argv with extra env, waits until its port accepts TCP
// connections, and kills it (and its group) when the test ends.
func startHTTPPeer(t testing.TB, port int, env []string, argv ...string) *httpPeer {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = t.Output()
	cmd.Stderr = t.Output()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGCONT)
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			return &httpPeer{cmd: cmd, port: port, exited: exited}
		}
		select {
		case <-exited:
			t.Fatalf("%v exited before listening on %s", argv, addr)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v did not listen on %s within 15s", argv, addr)
		}
	}
}

func stdioSpec(command string, args ...string) *spec.Spec {
	return &spec.Spec{Stdio: &spec.StdioSpec{Command: command, Args: args}}
}

func httpSpec(url, transport string) *spec.Spec {
	return &spec.Spec{HTTP: &spec.HTTPSpec{URL: url, Transport: transport}}
}

func strptr(s string) *string { return &s }

// connect opens a session with a 20 s bound and closes it when the test ends.
func connect(t testing.TB, req Request) *Session {
	t.Helper()
	return connectWith(t, nil, req)
}

// newConnector is a Connector of the test's own, closed at its end.
func newConnector(t testing.TB) *Connector {
	c := NewConnector(ConnectorOptions{})
	t.Cleanup(c.Close)
	return c
}

// connectWith is connect through c, which shares its gates, version memory,
// transport and tool table with the test's other sessions through c; nil
// connects with a Connector of the session's own.
func connectWith(t testing.TB, c *Connector, req Request) *Session {
	t.Helper()
	if req.Logger == nil {
		req.Logger = testLogger(t)
	}
	if req.Name == "" {
		req.Name = "test"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	connect := Connect
	if c != nil {
		connect = c.Connect
	}
	s, err := connect(ctx, req)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// waitDone waits for the session to end by itself.
func waitDone(t testing.TB, s *Session, within time.Duration) {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(within):
		t.Fatalf("session did not end within %s", within)
	}
}

// groupGone waits until pid's process group is empty.
func groupGone(t testing.TB, pid int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		// groupAlive does not count zombies: this machine's init reaps
		// orphans seconds late.
		if !groupAlive(pid) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("process group %d still has a live member after %s", pid, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// schedSlack is what a bound may overrun on a loaded two-core machine: the
// stop sequence keeps its deadlines, but the goroutines that observe them
// get scheduled late.
const schedSlack = 500 * time.Millisecond
