package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// holdingTransport delivers the client's messages as they come, except
// that an input-required result waits for hold to return first.
type holdingTransport struct {
	inner mcp.Transport
	hold  func()
}

func (h *holdingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := h.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &holdingConn{Connection: c, hold: h.hold}, nil
}

type holdingConn struct {
	mcp.Connection
	hold func()
}

func (c *holdingConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if r, ok := msg.(*jsonrpc.Response); ok && err == nil && bytes.Contains(r.Result, []byte(`"input_required"`)) {
		c.hold()
	}
	return msg, err
}

// TestRoundAnsweredAfterTheCallEnded: a backend that asks its client
// something while its call is in flight and ends the call without waiting
// for the answer (the question was its own business, related to the call
// only by timing). The 2026-07-28 client was already handed the question;
// its next round gets the call's result, not "no call in flight".
func TestRoundAnsweredAfterTheCallEnded(t *testing.T) {
	asked := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "asker", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "leave", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			go func() { _, _ = req.Session.ListRoots(ctx, nil) }()
			select {
			case <-asked:
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "left"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	s, err := connection.Connect(ctx, connection.Request{Name: "a", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: hs.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	g := New(Options{Logger: testLogger(t)})
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: s, CallTimeout: 5 * time.Second})

	// The client reads the question only once the backend call has ended.
	var once sync.Once
	hold := func() {
		once.Do(func() {
			close(asked)
			deadline := time.Now().Add(waitTimeout)
			for time.Now().Before(deadline) {
				ended := true
				g.rounds.mu.Lock()
				for _, cr := range g.rounds.m {
					select {
					case <-cr.done:
					default:
						ended = false
					}
				}
				g.rounds.mu.Unlock()
				if ended {
					return
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Error("the backend call did not end")
		})
	}
	ct, st := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- g.serveTransport(ctx, st, "stdio") }()
	rc := dialRichOn(t, &holdingTransport{inner: ct, hold: hold}, "", nil)
	if v := rc.cs.InitializeResult().ProtocolVersion; v < modernProtocol {
		t.Fatalf("the client negotiated %s: this test needs %s", v, modernProtocol)
	}
	res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_leave"})
	if err != nil || res.IsError || textOf(res) != "left" {
		t.Errorf("pa_leave = %+v, %v; want the call's result", res, err)
	}
	rc.cs.Close()
	cancel()
	<-served
}
