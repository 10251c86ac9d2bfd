//go:build unix

package main

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

const onDemand = "  lifecycle: {mode: OnDemand, idleTimeout: 2s}\n"

// connectingLines counts tether's "connecting" log lines for a connection:
// one per start of its server.
func connectingLines(tt *tether, name string) int {
	return strings.Count(tt.logs.String(), "msg=connecting connection="+name+" ")
}

// TestOnDemandStdio: an OnDemand stdio server is started once to learn its
// catalog and stopped when idle; meanwhile its tools are listed from the
// catalog; 20 concurrent first calls start it once and all succeed; it is
// stopped again after its idle timeout; and a restarted tether serves the
// catalog without starting it (docs/reliability.md, row S22).
func TestOnDemandStdio(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := filepath.Join(dir, "lazy.yaml")
	writeFile(t, m, faultManifest(t, "lazy", nil, onDemand))
	tt, ep := startTetherServing(t, dir)
	tpid := tt.cmd.Process.Pid

	// Never seen: started once to learn the catalog, then idle.
	st := waitStatus(t, m, "lazy", 20*time.Second, "Idle after learning its catalog", phaseIs(spec.PhaseIdle))
	if st.Catalog == nil || st.Catalog.Hash == "" {
		t.Errorf("no catalog in the status: %+v", st.Catalog)
	}
	if n := connectingLines(tt, "lazy"); n != 1 {
		t.Errorf("%d starts before the first call, want 1 (to learn the catalog)", n)
	}
	waitFor(t, 10*time.Second, "the idle server's process to be gone", func() (bool, string) {
		kids := childrenOf(tpid)
		return len(kids) == 0, fmt.Sprint(kids)
	})

	s := connectClient(t, ep)
	if names := listAll(t, s); !slices.Contains(names, "lazy_echo") {
		t.Fatalf("tools of the stopped server are not listed: %v", names)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := range 20 {
		wg.Go(func() {
			want := fmt.Sprint("call ", i)
			res, err := call(s, 20*time.Second, "lazy_echo", map[string]any{"text": want})
			switch {
			case err != nil:
				errs <- err
			case res.IsError || len(res.Content) == 0 || res.Content[0].(*mcp.TextContent).Text != want:
				errs <- fmt.Errorf("call %d answered %+v", i, res.Content)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := connectingLines(tt, "lazy"); n != 2 {
		t.Errorf("%d starts in all, want 2: one to learn the catalog, one for the 20 calls", n)
	}
	if kids := childrenOf(tpid); len(kids) != 1 {
		t.Errorf("children while serving: %v, want one server", kids)
	}

	// Idle again after its timeout: stopped, its tools still listed.
	waitStatus(t, m, "lazy", 20*time.Second, "Idle after the calls", phaseIs(spec.PhaseIdle))
	waitFor(t, 10*time.Second, "the server's process to be gone again", func() (bool, string) {
		kids := childrenOf(tpid)
		return len(kids) == 0, fmt.Sprint(kids)
	})
	if names := listAll(t, s); !slices.Contains(names, "lazy_echo") {
		t.Errorf("tools after the idle stop: %v", names)
	}
	tt.stop()

	// A restarted tether serves the saved catalog without starting it.
	tt, ep = startTetherServing(t, dir)
	s = connectClient(t, ep)
	waitStatus(t, m, "lazy", 20*time.Second, "Idle after the restart", phaseIs(spec.PhaseIdle))
	if names := listAll(t, s); !slices.Contains(names, "lazy_echo") {
		t.Errorf("tools after the restart: %v", names)
	}
	if n := connectingLines(tt, "lazy"); n != 0 {
		t.Errorf("the restarted tether started the server %d times without a call", n)
	}
	if kids := childrenOf(tt.cmd.Process.Pid); len(kids) != 0 {
		t.Errorf("children after the restart: %v, want none", kids)
	}
	res, err := call(s, 20*time.Second, "lazy_echo", map[string]any{"text": "after restart"})
	if err != nil || res.IsError {
		t.Fatalf("a call after the restart: %v %+v", err, res)
	}
}

// TestOnDemandBadState: a saved catalog that cannot be read is ignored with
// a warning and the server is started to learn it again; a state directory
// that cannot be used is reported, and an OnDemand server then starts at
// start-up like any other.
func TestOnDemandBadState(t *testing.T) {
	t.Parallel()
	t.Run("corrupt catalog", func(t *testing.T) {
		dir := t.TempDir()
		m := filepath.Join(dir, "lazy.yaml")
		writeFile(t, m, faultManifest(t, "lazy", nil, onDemand))
		must(t, os.MkdirAll(filepath.Join(dir, ".tether", "catalogs"), 0o700))
		writeFile(t, filepath.Join(dir, ".tether", "catalogs", "lazy.json"), `{"version":"tether.dev/catalog/v1","hash":"sha256:0","tools":[{"name":"x"}]}`)
		tt := startTether(t, dir)
		tt.waitLogLine(t, 10*time.Second, "the saved catalog cannot be used", "lazy.json")
		waitStatus(t, m, "lazy", 20*time.Second, "Idle after learning its catalog again", phaseIs(spec.PhaseIdle))
		if n := connectingLines(tt, "lazy"); n != 1 {
			t.Errorf("%d starts, want 1 (to learn the catalog again)", n)
		}
	})
	t.Run("unusable state directory", func(t *testing.T) {
		dir := t.TempDir()
		m := filepath.Join(dir, "lazy.yaml")
		writeFile(t, m, faultManifest(t, "lazy", nil, onDemand))
		file := filepath.Join(t.TempDir(), "a-file")
		writeFile(t, file, "")
		tt := startTether(t, dir, "--state-dir", filepath.Join(file, "state"))
		tt.waitLogLine(t, 10*time.Second, "running without a state directory", "OnDemand servers start at start-up")
		waitStatus(t, m, "lazy", 20*time.Second, "Connected at start-up", phaseIs(spec.PhaseConnected))
	})
}

// TestOnDemandCatalogTooLargeToSave: an OnDemand server whose catalog would
// be saved larger than --max-state-file-size (so that the next start would
// ignore it) has it not saved, with one WARN naming the connection and
// both sizes; the catalog saved before, no longer what the server
// publishes, is removed, and the next start learns the catalog from the
// server (docs/contract.md §2, OnDemand).
func TestOnDemandCatalogTooLargeToSave(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := filepath.Join(dir, "lazy.yaml")
	// 2,000 more tools: some 180 KB saved, over the 64 KiB given below.
	writeFile(t, m, faultManifest(t, "lazy", []string{"-tools", "2000"}, onDemand))
	old := &catalog.Catalog{Tools: []*mcp.Tool{{Name: "echo", InputSchema: map[string]any{"type": "object"}}}}
	data, err := old.Marshal()
	must(t, err)
	saved := filepath.Join(dir, ".tether", "catalogs", "lazy.json")
	must(t, os.MkdirAll(filepath.Dir(saved), 0o700))
	must(t, os.WriteFile(saved, data, 0o600))
	limit := []string{"--max-state-file-size", "65536"}

	tt, ep := startTetherServing(t, dir, limit...)
	waitStatus(t, m, "lazy", 20*time.Second, "Idle, served from the catalog saved before", phaseIs(spec.PhaseIdle))
	if n := connectingLines(tt, "lazy"); n != 0 {
		t.Fatalf("%d starts before a call, want none (the saved catalog is served)", n)
	}
	s := connectClient(t, ep)
	if res, err := call(s, 20*time.Second, "lazy_echo", map[string]any{"text": "hi"}); err != nil || res.IsError {
		t.Fatalf("a call: %v %+v", err, res)
	}
	warn := []string{"level=WARN", "cannot save the server's catalog", "connection=lazy", "not saving the catalog of lazy", "bytes saved, over the limit of 65536 bytes"}
	tt.waitLogLine(t, 20*time.Second, warn...)
	if _, err := os.Stat(saved); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the catalog saved before is still there: %v", err)
	}
	waitStatus(t, m, "lazy", 20*time.Second, "Idle after the call", phaseIs(spec.PhaseIdle))
	if n := strings.Count(tt.logs.String(), "cannot save the server's catalog"); n != 1 {
		t.Errorf("%d WARNs that the catalog cannot be saved, want 1", n)
	}
	tt.stop()

	// Nothing saved: the next start learns the catalog from the server.
	tt = startTether(t, dir, limit...)
	tt.waitLogLine(t, 20*time.Second, warn...)
	if n := connectingLines(tt, "lazy"); n != 1 {
		t.Errorf("%d starts after the restart, want 1 (to learn the catalog)", n)
	}
}

// TestReconnectOnUse: a call for a connection that waits to retry does not
// wait for the backoff timer: it starts an attempt at once and is served by
// the backend that came back (docs/reliability.md, row S23). The backoff
// here is 30 s, longer than the call's bound: only reconnect on use can
// serve the call.
func TestReconnectOnUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := testport.Free(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	backend := startServer(t, nil, faultServer(t), "-http", addr)
	waitTCP(t, port, 10*time.Second)
	m := filepath.Join(dir, "remote.yaml")
	writeFile(t, m, httpManifest("remote", "http://"+addr+"/mcp", "streamable",
		quickHealth+"  backoff: {initial: 30s, max: 30s}\n  callTimeout: 15s\n"))
	_, ep := startTetherServing(t, dir)
	waitStatus(t, m, "remote", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)

	must(t, syscall.Kill(-backend.Process.Pid, syscall.SIGKILL))
	st := waitStatus(t, m, "remote", 20*time.Second, "Reconnecting with its backoff running", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseReconnecting && st.NextRetryTime != nil
	})
	startServer(t, nil, faultServer(t), "-http", addr)
	waitTCP(t, port, 10*time.Second)
	start := time.Now()
	res, err := call(s, 15*time.Second, "remote_echo", map[string]any{"text": "back"})
	if err != nil || res.IsError {
		t.Fatalf("the call that needs the connection back: %v %+v", err, res)
	}
	t.Logf("served %v after the backend came back; the backoff would have waited until %v", time.Since(start).Round(time.Millisecond), st.NextRetryTime)
	waitStatus(t, m, "remote", 10*time.Second, "Connected again", phaseIs(spec.PhaseConnected))
}

// TestCallSurvivesBackendRestart: an HTTP backend restarted between two
// health checks answers tether's old session with 404 (session not found).
// That call was not delivered, so the gateway brings the connection back and
// sends it once more: the agent's first call after the restart succeeds,
// for a client of protocol 2026-07-28 and a classic one alike
// (docs/reliability.md, row S24). The backend's session id never shows in
// what tether says.
func TestCallSurvivesBackendRestart(t *testing.T) {
	t.Parallel()
	faultBackend := func(t *testing.T, port int) *exec.Cmd {
		return startServer(t, nil, faultServer(t), "-http", fmt.Sprintf("127.0.0.1:%d", port))
	}
	// server-everything (TypeScript SDK) answers a session it does not know
	// with 400, not the 404 of the go-sdk's servers.
	npmBackend := func(t *testing.T, port int) *exec.Cmd {
		return startServer(t, []string{fmt.Sprintf("PORT=%d", port)}, npmPeer(t, "mcp-server-everything"), "streamableHttp")
	}
	for _, tc := range []struct {
		name     string
		protocol string // the client's; "" for the go-sdk's latest
		backend  func(t *testing.T, port int) *exec.Cmd
		args     map[string]any
		want     string
	}{
		{"2026-07-28 client", "", faultBackend, map[string]any{"text": "back"}, "back"},
		{"classic client", "2025-11-25", faultBackend, map[string]any{"text": "back"}, "back"},
		{"npm server", "", npmBackend, map[string]any{"message": "back"}, "Echo: back"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			port := testport.Free(t)
			addr := fmt.Sprintf("127.0.0.1:%d", port)
			backend := tc.backend(t, port)
			waitTCP(t, port, 20*time.Second)
			m := filepath.Join(dir, "remote.yaml")
			// Health checks far apart: tether does not notice the restart.
			writeFile(t, m, httpManifest("remote", "http://"+addr+"/mcp", "streamable", "  healthCheck: {interval: 10m}\n"))
			tt, ep := startTetherServing(t, dir)
			waitStatus(t, m, "remote", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
			c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0"}, nil)
			s, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: ep.gateway, MaxRetries: -1},
				&mcp.ClientSessionOptions{ProtocolVersion: tc.protocol})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			args := tc.args
			if res, err := call(s, 15*time.Second, "remote_echo", args); err != nil || res.IsError {
				t.Fatalf("a call before the restart: %v %+v", err, res)
			}

			must(t, syscall.Kill(-backend.Process.Pid, syscall.SIGKILL))
			waitFor(t, 10*time.Second, "the backend to be gone", func() (bool, string) {
				c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
				if err == nil {
					c.Close()
				}
				return err != nil, fmt.Sprint(err)
			})
			tc.backend(t, port)
			waitTCP(t, port, 20*time.Second)
			res, err := call(s, 15*time.Second, "remote_echo", args)
			if err != nil || res.IsError {
				t.Fatalf("the first call after the restart: %v %+v", err, res)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != tc.want {
				t.Errorf("answer %q", got)
			}
			// tether's log reaches the test through a pipe: the answer can
			// come first.
			tt.waitLog(t, 10*time.Second, "is sent again on the new one")
			logs := tt.logs.String()
			if tc.name == "npm server" {
				// A classic server: the first connect (which asks
				// server/discover) and the reconnect run on tether's
				// transport (docs/reliability.md, row S28).
				var own, sdk int
				for _, l := range strings.Split(logs, "\n") {
					if strings.Contains(l, `msg="session open"`) && strings.Contains(l, "transport=streamable") {
						if strings.Contains(l, "ownTransport=true") {
							own++
						} else {
							sdk++
						}
					}
				}
				if own < 2 || sdk != 0 {
					t.Errorf("%d sessions opened on tether's transport, %d on the go-sdk's; want the first and the reconnect on tether's", own, sdk)
				}
			}
			// The lost session's error names it ("session ID: …"), and
			// tether logs that error: every such mention must be redacted.
			if n := strings.Count(logs, "session ID: "); n == 0 || n != strings.Count(logs, "session ID: [redacted]") {
				t.Errorf("%d mentions of a backend session id in tether's log, %d of them redacted", n, strings.Count(logs, "session ID: [redacted]"))
			}
		})
	}
}
