//go:build unix

package main

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// TestSessionIdleTimeout: with --session-idle-timeout set short, a gateway
// session whose client calls a streamable HTTP backend's tool again and
// again, every call on the fast path (which the go-sdk never sees), stays
// open for several timeouts, while a session left idle beside it is closed;
// once the calls stop, that session is closed too. A closed session's
// client gets 404 on its next POST, as MCP clients expect of a session that
// ended.
func TestSessionIdleTimeout(t *testing.T) {
	const idle = time.Second
	bin := builtBinaries(t)
	backendPort, gwPort := testport.Free(t), testport.Free(t)
	startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", backendPort), "-stateless=false")
	waitTCP(t, backendPort, 20*time.Second)
	dir := t.TempDir()
	m := filepath.Join(dir, "ev.yaml")
	writeFile(t, m, httpManifest("ev", fmt.Sprintf("http://127.0.0.1:%d/mcp", backendPort), "streamable", ""))
	tt := startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gwPort), "--session-idle-timeout", idle.String())
	waitTCP(t, gwPort, 20*time.Second)
	waitStatus(t, m, "ev", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", gwPort)

	const closedLine = "gateway closing idle sessions"
	left := idleInit(t, url)
	busy := idleInit(t, url)
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ev_test_simple_text"}}`
	calls := 0
	for until := time.Now().Add(3 * idle); time.Now().Before(until); calls++ {
		if code, body := idlePost(t, url, busy, call); code != http.StatusOK || !strings.Contains(body, "simple text") {
			t.Fatalf("call %d on the session in use: %d %s", calls, code, body)
		}
		time.Sleep(idle / 10) // the client's pace: a call every tenth of the timeout
	}
	// Every call took the fast path: the go-sdk saw none of them.
	if fast, slow := toolCallLines(tt, "ev_test_simple_text"); fast != calls || slow != 0 {
		t.Errorf("%d calls on the fast path and %d through the go-sdk, want %d and 0", fast, slow, calls)
	}
	// The session left idle meanwhile was closed.
	tt.waitLog(t, 10*time.Second, closedLine)
	if code, body := idlePost(t, url, left, idlePing); code != http.StatusNotFound {
		t.Errorf("a POST on the session left idle: %d %s, want 404", code, body)
	}
	// Once the calls stop, the session in use goes the same way.
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(tt.logs.String(), closedLine) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the session whose calls stopped was never closed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, body := idlePost(t, url, busy, idlePing); code != http.StatusNotFound {
		t.Errorf("a POST on the session whose calls stopped: %d %s, want 404", code, body)
	}
}

const idlePing = `{"jsonrpc":"2.0","id":2,"method":"ping"}`

// idleVersion is the protocol version tether negotiates with a classic
// backend: the fast path carries a session's call only at its backend's
// version.
const idleVersion = "2025-11-25"

// idleInit initializes a gateway session at idleVersion and returns its id.
func idleInit(t *testing.T, url string) string {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+idleVersion+`","capabilities":{},"clientInfo":{"name":"idle","version":"0"}}}`))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	body := readAll(resp.Body)
	sid := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || sid == "" {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if code, body := idlePost(t, url, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`); code != http.StatusAccepted {
		t.Fatalf("initialized: %d %s", code, body)
	}
	return sid
}

// idlePost posts body on session sid at idleVersion.
func idlePost(t *testing.T, url, sid, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", idleVersion)
	req.Header.Set("Mcp-Session-Id", sid)
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
