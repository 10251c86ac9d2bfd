//go:build linux

package main

// End-to-end tests of one owner per directory (docs/contract.md, "One owner
// per directory"; docs/reliability.md, "Takeover"): the real tether binary,
// real MCP clients (the go-sdk's, the MCP Inspector CLI) and the example
// server as a real stdio child.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/owner"
	"github.com/tether-mcp/tether/spec"
)

// ownedServer copies the example server to a path of the test's own, so
// that its processes can be counted by their executable.
func ownedServer(t *testing.T) string {
	t.Helper()
	src, err := os.Open(filepath.Join(builtBinaries(t), "tether-example-server"))
	must(t, err)
	defer src.Close()
	path := filepath.Join(t.TempDir(), "owned-example-server")
	dst, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	must(t, err)
	_, err = io.Copy(dst, src)
	must(t, err)
	must(t, dst.Close())
	return path
}

// serverProcesses lists the live processes whose executable is exe.
func serverProcesses(t *testing.T, exe string) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	must(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		target, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe"))
		if err != nil || target != exe {
			continue
		}
		if data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil {
			if f := strings.Fields(string(data)); len(f) > 2 && f[2] == "Z" {
				continue
			}
		}
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}

// waitServers waits until exactly n processes run exe.
func waitServers(t *testing.T, exe string, n int, what string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		pids := serverProcesses(t, exe)
		if len(pids) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d server processes %v, want %d", what, len(pids), pids, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stdioTether is a `tether run --stdio` with a go-sdk client on its
// stdin/stdout.
type stdioTether struct {
	*gatewayClient
	cmd  *exec.Cmd
	logs *syncBuffer
}

// startStdioTether starts one; protocol pins the client's protocol
// version ("" for the go-sdk's default, 2026-07-28).
func startStdioTether(t *testing.T, dir, protocol string) *stdioTether {
	t.Helper()
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), "run", "--stdio", "--dir", dir, "--metrics-addr", "", "--log-level", "debug")
	logs := &syncBuffer{}
	cmd.Stderr = logs
	st := &stdioTether{cmd: cmd, logs: logs}
	var opts *mcp.ClientSessionOptions
	if protocol != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: protocol}
	}
	st.gatewayClient = connectGatewayWith(t, &mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, opts)
	if got := st.session.InitializeResult().ProtocolVersion; protocol != "" && got != protocol {
		t.Fatalf("the client speaks %s, want %s", got, protocol)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs of tether pid %d:\n%s", cmd.Process.Pid, logs.String())
		}
	})
	return st
}

