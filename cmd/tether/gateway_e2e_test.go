//go:build unix

package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
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

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// gatewayClient is an MCP client of tether's gateway that counts
// tools/list_changed notifications and collects progress.
type gatewayClient struct {
	session  *mcp.ClientSession
	mu       sync.Mutex
	changed  int
	progress []*mcp.ProgressNotificationParams
	notify   chan struct{}
}

// sawProgress reports whether a progress notification with token arrived.
func (gc *gatewayClient) sawProgress(token string) bool {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return slices.ContainsFunc(gc.progress, func(p *mcp.ProgressNotificationParams) bool { return p.ProgressToken == token })
}

func connectGateway(t *testing.T, transport mcp.Transport) *gatewayClient {
	t.Helper()
	return connectGatewayWith(t, transport, nil)
}

// connectGatewayWith is connectGateway with session options (a pinned
// protocol version).
func connectGatewayWith(t *testing.T, transport mcp.Transport, opts *mcp.ClientSessionOptions) *gatewayClient {
	t.Helper()
	gc := &gatewayClient{notify: make(chan struct{}, 100)}
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			gc.mu.Lock()
			gc.changed++
			gc.mu.Unlock()
			select {
			case gc.notify <- struct{}{}:
			default:
			}
		},
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			gc.mu.Lock()
			gc.progress = append(gc.progress, req.Params)
			gc.mu.Unlock()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if opts == nil {
		opts = classicOverHTTP(transport)
	}
	s, err := client.Connect(ctx, transport, opts)
	if err != nil {
		t.Fatalf("connecting to the gateway: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	gc.session = s
	return gc
}

func (gc *gatewayClient) toolNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var names []string
	for tool, err := range gc.session.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// waitTools waits until the gateway's tool list satisfies ok.
func (gc *gatewayClient) waitTools(t *testing.T, what string, ok func([]string) bool) []string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		names := gc.toolNames(t)
		if ok(names) {
			return names
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway never listed %s; it lists %v", what, names)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (gc *gatewayClient) changes() int {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.changed
}

// waitChange waits for a tools/list_changed after the count was `after`.
func (gc *gatewayClient) waitChange(t *testing.T, after int, what string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for gc.changes() <= after {
		select {
		case <-gc.notify:
		case <-deadline:
			t.Fatalf("no tools/list_changed %s", what)
		}
	}
}

func hasAll(want ...string) func([]string) bool {
	return func(names []string) bool {
		for _, w := range want {
			if !slices.Contains(names, w) {
				return false
			}
		}
		return true
	}
}

func textOf(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestGatewayEndToEnd drives tether's gateway with a go-sdk client in front
// of real servers: server-everything (stdio), the go-sdk everything-server
// (HTTP) and the project's example server (stdio).
func TestGatewayEndToEnd(t *testing.T) {
	bin := builtBinaries(t)
	everything := npmPeer(t, "mcp-server-everything")
	example := filepath.Join(bin, "tether-example-server")
	dir := t.TempDir()
	goPort, evhPort, gwPort := testport.Free(t), testport.Free(t), testport.Free(t)
	goSrv := startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", goPort))
	startServer(t, []string{fmt.Sprintf("PORT=%d", evhPort)}, everything, "streamableHttp")
	waitTCP(t, goPort, 20*time.Second)
	waitTCP(t, evhPort, 20*time.Second)

	writeFile(t, filepath.Join(dir, "ev.yaml"), stdioManifest("ev", everything, []string{"stdio"}, fastHealth))
	writeFile(t, filepath.Join(dir, "go.yaml"), httpManifest("go", fmt.Sprintf("http://127.0.0.1:%d/mcp", goPort), "streamable", ""))
	// server-everything over streamable HTTP as well: the TypeScript SDK
	// frames its event streams differently from the go-sdk.
	writeFile(t, filepath.Join(dir, "evh.yaml"), httpManifest("evh", fmt.Sprintf("http://127.0.0.1:%d/mcp", evhPort), "streamable", ""))
	writeFile(t, filepath.Join(dir, "ex.yaml"), stdioManifest("ex", example, nil, fastHealth))
	startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gwPort))
	waitTCP(t, gwPort, 20*time.Second)

	gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", gwPort)})
	gc.waitTools(t, "every backend's tools", hasAll("ev_echo", "evh_echo", "go_test_simple_text", "ex_slow", "ex_add"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	t.Run("calls are routed to each backend", func(t *testing.T) {
		res, err := gc.session.CallTool(ctx, &mcp.CallToolParams{Name: "ev_echo", Arguments: map[string]any{"message": "hi"}})
		if err != nil || !strings.Contains(textOf(res), "Echo: hi") {
			t.Errorf("ev_echo = %v, %v", res, err)
		}
		res, err = gc.session.CallTool(ctx, &mcp.CallToolParams{Name: "evh_echo", Arguments: map[string]any{"message": "over http"}})
		if err != nil || !strings.Contains(textOf(res), "Echo: over http") {
			t.Errorf("evh_echo = %v, %v", res, err)
		}
		res, err = gc.session.CallTool(ctx, &mcp.CallToolParams{Name: "go_test_simple_text"})
		if err != nil || res.IsError || textOf(res) == "" {
			t.Errorf("go_test_simple_text = %+v, %v", res, err)
		}
		res, err = gc.session.CallTool(ctx, &mcp.CallToolParams{Name: "ex_add", Arguments: map[string]any{"a": 2, "b": 40}})
		if err != nil || textOf(res) != "42" {
			t.Errorf("ex_add = %+v, %v", res, err)
		}
	})

	t.Run("prompts and resources are counted in status", func(t *testing.T) {
		// ev and evh are the same server: prompts are prefixed, so both
		// expose theirs; resource URIs are not rewritten, so the one that
		// offered them first (the agent above came before either, so it is
		// whichever connected first) exposes them and keeps each against
		// the other, which loses each to it.
		connectedWithCatalog := func(st spec.ConnectionStatus) bool {
			return st.Phase == spec.PhaseConnected && st.Prompts != nil && st.Resources != nil
		}
		ev := waitStatus(t, filepath.Join(dir, "ev.yaml"), "ev", 20*time.Second, "prompts and resources", connectedWithCatalog)
		evh := waitStatus(t, filepath.Join(dir, "evh.yaml"), "evh", 20*time.Second, "prompts and resources", connectedWithCatalog)
		owner, loser, ownerName, loserName := ev, evh, "ev", "evh"
		if evh.Resources.Exposed > ev.Resources.Exposed {
			owner, loser, ownerName, loserName = evh, ev, "evh", "ev"
		}
		// Each side's status is written by its own reconcile: the owner's
		// kept entries may land after the loser's lost ones. Wait for both
		// to show the collision.
		hasResourceCollision := func(kept bool) func(spec.ConnectionStatus) bool {
			return func(st spec.ConnectionStatus) bool {
				if !connectedWithCatalog(st) {
					return false
				}
				for _, c := range st.Collisions {
					if strings.HasPrefix(c.Tool, "resource:") && c.Kept == kept {
						return true
					}
				}
				return false
			}
		}
		owner = waitStatus(t, filepath.Join(dir, ownerName+".yaml"), ownerName, 20*time.Second, "resources kept", hasResourceCollision(true))
		loser = waitStatus(t, filepath.Join(dir, loserName+".yaml"), loserName, 20*time.Second, "resources lost", hasResourceCollision(false))
		if owner.Prompts.Count == 0 || owner.Prompts.Exposed != owner.Prompts.Count || owner.Resources.Count == 0 || owner.Resources.Exposed != owner.Resources.Count {
			t.Errorf("%s: prompts %+v, resources %+v; want some, all exposed", ownerName, owner.Prompts, owner.Resources)
		}
		lost, kept := 0, 0
		for _, c := range loser.Collisions {
			if strings.HasPrefix(c.Tool, "resource:") && c.Connection == ownerName && !c.Kept {
				lost++
			}
		}
		for _, c := range owner.Collisions {
			if strings.HasPrefix(c.Tool, "resource:") && c.Connection == loserName && c.Kept {
				kept++
			}
		}
		if lost == 0 || loser.Resources.Count-loser.Resources.Exposed != lost || kept != lost {
			t.Errorf("%s: resources %+v with %d lost to %s, %d kept by it (collisions %v, %v); want count - exposed = lost = kept > 0",
				loserName, loser.Resources, lost, ownerName, kept, loser.Collisions, owner.Collisions)
		}
		if loser.Prompts.Exposed != loser.Prompts.Count || loser.Prompts.Count != owner.Prompts.Count {
			t.Errorf("%s: prompts %+v, want %s's count %d, all exposed", loserName, loser.Prompts, ownerName, owner.Prompts.Count)
		}
	})

	t.Run("progress flows back", func(t *testing.T) {
		p := &mcp.CallToolParams{Name: "ev_trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}
		p.SetProgressToken("e2e-progress")
		if _, err := gc.session.CallTool(ctx, p); err != nil {
			t.Fatal(err)
		}
		gc.mu.Lock()
		defer gc.mu.Unlock()
		if len(gc.progress) == 0 {
			t.Fatal("no progress notification reached the client")
		}
		for _, pr := range gc.progress {
			if pr.ProgressToken != "e2e-progress" {
				t.Errorf("progress carries token %v, want the caller's", pr.ProgressToken)
			}
		}
	})

	t.Run("cancellation reaches the backend", func(t *testing.T) {
		cctx, ccancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			p := &mcp.CallToolParams{Name: "ex_slow", Arguments: map[string]any{"seconds": 30, "steps": 300}}
			p.SetProgressToken("e2e-cancel")
			_, err := gc.session.CallTool(cctx, p)
			errc <- err
		}()
		// The call is at the backend once its first progress (after 0.1 s)
		// is back.
		deadline := time.Now().Add(20 * time.Second)
		for !gc.sawProgress("e2e-cancel") {
			if time.Now().After(deadline) {
				t.Fatal("no progress of the slow call within 20 s")
			}
			time.Sleep(10 * time.Millisecond)
		}
		ccancel()
		if err := <-errc; err == nil {
			t.Fatal("a cancelled call succeeded")
		}
		// The example server logs the cancellation on stderr; tether keeps
		// the tail in status.
		waitStatus(t, filepath.Join(dir, "ex.yaml"), "ex", 20*time.Second, "the backend seeing the cancellation", func(st spec.ConnectionStatus) bool {
			return st.Process != nil && slices.ContainsFunc(st.Process.StderrTail, func(l string) bool { return strings.Contains(l, "slow call cancelled") })
		})
	})

	t.Run("a dead HTTP backend's call fails fast", func(t *testing.T) {
		_ = syscall.Kill(-goSrv.Process.Pid, syscall.SIGKILL)
		start := time.Now()
		res, err := gc.session.CallTool(ctx, &mcp.CallToolParams{Name: "go_test_simple_text"})
		if err == nil && !res.IsError {
			t.Fatalf("a call to a dead backend succeeded: %+v", res)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the call took %v to fail", d)
		}
		// The go-sdk reports a refused connection as a JSON-RPC error of its
		// own; the gateway must not pass it off as the backend's answer.
		if err != nil && !strings.Contains(err.Error(), "connection go") {
			t.Errorf("the error does not name the connection: %v", err)
		}
	})

	t.Run("list_changed on reconnect", func(t *testing.T) {
		// Connected: only a live child has a pid (ev may be between two
		// children after a failed health check), and kill(0) would signal
		// the test's own process group.
		st := waitStatus(t, filepath.Join(dir, "ev.yaml"), "ev", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		before := gc.changes()
		must(t, syscall.Kill(st.Process.PID, syscall.SIGKILL))
		gc.waitChange(t, before, "when the backend dropped")
		gc.waitTools(t, "ev's tools again", hasAll("ev_echo"))
		waitStatus(t, filepath.Join(dir, "ev.yaml"), "ev", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	})

	t.Run("list_changed on removal", func(t *testing.T) {
		before := gc.changes()
		must(t, os.Remove(filepath.Join(dir, "ex.yaml")))
		gc.waitChange(t, before, "when a manifest was removed")
		gc.waitTools(t, "no ex_ tools", func(names []string) bool {
			return !slices.ContainsFunc(names, func(n string) bool { return strings.HasPrefix(n, "ex_") })
		})
	})

	t.Run("a collision is reported", func(t *testing.T) {
		writeFile(t, filepath.Join(dir, "a1.yaml"), stdioManifest("a1", example, nil, "  toolPrefix: same\n"))
		writeFile(t, filepath.Join(dir, "a2.yaml"), stdioManifest("a2", example, nil, "  toolPrefix: same\n"))
		// Both connect after the agent came: the first to connect keeps
		// the names, and both report the collision.
		collided := func(st spec.ConnectionStatus) bool { return st.Phase == spec.PhaseConnected && len(st.Collisions) > 0 }
		a1 := waitStatus(t, filepath.Join(dir, "a1.yaml"), "a1", 20*time.Second, "collisions", collided)
		a2 := waitStatus(t, filepath.Join(dir, "a2.yaml"), "a2", 20*time.Second, "collisions", collided)
		owner, loser, ownerName, loserName := a1, a2, "a1", "a2"
		if a2.Collisions[0].Kept {
			owner, loser, ownerName, loserName = a2, a1, "a2", "a1"
		}
		if c := loser.Collisions[0]; c.Connection != ownerName || c.Kept || !strings.HasPrefix(c.Tool, "same_") {
			t.Errorf("%s's collision = %+v, want a tool same_* lost to %s", loserName, c, ownerName)
		}
		if c := owner.Collisions[0]; c.Connection != loserName || !c.Kept || len(owner.Collisions) != len(loser.Collisions) {
			t.Errorf("%s's collisions = %+v, want each of %s's kept against it", ownerName, owner.Collisions, loserName)
		}
		if loser.Tools.Exposed != 0 {
			t.Errorf("the loser still exposes %d tools", loser.Tools.Exposed)
		}
	})

	t.Run("a foreign Host header is refused", func(t *testing.T) {
		req, _ := http.NewRequest("POST", fmt.Sprintf("http://127.0.0.1:%d/mcp", gwPort), strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Host = "evil.example.com"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("foreign Host: status %d, want 403", resp.StatusCode)
		}
	})
}

// TestGatewayStdioMode: `tether run --stdio` is a single MCP server on
// stdin/stdout in front of every connection.
func TestGatewayStdioMode(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ex.yaml"), stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))
	cmd := exec.Command(filepath.Join(bin, "tether"), "run", "--stdio", "--dir", dir, "--metrics-addr", "")
	var logs syncBuffer
	cmd.Stderr = &logs
	gc := connectGateway(t, &mcp.CommandTransport{Command: cmd})
	gc.waitTools(t, "ex's tools", hasAll("ex_echo"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := gc.session.CallTool(ctx, &mcp.CallToolParams{Name: "ex_echo", Arguments: map[string]any{"text": "via stdio"}})
	if err != nil || !strings.Contains(textOf(res), "via stdio") {
		t.Errorf("ex_echo over stdio = %+v, %v\n%s", res, err, logs.String())
	}
}

// TestGatewayStdioModeWithTheDefaultMetricsPortTaken: a client launches
// one stdio tether per directory, so the owner of another directory may
// hold the default --metrics-addr. The stdio gateway then serves on,
// without metrics, saying so; a --metrics-addr given on the command line
// that is in use still ends the run.
func TestGatewayStdioModeWithTheDefaultMetricsPortTaken(t *testing.T) {
	bin := builtBinaries(t)
	// Held by the test for as long as it runs: another test's stdio
	// tether may hold it a moment (tether setup's entry sets no
	// --metrics-addr), and could let it go while this one starts.
	held, err := net.Listen("tcp", "127.0.0.1:9464")
	for deadline := time.Now().Add(20 * time.Second); err != nil; held, err = net.Listen("tcp", "127.0.0.1:9464") {
		if time.Now().After(deadline) {
			t.Fatalf("127.0.0.1:9464 is not free for the test to hold: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	defer held.Close()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "ex.yaml"), stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))
	cmd := exec.Command(filepath.Join(bin, "tether"), "run", "--stdio", "--dir", dir)
	var logs syncBuffer
	cmd.Stderr = &logs
	gc := connectGateway(t, &mcp.CommandTransport{Command: cmd})
	gc.waitTools(t, "ex's tools", hasAll("ex_echo"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := gc.session.CallTool(ctx, &mcp.CallToolParams{Name: "ex_echo", Arguments: map[string]any{"text": "metrics or not"}})
	if err != nil || !strings.Contains(textOf(res), "metrics or not") {
		t.Errorf("ex_echo over stdio with the metrics port taken = %+v, %v\n%s", res, err, logs.String())
	}
	if !strings.Contains(logs.String(), "metrics off") {
		t.Errorf("tether did not say that its metrics are off:\n%s", logs.String())
	}

	ectx, ecancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ecancel()
	explicit := exec.CommandContext(ectx, filepath.Join(bin, "tether"), "run", "--stdio", "--dir", t.TempDir(), "--metrics-addr", held.Addr().String())
	// A client that stays: stdin open until the test ends, so that only
	// the metrics listener can end the run.
	stdinR, stdinW, err := os.Pipe()
	must(t, err)
	defer stdinW.Close()
	explicit.Stdin = stdinR
	out, err := explicit.CombinedOutput()
	stdinR.Close()
	if err == nil || !strings.Contains(string(out), "address already in use") {
		t.Errorf("tether run --stdio --metrics-addr on a port in use: %v, want an error naming it\n%s", err, out)
	}
}

// TestGatewayRefusesOpenListenWithoutToken: a non-loopback --listen needs
// --auth-token-file; tether refuses to start without one.
func TestGatewayRefusesOpenListenWithoutToken(t *testing.T) {
	bin := builtBinaries(t)
	cmd := exec.Command(filepath.Join(bin, "tether"), "run", "--dir", t.TempDir(), "--metrics-addr", "",
		"--listen", fmt.Sprintf("0.0.0.0:%d", testport.Free(t)))
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("tether started on 0.0.0.0 without a token:\n%s", out)
	}
	if !strings.Contains(string(out), "auth token") {
		t.Errorf("the refusal does not say why:\n%s", out)
	}
}
