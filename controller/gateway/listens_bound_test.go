package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// openListen sends a 2026-07-28 subscriptions/listen of id for
// tools/list_changed to url on a connection of its own, and returns its
// response once the headers are in: an open listen streams
// (text/event-stream) until its body is closed.
func openListen(t *testing.T, ctx context.Context, url string, id int) (*http.Response, error) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"toolsListChanged": true},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    modernProtocol,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-listener", "version": "0"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		},
	}})
	req := eraRequest(ctx, url, string(body))
	req.Header.Set(methodHeader, "subscriptions/listen")
	req.Header.Del(nameHeader)
	// A refused listen's connection closes with its answer: kept idle, the
	// test's own connections took the places the new client's need.
	req.Close = true
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return (&http.Client{Transport: tr}).Do(req)
}

// TestListensDoNotLockOut: a 2026-07-28 client's subscriptions/listen is a
// POST answered for the client's life, and never shed at --max-connections
// (the go-sdk client does not open it again). Listens hold at most half of
// that bound: a flood of them past it is answered at once with an error
// naming the flag and carrying the request's id (one WARN), and a new
// client still connects and calls a tool. A listen that ends gives its
// place back. Without the share, 4 listens at --max-connections 4 held
// every connection and each new one was refused.
func TestListensDoNotLockOut(t *testing.T) {
	const maxConn = 4
	logs := &lockedBuffer{}
	b := newRichBackend(t, "b")
	g := New(Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), MaxConnections: maxConn})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	for id := range maxConn + 2 {
		resp, err := openListen(t, ctx, url, id)
		if err != nil {
			t.Fatalf("listen %d with %d open at --max-connections %d: %v", id, len(open), maxConn, err)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			open = append(open, resp)
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf(`"id":%d,"error":{"code":-32000,`, id); !strings.Contains(string(raw), want) ||
			!strings.Contains(string(raw), "2 listens are open") || !strings.Contains(string(raw), "--max-connections") {
			t.Fatalf("listen %d past the share: %d %s, want a JSON-RPC error with %s naming --max-connections", id, resp.StatusCode, raw, want)
		}
	}
	if len(open) != maxConn/2 {
		t.Fatalf("%d listens open at --max-connections %d, want %d", len(open), maxConn, maxConn/2)
	}
	if n := strings.Count(logs.String(), "gateway refuses subscriptions/listen"); n != 1 {
		t.Errorf("%d WARNs for %d refused listens, want 1 (one a minute):\n%s", n, maxConn+2-len(open), logs.String())
	}

	// A new client (whose own listen is refused: the go-sdk client goes
	// on without it) connects and calls.
	rc := dialRich(t, url, modernProtocol, nil)
	res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pb_log"})
	if err != nil || textOf(res) != "logged" {
		t.Fatalf("a call with listens at their share of the bound: %q, %v", textOf(res), err)
	}

	// One listen ends: a new one takes its place, once the gateway has
	// seen its client go.
	open[0].Body.Close()
	open = open[1:]
	deadline := time.Now().Add(waitTimeout)
	for {
		resp, err := openListen(t, ctx, url, 99)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
			open = append(open, resp)
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("the place of a listen that ended was not given back")
		}
		time.Sleep(20 * time.Millisecond) // the server sees the close on its own time: no event for it
	}
}
