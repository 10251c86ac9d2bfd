//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// TestFaultListensHoldEveryConnection: 2026-07-28 clients' open
// subscriptions/listen requests (row C13), each a POST answered for its
// client's life and never closed to make room (the go-sdk client does not
// open a closed listen again), flood --max-connections 8 against the real
// tether in front of the go-sdk's everything-server (which updates
// test://watched-resource every 3 s). Listens hold at most half the bound:
// the rest are answered at once with an error naming --max-connections,
// the open ones keep delivering, and a new client still connects and
// calls a tool. Without the share, 8 listens held every connection and
// each new one was refused (the client's POST got EOF).
func TestFaultListensHoldEveryConnection(t *testing.T) {
	const maxConn, flood = 8, 12
	bin := builtBinaries(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "ev.yaml")
	writeFile(t, m, stdioManifest("ev", filepath.Join(bin, "everything-server"), nil, ""))
	tt, ep := startTetherServing(t, dir, "--max-connections", fmt.Sprint(maxConn))
	waitStatus(t, m, "ev", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The catalog (and so the watched resource's owner) reaches the
	// gateway just after Connected: the first listen is tried until its
	// subscription is taken.
	var open []*bufio.Reader
	deadline := time.Now().Add(20 * time.Second)
	for len(open) == 0 {
		resp, err := rawListen(ctx, t, ep.gateway, 0)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			open = append(open, bufio.NewReader(resp.Body))
			break
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the first listen: %d %s", resp.StatusCode, raw)
		}
		time.Sleep(100 * time.Millisecond)
	}
	refused := 0
	for id := 1; id < flood; id++ {
		resp, err := rawListen(ctx, t, ep.gateway, id)
		if err != nil {
			t.Fatalf("listen %d with %d open at --max-connections %d: %v", id, len(open), maxConn, err)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			open = append(open, bufio.NewReader(resp.Body))
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(raw), fmt.Sprintf(`"id":%d,"error"`, id)) || !strings.Contains(string(raw), "(half of --max-connections") {
			t.Fatalf("listen %d past the share: %d %s, want its error naming --max-connections", id, resp.StatusCode, raw)
		}
		refused++
	}
	if len(open) != maxConn/2 || refused != flood-maxConn/2 {
		t.Fatalf("%d listens open, %d refused at --max-connections %d; want %d open", len(open), refused, maxConn, maxConn/2)
	}
	tt.waitLog(t, 10*time.Second, "gateway refuses subscriptions/listen")

	// A new client connects and calls.
	c := mcp.NewClient(&mcp.Implementation{Name: "late-agent", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: ep.gateway, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: "2026-07-28"})
	if err != nil {
		t.Fatalf("a new client with listens flooding the gateway: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ev_test_simple_text"})
	if err != nil || len(res.Content) == 0 {
		t.Fatalf("a call with listens flooding the gateway: %v %+v", err, res)
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); !ok || !strings.Contains(tc.Text, "simple text") {
		t.Fatalf("a call with listens flooding the gateway: %+v", res.Content[0])
	}

	// Every open listen still delivers the watched resource's updates.
	for i, r := range open {
		waitListenUpdate(t, r, i, "test://watched-resource")
	}
}

// rawListen opens a 2026-07-28 subscriptions/listen of id for
// test://watched-resource on a connection of its own; its response is
// returned once the headers are in.
func rawListen(ctx context.Context, t *testing.T, url string, id int) (*http.Response, error) {
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"resourceSubscriptions": []string{"test://watched-resource"}},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    "2026-07-28",
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "flood", "version": "0"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		},
	}})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "subscriptions/listen")
	// A refused listen's connection closes with its answer, leaving its
	// place to the new client's connections.
	req.Close = true
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err == nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

// waitListenUpdate reads listen i's stream until a
// notifications/resources/updated of uri (the everything-server sends one
// every 3 s).
func waitListenUpdate(t *testing.T, r *bufio.Reader, i int, uri string) {
	t.Helper()
	got := make(chan error, 1)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				got <- err
				return
			}
			if strings.HasPrefix(line, "data: ") && strings.Contains(line, "notifications/resources/updated") && strings.Contains(line, uri) {
				got <- nil
				return
			}
		}
	}()
	select {
	case err := <-got:
		if err != nil {
			t.Fatalf("listen %d ended before an update of %s: %v", i, uri, err)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("listen %d: no notifications/resources/updated for %s", i, uri)
	}
}
