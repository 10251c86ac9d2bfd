//go:build unix

package main

// Helpers for the end-to-end tests: they build the real tether binary, run
// it on a temporary manifest tree against real MCP servers, and read the
// status files it writes, as a user would.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/spec"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// repoRoot is the module root, two levels above this package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestMain removes the binaries built for the run (about 65 MB in the
// temporary directory each time, which piled up run after run) and runs
// what other helpers registered in afterTests (the tests' dockerd).
func TestMain(m *testing.M) {
	code := m.Run()
	for _, after := range afterTests {
		if err := after(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// afterTests run once every test has: what a helper shared between tests
// must stop.
var afterTests []func() error

// builtBinaries builds tether, the example server and the go-sdk
// conformance server once per test binary, static (CGO_ENABLED=0) as
// releases and `make build` are: a container server's env is set by
// tether's own binary inside the container, which a scratch image can run
// only when it needs no libc.
func builtBinaries(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tether-e2e-bin-")
		if buildErr != nil {
			return
		}
		root := repoRoot(t)
		for _, b := range []struct{ out, pkg string }{
			{"tether", "./cmd/tether"},
			{"tether-example-server", "./examples/server"},
			{"everything-server", "github.com/modelcontextprotocol/go-sdk/conformance/everything-server"},
		} {
			cmd := exec.Command("go", "build", "-o", filepath.Join(binDir, b.out), b.pkg)
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", b.pkg, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// npmPeer returns the path of an npm-installed MCP server, skipping the test
// when it is not installed (failing under CI=true, where it must be).
func npmPeer(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(repoRoot(t), "hack", "peers", "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("peer %s is not installed (run hack/install-peers.sh): %v", name, err)
		}
		t.Skipf("peer %s is not installed (run hack/install-peers.sh)", name)
	}
	return p
}

// tether is a running `tether run` process.
type tether struct {
	t    *testing.T
	cmd  *exec.Cmd
	dir  string
	logs *syncBuffer
	done chan struct{}
	err  error
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startTether runs `tether run --dir dir` with extra flags; the gateway and
// metrics listeners are off unless the flags turn them on.
func startTether(t *testing.T, dir string, extra ...string) *tether {
	t.Helper()
	return startTetherWithEnv(t, dir, nil, extra...)
}

// startTetherWithEnv is startTether with extra environment variables (later
// entries win over inherited ones).
func startTetherWithEnv(t *testing.T, dir string, env []string, extra ...string) *tether {
	t.Helper()
	bin := builtBinaries(t)
	args := append([]string{"run", "--dir", dir, "--listen", "", "--metrics-addr", "", "--log-level", "debug"}, extra...)
	cmd := exec.Command(filepath.Join(bin, "tether"), args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	tt := startCmd(t, cmd, dir)
	return tt
}

// startCmd starts cmd, a tether run on dir, with its output kept for the
// test; it is stopped (SIGTERM) when the test ends, and its log printed if
// the test failed.
func startCmd(t *testing.T, cmd *exec.Cmd, dir string) *tether {
	t.Helper()
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	must(t, cmd.Start())
	tt := &tether{t: t, cmd: cmd, dir: dir, logs: logs, done: make(chan struct{})}
	go func() { tt.err = cmd.Wait(); close(tt.done) }()
	t.Cleanup(func() {
		tt.stop()
		if t.Failed() {
			t.Logf("tether logs:\n%s", logs.String())
		}
	})
	return tt
}

// stop sends SIGTERM and waits for a clean exit.
func (tt *tether) stop() {
	select {
	case <-tt.done:
		return
	default:
	}
	_ = tt.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-tt.done:
	case <-time.After(30 * time.Second):
		_ = tt.cmd.Process.Kill()
		<-tt.done
		tt.t.Errorf("tether did not exit within 30s of SIGTERM")
	}
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// readStatus returns the status document for name in the status file of
// the manifest at path, or false when there is none (yet).
func readStatus(t testing.TB, manifest, name string) (spec.ConnectionStatus, bool) {
	t.Helper()
	base := strings.TrimSuffix(strings.TrimSuffix(manifest, ".yaml"), ".yml")
	data, err := os.ReadFile(base + ".status.yaml")
	if err != nil {
		return spec.ConnectionStatus{}, false
	}
	for _, raw := range bytes.Split(data, []byte("\n---\n")) {
		var doc spec.StatusDocument
		if err := yaml.UnmarshalStrict(raw, &doc); err != nil {
			t.Fatalf("status file of %s is not a strict status document: %v\n%s", manifest, err, data)
		}
		if doc.Metadata.Name == name {
			return doc.Status, true
		}
	}
	return spec.ConnectionStatus{}, false
}

// waitStatus polls the status of name until ok accepts it, failing after
// timeout with the last status seen.
func waitStatus(t testing.TB, manifest, name string, timeout time.Duration, what string, ok func(spec.ConnectionStatus) bool) spec.ConnectionStatus {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last spec.ConnectionStatus
	var seen bool
	for {
		st, found := readStatus(t, manifest, name)
		if found {
			last, seen = st, true
			if ok(st) {
				return st
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: status of %s never showed %s within %v; last (seen=%v): %+v", manifest, name, what, timeout, seen, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func phaseIs(p spec.Phase) func(spec.ConnectionStatus) bool {
	return func(st spec.ConnectionStatus) bool { return st.Phase == p }
}

// startServer starts a backend process for a test and stops it at cleanup.
func startServer(t testing.TB, env []string, name string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = backendSysProcAttr()
	var out syncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	})
	return cmd
}

// waitTCP waits until something accepts connections on port.
func waitTCP(t testing.TB, port int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on port %d after %v: %v", port, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processGone waits until pid no longer exists (or is a zombie nobody reaps).
func processGone(pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return true
		}
		// Field 3 is the state; Z is a zombie: dead, waiting to be reaped.
		if f := strings.Fields(string(data)); len(f) > 2 && f[2] == "Z" {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func stdioManifest(name, command string, args []string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: %s\nspec:\n  stdio:\n    command: %q\n", name, command)
	if len(args) > 0 {
		b.WriteString("    args:\n")
		for _, a := range args {
			fmt.Fprintf(&b, "      - %q\n", a)
		}
	}
	b.WriteString(extra)
	return b.String()
}

func httpManifest(name, url, transport, extra string) string {
	return fmt.Sprintf("apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: %s\nspec:\n  http:\n    url: %s\n    transport: %s\n%s", name, url, transport, extra)
}

// classicOverHTTP pins a go-sdk client over streamable HTTP to the classic
// protocol, whose sessions (list_changed on the standalone stream, the fast
// path, resources/subscribe) the tests using it are about: the go-sdk's
// client speaks 2026-07-28 by default, which the gateway serves over HTTP
// too, statelessly (clients_e2e_test.go tests that era). Over stdio the
// client keeps its default, as before.
func classicOverHTTP(transport mcp.Transport) *mcp.ClientSessionOptions {
	if _, ok := transport.(*mcp.StreamableClientTransport); ok {
		return &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}
	}
	return nil
}
