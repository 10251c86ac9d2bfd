//go:build linux

package main

// The kernel sandbox of stdio servers (docs/security.md), end to end: a
// hostile server (testdata/hostileserver) tries, through the real gateway,
// what a malicious server would; under spec.stdio.sandbox the kernel
// refuses each attempt and the server keeps serving; without it the same
// attempts succeed, which is what makes the test worth something.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

var (
	hostileOnce sync.Once
	hostileBin  string
	hostileErr  error
)

// hostileServer builds testdata/hostileserver once per test binary.
func hostileServer(t testing.TB) string {
	t.Helper()
	dir := builtBinaries(t)
	hostileOnce.Do(func() {
		out := filepath.Join(dir, "hostileserver")
		cmd := exec.Command("go", "build", "-o", out, "./cmd/tether/testdata/hostileserver")
		cmd.Dir = repoRoot(t)
		if b, err := cmd.CombinedOutput(); err != nil {
			hostileErr = fmt.Errorf("go build hostileserver: %v\n%s", err, b)
			return
		}
		hostileBin = out
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return hostileBin
}

// listenLoopback accepts (and closes) TCP connections on a loopback port
// until the test ends, and returns the port.
func listenLoopback(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// sandboxHome is a test HOME with a private key in ~/.ssh.
func sandboxHome(t *testing.T) (home, key string) {
	t.Helper()
	home = t.TempDir()
	must(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	key = filepath.Join(home, ".ssh", "id_ed25519")
	must(t, os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY----- test key\n"), 0o600))
	return home, key
}

// startSandboxTether runs tether with HOME set to home and its gateway on.
func startSandboxTether(t *testing.T, dir, home string, extra ...string) (*tether, endpoints) {
	t.Helper()
	gw := freePort(t)
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", gw)}, extra...)
	tt := startTetherWithEnv(t, dir, []string{"HOME=" + home}, args...)
	waitTCP(t, gw, 20*time.Second)
	return tt, endpoints{gateway: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)}
}

// attempt calls tool and returns its answer text, failing the test when the
// call itself fails (the server must keep serving).
func attempt(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := call(s, 20*time.Second, tool, args)
	if err != nil {
		t.Fatalf("%s %v: the call failed (the server should answer): %v", tool, args, err)
	}
	return textOf(res)
}

func expectPrefix(t *testing.T, what, got, prefix string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) {
		t.Errorf("%s: got %q, want it to start with %q", what, got, prefix)
	}
}

func TestSandboxRefusesAHostileServer(t *testing.T) {
	bin := hostileServer(t)
	home, key := sandboxHome(t)
	granted, other := listenLoopback(t), listenLoopback(t)
	dir := t.TempDir()
	allowed := filepath.Join(dir, "allowed")
	must(t, os.Mkdir(allowed, 0o700))
	// connect needs bestEffort on a kernel before Landlock ABI 10, which
	// leaves UDP open (the test kernel has ABI 7; docs/security.md).
	confined := fmt.Sprintf("    sandbox:\n      write: [%q]\n      network: connect\n      connect: [\"%d\"]\n      bestEffort: true\n", allowed, granted)
	writeFile(t, filepath.Join(dir, "confined.yaml"), stdioManifest("confined", bin, nil, confined))
	writeFile(t, filepath.Join(dir, "offline.yaml"), stdioManifest("offline", bin, nil, "    sandbox: {}\n"))
	writeFile(t, filepath.Join(dir, "open.yaml"), stdioManifest("open", bin, nil, ""))
	_, ep := startSandboxTether(t, dir, home)
	for _, name := range []string{"confined", "offline", "open"} {
		waitStatus(t, filepath.Join(dir, name+".yaml"), name, 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	}
	s := connectClient(t, ep)
	outside := filepath.Join(home, "outside.txt")
	grantedAddr, otherAddr := fmt.Sprintf("127.0.0.1:%d", granted), fmt.Sprintf("127.0.0.1:%d", other)

	// Without a sandbox, every attempt succeeds: the attempts are real.
	expectPrefix(t, "open: read ~/.ssh/id_ed25519", attempt(t, s, "open_read_file", map[string]any{"path": key}), "ok: -----BEGIN OPENSSH PRIVATE KEY")
	expectPrefix(t, "open: write outside", attempt(t, s, "open_write_file", map[string]any{"path": outside}), "ok: ")
	expectPrefix(t, "open: connect to a loopback port", attempt(t, s, "open_connect", map[string]any{"addr": otherAddr}), "ok: ")
	expectPrefix(t, "open: signal tether", attempt(t, s, "open_signal_parent", nil), "ok: ")
	must(t, os.Remove(outside))

	// Under the sandbox each is refused, and what is granted still works.
	expectPrefix(t, "confined: read ~/.ssh/id_ed25519", attempt(t, s, "confined_read_file", map[string]any{"path": key}), "refused: ")
	expectPrefix(t, "confined: write outside its grant", attempt(t, s, "confined_write_file", map[string]any{"path": outside}), "refused: ")
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("confined: %s exists after a refused write (%v)", outside, err)
	}
	expectPrefix(t, "confined: write inside its grant", attempt(t, s, "confined_write_file", map[string]any{"path": filepath.Join(allowed, "f")}), "ok: ")
	expectPrefix(t, "confined: connect to a port not granted", attempt(t, s, "confined_connect", map[string]any{"addr": otherAddr}), "refused: ")
	expectPrefix(t, "confined: connect to the granted port", attempt(t, s, "confined_connect", map[string]any{"addr": grantedAddr}), "ok: ")
	expectPrefix(t, "confined: signal tether", attempt(t, s, "confined_signal_parent", nil), "refused: ")

	// network none: its own empty network namespace.
	expectPrefix(t, "offline: connect to a loopback port", attempt(t, s, "offline_connect", map[string]any{"addr": grantedAddr}), "refused: ")
	expectPrefix(t, "offline: send UDP", attempt(t, s, "offline_send_udp", map[string]any{"addr": grantedAddr}), "refused: ")
	if got := attempt(t, s, "offline_interfaces", nil); got != "ok: []" {
		t.Errorf("offline: interfaces up = %q, want none", got)
	}
	expectPrefix(t, "offline: read ~/.ssh/id_ed25519", attempt(t, s, "offline_read_file", map[string]any{"path": key}), "refused: ")

	// Every server kept serving, in its first process, and says what
	// confines it.
	for name, want := range map[string]string{"confined": "landlock fs+net", "offline": "landlock fs+netns none", "open": ""} {
		st, _ := readStatus(t, filepath.Join(dir, name+".yaml"), name)
		if st.Phase != spec.PhaseConnected || st.Process == nil || st.Process.Restarts != 0 {
			t.Errorf("%s: phase %s, process %+v: want Connected, never restarted", name, st.Phase, st.Process)
		}
		if !strings.HasPrefix(st.Sandbox, want) || (want == "" && st.Sandbox != "") {
			t.Errorf("%s: status.sandbox = %q, want %q", name, st.Sandbox, want)
		}
	}
}
