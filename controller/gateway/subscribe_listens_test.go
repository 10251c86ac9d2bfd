package gateway

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rawStdio is a 2026-07-28 client over an in-memory stdio transport that
// writes its requests as they are, and hands every message it reads to
// msgs.
type rawStdio struct {
	conn mcp.Connection
	msgs chan jsonrpc.Message
}

func dialRawStdio(t *testing.T, g *Gateway) *rawStdio {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	go func() { _ = g.serveTransport(t.Context(), st, "stdio") }()
	conn, err := ct.Connect(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	rs := &rawStdio{conn: conn, msgs: make(chan jsonrpc.Message, 64)}
	go func() {
		for {
			m, err := conn.Read(t.Context())
			if err != nil {
				return
			}
			rs.msgs <- m
		}
	}()
	return rs
}

// send writes a request of id (a notification when id is 0).
func (rs *rawStdio) send(t *testing.T, id int64, method string, params any) {
	t.Helper()
	b, _ := json.Marshal(params)
	var m jsonrpc.Message = &jsonrpc.Request{Method: method, Params: b}
	if id != 0 {
		rid, err := jsonrpc.MakeID(float64(id))
		if err != nil {
			t.Fatal(err)
		}
		m.(*jsonrpc.Request).ID = rid
	}
	if err := rs.conn.Write(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// await reads messages until one that has want in its method or params
// (a request or notification) or result (a response).
func (rs *rawStdio) await(t *testing.T, want string) {
	t.Helper()
	if !rs.seen(want) {
		t.Fatalf("no message with %s", want)
	}
}

// seen is await without the test: false when no such message came within
// waitTimeout.
func (rs *rawStdio) seen(want string) bool {
	timeout := time.After(waitTimeout)
	for {
		select {
		case m := <-rs.msgs:
			b, _ := json.Marshal(m)
			if strings.Contains(string(b), want) {
				return true
			}
		case <-timeout:
			return false
		}
	}
}

// TestStdioListensShareAURI: over stdio every subscriptions/listen of a
// 2026-07-28 client is its one session's. Two listens name the same URI;
// when the first ends, the second still holds it: the backend is not
// unsubscribed and its updates still reach the client. When the second
// ends, the backend hears the unsubscribe. The session held a URI once,
// however many of its listens named it, and the first listen's end took
// it from the other.
func TestStdioListensShareAURI(t *testing.T) {
	b := newRichBackend(t, "b")
	g := New(Options{Logger: testLogger(t)})
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
	rs := dialRawStdio(t, g)
	listen := func(id int64) {
		rs.send(t, id, "subscriptions/listen", map[string]any{
			"notifications": map[string]any{"resourceSubscriptions": []string{"item://b/1"}},
			"_meta": map[string]any{
				"io.modelcontextprotocol/protocolVersion":    modernProtocol,
				"io.modelcontextprotocol/clientInfo":         map[string]any{"name": "raw-stdio", "version": "0"},
				"io.modelcontextprotocol/clientCapabilities": map[string]any{},
			},
		})
		rs.await(t, `"notifications/subscriptions/acknowledged"`)
	}
	listen(1)
	expectBackend(t, b, "subscribe item://b/1")
	listen(2)

	rs.send(t, 0, "notifications/cancelled", map[string]any{"requestId": 1})
	rs.await(t, `"io.modelcontextprotocol/subscriptionId":1`) // the first listen's answer
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	updated := make(chan struct{})
	go func() {
		if rs.seen(`"notifications/resources/updated"`) {
			close(updated)
		}
	}()
	for sent := false; !sent; {
		_ = b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "item://b/1"})
		select {
		case <-updated:
			sent = true
		case <-tick.C:
		case <-ctx.Done():
			t.Fatal("no update after the first of two listens of the URI ended")
		}
	}
	select {
	case got := <-b.subs:
		t.Fatalf("after the first of two listens ended, the backend heard %q", got)
	default:
	}
	if uris, places := heldSubscriptions(t, g); len(uris) != 1 || places != 1 {
		t.Errorf("the gateway holds %v (%d places), want item://b/1 once", uris, places)
	}

	rs.send(t, 0, "notifications/cancelled", map[string]any{"requestId": 2})
	expectBackend(t, b, "unsubscribe item://b/1")
	// The entry goes once the backend's answer is in.
	for deadline := time.Now().Add(waitTimeout); ; time.Sleep(5 * time.Millisecond) {
		uris, places := heldSubscriptions(t, g)
		if len(uris) == 0 && places == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after both listens ended the gateway holds %v (%d places), want nothing", uris, places)
		}
	}
}