func (st *stdioTether) echo(t *testing.T, text string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := st.session.CallTool(ctx, &mcp.CallToolParams{Name: "ex_echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return err
	}
	if !strings.Contains(textOf(res), text) {
		return fmt.Errorf("ex_echo answered %q, want %q in it", textOf(res), text)
	}
	return nil
}

// statusWatcher reads a status file until stopped and keeps every phase
// and Ready message it saw.
type statusWatcher struct {
	mu   sync.Mutex
	seen []string
	stop chan struct{}
	done chan struct{}
}

func watchStatus(t *testing.T, manifest, name string) *statusWatcher {
	w := &statusWatcher{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if st, ok := readStatus(t, manifest, name); ok {
				msg := ""
				for _, c := range st.Conditions {
					if c.Type == "Ready" {
						msg = c.Reason + ": " + c.Message
					}
				}
				w.mu.Lock()
				if s := string(st.Phase) + " " + msg; len(w.seen) == 0 || w.seen[len(w.seen)-1] != s {
					w.seen = append(w.seen, s)
				}
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *statusWatcher) end() []string {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

// TestOwnerStdioTethersShareOneOwner: three `tether run --stdio` on one
// directory (and the MCP Inspector CLI as a fourth client) share one set
// of server processes. When the first one's client leaves, a bridge takes
// over: no status is written as stopped, a call in flight at that moment
// gets a clear error, and every call afterwards is answered.
func TestOwnerStdioTethersShareOneOwner(t *testing.T) {
	server := ownedServer(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "ex.yaml")
	writeFile(t, manifest, stdioManifest("ex", server, nil, ""))

	first := startStdioTether(t, dir, "")
	first.waitTools(t, "ex's tools", hasAll("ex_echo"))
	waitStatus(t, manifest, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	// The second client speaks 2026-07-28 (no handshake; notifications on
	// its subscriptions/listen stream), the third 2025-11-25 (initialize):
	// the bridge re-establishes each as its era needs.
	second := startStdioTether(t, dir, "")
	third := startStdioTether(t, dir, "2025-11-25")
	for i, st := range []*stdioTether{first, second, third} {
		st.waitTools(t, "ex's tools", hasAll("ex_echo"))
		if err := st.echo(t, fmt.Sprintf("client %d", i+1)); err != nil {
			t.Fatalf("client %d: %v", i+1, err)
		}
	}
	for i, st := range []*stdioTether{second, third} {
		if !strings.Contains(st.logs.String(), "bridging stdio") {
			t.Errorf("tether %d did not bridge to the owner:\n%s", i+2, st.logs.String())
		}
	}
	waitServers(t, server, 1, "three stdio tethers on one directory")

	// A fourth client, the MCP Inspector CLI, through its own tether run --stdio.
	inspector := npmPeer(t, "mcp-inspector")
	ictx, icancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer icancel()
	icmd := exec.CommandContext(ictx, inspector, "--cli", filepath.Join(builtBinaries(t), "tether"), "run", "--stdio", "--dir", dir, "--metrics-addr", "", "--method", "tools/list")
	icmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := icmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `"ex_echo"`) {
		t.Fatalf("the MCP Inspector through a bridge: %v\n%s", err, out)
	}
	if n := len(serverProcesses(t, server)); n != 1 {
		t.Errorf("with the inspector's tether too: %d server processes, want 1", n)
	}

	watch := watchStatus(t, manifest, "ex")
	changes2, changes3 := second.changes(), third.changes()
	// A call in flight when the owner goes.
	inFlight := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		close(started)
		_, err := second.session.CallTool(ctx, &mcp.CallToolParams{Name: "ex_slow", Arguments: map[string]any{"seconds": 30, "steps": 300},
			Meta: mcp.Meta{"progressToken": "in-flight"}})
		inFlight <- err
	}()
	<-started
	waitUntil(t, "the slow call's first progress", func() bool {
		second.mu.Lock()
		defer second.mu.Unlock()
		return len(second.progress) > 0
	})

	// The first client leaves: its tether, the owner, exits.
	if err := first.session.Close(); err != nil {
		t.Logf("closing the first client: %v", err)
	}
	exited := time.Now()
	if !first.cmd.ProcessState.Exited() {
		t.Fatalf("the first tether did not exit: %v", first.cmd.ProcessState)
	}
	if !strings.Contains(first.logs.String(), "handing the directory over") {
		t.Errorf("the owner did not hand over:\n%s", first.logs.String())
	}
	select {
	case err := <-inFlight:
		if err == nil || !strings.Contains(err.Error(), "went away before answering") {
			t.Errorf("the call in flight at the takeover: %v, want the bridge's error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call in flight at the takeover never ended")
	}

	// No call lost afterwards: each waits, held by its bridge, for the
	// next owner.
	if err := second.echo(t, "after takeover 2"); err != nil {
		t.Fatalf("second client after the takeover: %v", err)
	}
	takeover := time.Since(exited)
	if err := third.echo(t, "after takeover 3"); err != nil {
		t.Fatalf("third client after the takeover: %v", err)
	}
	t.Logf("takeover: the first call answered %v after the owner exited", takeover)
	// The clients were told that their lists may have changed.
	second.waitChange(t, changes2, "for the 2026-07-28 client after the takeover")
	third.waitChange(t, changes3, "for the 2025-11-25 client after the takeover")
	// What the new owner sends reaches both: the 2026-07-28 client's
	// subscriptions/listen stream was opened again there.
	changes2, changes3 = second.changes(), third.changes()
	writeFile(t, filepath.Join(dir, "more.yaml"), stdioManifest("more", filepath.Join(builtBinaries(t), "tether-example-server"), nil, ""))
	second.waitChange(t, changes2, "from the new owner for the 2026-07-28 client")
	third.waitChange(t, changes3, "from the new owner for the 2025-11-25 client")
	second.waitTools(t, "the new connection's tools", hasAll("ex_echo", "more_echo"))
	took := 0
	for _, st := range []*stdioTether{second, third} {
		if strings.Contains(st.logs.String(), "took the directory over") {
			took++
		}
	}
	if took != 1 {
		t.Errorf("%d bridges took the directory over, want 1", took)
	}
	waitServers(t, server, 1, "after the takeover")
	waitStatus(t, manifest, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	for _, s := range watch.end() {
		if strings.Contains(s, "Stopped") || strings.HasPrefix(s, string(spec.PhasePending)) {
			t.Errorf("a status written during the takeover says %q (all seen: %q)", s, watch.seen)
		}
	}
}

func waitUntil(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitOwner waits until the owner of dir answers on its socket.
func waitOwner(t *testing.T, dir string) owner.Record {
	t.Helper()
	var rec owner.Record
	waitUntil(t, "the owner to answer on its socket", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		r, err := owner.Query(ctx, filepath.Join(dir, ".tether"))
		rec = r
		return err == nil
	})
	return rec
}

// TestOwnerRecordNamesTheBoundGateway: the owner record (and so tether
// get and the "owned by" error) names the address the gateway was bound
// to: the port the kernel chose for --listen 127.0.0.1:0, where a client
// reaches the gateway.
func TestOwnerRecordNamesTheBoundGateway(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ex.yaml"), stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))
	startTether(t, dir, "--listen", "127.0.0.1:0")
	rec := waitOwner(t, dir)
	u, err := url.Parse(rec.Gateway)
	if err != nil || u.Scheme != "http" || u.Hostname() != "127.0.0.1" || u.Port() == "" || u.Port() == "0" || u.Path != "/mcp" {
		t.Fatalf("the owner record names the gateway %q, want http://127.0.0.1:<the bound port>/mcp", rec.Gateway)
	}
	gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: rec.Gateway})
	gc.waitTools(t, "ex's tools at the recorded gateway", hasAll("ex_echo"))
}

func TestGatewayURL(t *testing.T) {
	for _, c := range []struct {
		addr *net.TCPAddr
		want string
	}{
		{&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8808}, "http://127.0.0.1:8808/mcp"},
		{&net.TCPAddr{IP: net.IPv6loopback, Port: 8808}, "http://[::1]:8808/mcp"},
		{&net.TCPAddr{IP: net.IPv6unspecified, Port: 9000}, "http://127.0.0.1:9000/mcp"},
		{&net.TCPAddr{IP: net.IPv4zero, Port: 9001}, "http://127.0.0.1:9001/mcp"},
		{&net.TCPAddr{Port: 9002}, "http://127.0.0.1:9002/mcp"},
		{&net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 80}, "http://10.1.2.3:80/mcp"},
	} {
		if got := gatewayURL(c.addr); got != c.want {
			t.Errorf("gatewayURL(%v) = %q, want %q", c.addr, got, c.want)
		}
	}
}

// TestOwnerRunWaitsForADyingOwnersLock: a tether run on a directory whose
// lock is held by an owner that does not answer on its control socket (a
// SIGKILLed tether whose files the kernel has not closed yet) waits for the
// lock, within its bound, rather than exit 3 at the first look.
func TestOwnerRunWaitsForADyingOwnersLock(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, ".tether")
	must(t, os.Mkdir(stateDir, 0o700))
	lock, err := owner.TryLock(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	tt := startTether(t, dir)
	waitUntil(t, "tether run to wait for the lock", func() bool {
		return strings.Contains(tt.logs.String(), "waiting for its lock")
	})
	must(t, lock.Release())
	rec := waitOwner(t, dir)
	if rec.PID != tt.cmd.Process.Pid {
		t.Errorf("the owner is pid %d, want the run's %d", rec.PID, tt.cmd.Process.Pid)
	}
}

// TestOwnerRunStoppedWhileWaitingForTheLock: a SIGTERM while tether run
// waits for a dying owner's lock stops it quietly (exit 0), not as if the
// directory were owned (exit 3, "owned by").
func TestOwnerRunStoppedWhileWaitingForTheLock(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(dir, ".tether")
	must(t, os.Mkdir(stateDir, 0o700))
	lock, err := owner.TryLock(stateDir)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	tt := startTether(t, dir)
	waitUntil(t, "tether run to wait for the lock", func() bool {
		return strings.Contains(tt.logs.String(), "waiting for its lock")
	})
	must(t, tt.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-tt.done:
	case <-time.After(20 * time.Second):
		t.Fatal("tether run did not stop on SIGTERM while it waited for the lock")
	}
	var ee *exec.ExitError
	if errors.As(tt.err, &ee) {
		t.Errorf("tether run stopped while waiting for the lock: %v, want exit status 0\n%s", tt.err, tt.logs.String())
	}
	if strings.Contains(tt.logs.String(), "is owned by") {
		t.Errorf("tether run stopped while waiting says the directory is owned:\n%s", tt.logs.String())
	}
}

// TestOwnerSecondRunFailsAndGetFindsTheOwner: a second tether run on an
// owned directory exits 3 naming the owner's pid; tether get with no --dir
// finds the running tether from the directory and from the user's default;
// once the owner is gone its record is not trusted.
func TestOwnerSecondRunFailsAndGetFindsTheOwner(t *testing.T) {
	bin := builtBinaries(t)
	config := t.TempDir()
	dir := filepath.Join(config, "tether", "manifests")
	manifest := filepath.Join(dir, "ex.yaml")
	writeFile(t, manifest, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))
	tt := startTether(t, dir)
	waitStatus(t, manifest, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	rec := waitOwner(t, dir)
	if rec.PID != tt.cmd.Process.Pid || rec.Dir != dir {
		t.Errorf("the owner says %+v, want pid %d watching %s", rec, tt.cmd.Process.Pid, dir)
	}

	// The socket serves the gateway's /mcp too: a streamable HTTP client
	// over it lists and calls.
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", rec.Socket)
	}}}
	gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: "http://tether/mcp", HTTPClient: hc})
	gc.waitTools(t, "ex's tools over the socket's /mcp", hasAll("ex_echo"))
	ectx, ecancel := context.WithTimeout(context.Background(), 10*time.Second)
	res, err := gc.session.CallTool(ectx, &mcp.CallToolParams{Name: "ex_echo", Arguments: map[string]any{"text": "over the socket"}})
	ecancel()
	if err != nil || !strings.Contains(textOf(res), "over the socket") {
		t.Errorf("ex_echo over the socket's /mcp: %v, %v", res, err)
	}
	gc.session.Close()

	// Bounded: a second run that is not refused would run on.
	sctx, scancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer scancel()
	second := exec.CommandContext(sctx, filepath.Join(bin, "tether"), "run", "--dir", dir, "--listen", "", "--metrics-addr", "")
	out, err := second.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitOwned {
		t.Fatalf("a second tether run: %v, want exit status %d\n%s", err, exitOwned, out)
	}
	for _, want := range []string{fmt.Sprintf("owned by tether pid %d", tt.cmd.Process.Pid), "tether connect --dir " + dir} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the second run's error does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(tt.logs.String(), "stopped") {
		t.Errorf("the owner stopped something when the second run started:\n%s", tt.logs.String())
	}

	get := func(cwd string) (string, string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "tether"), "get")
		cmd.Dir = cwd
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+config)
		var stdout, stderr syncBuffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("tether get in %s: %v\n%s", cwd, err, stderr.String())
		}
		return stdout.String(), stderr.String()
	}
	showing := fmt.Sprintf("Showing %s, watched by tether pid %d.", dir, tt.cmd.Process.Pid)
	for _, cwd := range []string{dir, t.TempDir()} {
		stdout, stderr := get(cwd)
		if !strings.Contains(stderr, showing) || !strings.Contains(stdout, "ex ") || !strings.Contains(stdout, "Connected") {
			t.Errorf("tether get in %s:\nstdout:\n%s\nstderr:\n%s", cwd, stdout, stderr)
		}
	}

	// The owner is gone: its record stays, and is not trusted.
	tt.stop()
	if _, err := owner.ReadRecord(filepath.Join(dir, ".tether")); err != nil {
		t.Fatalf("the owner record: %v", err)
	}
	elsewhere := t.TempDir()
	stdout, stderr := get(elsewhere)
	if strings.Contains(stderr, "Showing") || strings.Contains(stdout, "ex ") {
		t.Errorf("tether get trusted a dead owner's record:\nstdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	next := startTether(t, dir)
	rec = waitOwner(t, dir)
	if rec.PID != next.cmd.Process.Pid {
		t.Errorf("after a dead owner, the next one says pid %d, want %d", rec.PID, next.cmd.Process.Pid)
	}
}

// TestOwnerConnect: tether connect bridges a client to a daemon that owns
// the directory, survives the daemon's restart (the client's session is
// established again and its calls answered), and exits with a clear error
// when no tether owns the directory within --wait.
func TestOwnerConnect(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "ex.yaml")
	writeFile(t, manifest, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))

	// The client keeps its stdin open: a client that leaves ends the bridge.
	lonely := exec.Command(filepath.Join(bin, "tether"), "connect", "--dir", dir, "--wait", "300ms")
	stdin, err := lonely.StdinPipe()
	must(t, err)
	var lonelyOut, lonelyErr syncBuffer
	lonely.Stdout, lonely.Stderr = &lonelyOut, &lonelyErr
	must(t, lonely.Start())
	_, err = io.WriteString(stdin, `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`+"\n")
	must(t, err)
	err = lonely.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(lonelyErr.String(), "no tether owns "+dir) {
		t.Errorf("tether connect with no owner: %v\n%s", err, lonelyErr.String())
	}
	if !strings.Contains(lonelyOut.String(), `"id":1,"error"`) {
		t.Errorf("the client's initialize was not answered with an error: %q", lonelyOut.String())
	}

	daemon := startTether(t, dir)
	waitOwner(t, dir)
	cmd := exec.Command(filepath.Join(bin, "tether"), "connect", "--dir", dir, "--log-level", "debug")
	logs := &syncBuffer{}
	cmd.Stderr = logs
	st := &stdioTether{cmd: cmd, logs: logs}
	st.gatewayClient = connectGateway(t, &mcp.CommandTransport{Command: cmd})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("tether connect logs:\n%s", logs.String())
		}
	})
	st.waitTools(t, "ex's tools", hasAll("ex_echo"))
	if err := st.echo(t, "through connect"); err != nil {
		t.Fatal(err)
	}

	// The daemon restarts: the bridge holds the next call until it is back.
	daemon.stop()
	changes := st.changes()
	restarted := startTether(t, dir)
	if err := st.echo(t, "after the restart"); err != nil {
		t.Fatalf("a call after the daemon restarted: %v", err)
	}
	st.waitChange(t, changes, "after the daemon restarted")
	if rec := waitOwner(t, dir); rec.PID != restarted.cmd.Process.Pid {
		t.Errorf("owner pid %d, want the restarted daemon's %d", rec.PID, restarted.cmd.Process.Pid)
	}
	var calls atomic.Int32
	for i := range 5 {
		if err := st.echo(t, fmt.Sprintf("call %d", i)); err == nil {
			calls.Add(1)
		}
	}
	if calls.Load() != 5 {
		t.Errorf("%d of 5 calls answered after the restart", calls.Load())
	}
}
