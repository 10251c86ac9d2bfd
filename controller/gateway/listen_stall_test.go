package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestListenNotReadIsCut: a subscriptions/listen whose client stops
// reading is cut once a write on it waits --stream-write-timeout, as a
// session's standalone stream is, and its subscriptions end with it.
// Before, nothing bounded a write on a listen: the go-sdk server notifies
// sessions one after another, so the blocked write held every update of
// the URI after it, and the listen held its connection and subscriptions,
// for good.
func TestListenNotReadIsCut(t *testing.T) {
	b := newRichBackend(t, "b")
	g := New(Options{Logger: testLogger(t), StreamWriteTimeout: 200 * time.Millisecond})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	uri := "item://b/" + strings.Repeat("x", 4000) // fills the socket's buffers sooner
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": map[string]any{
		"notifications": map[string]any{"resourceSubscriptions": []string{uri}},
		"_meta": map[string]any{
			"io.modelcontextprotocol/protocolVersion":    modernProtocol,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "stalled", "version": "0"},
			"io.modelcontextprotocol/clientCapabilities": map[string]any{},
		},
	}})
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), Path)
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%s: %s\r\n%s: subscriptions/listen\r\nContent-Length: %d\r\n\r\n%s",
		Path, addr, protocolVersionHeader, modernProtocol, methodHeader, len(body), body)
	expectBackend(t, b, "subscribe "+uri)

	// The client reads nothing; the backend updates the URI until the
	// gateway has let the listen go.
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for {
		if uris, _ := heldSubscriptions(t, g); len(uris) == 0 {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("a listen whose client reads nothing still holds its subscription")
		}
		_ = b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: uri})
	}
}
