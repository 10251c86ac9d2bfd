package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// recordingTransport keeps every message the client sends to the backend,
// so a test can see what reached the backend process.
type recordingTransport struct {
	mcp.Transport
	mu   sync.Mutex
	sent []jsonrpc.Message
}

func (r *recordingTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := r.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingConn{Connection: c, r: r}, nil
}

type recordingConn struct {
	mcp.Connection
	r *recordingTransport
}

func (c *recordingConn) Write(ctx context.Context, m jsonrpc.Message) error {
	c.r.mu.Lock()
	c.r.sent = append(c.r.sent, m)
	c.r.mu.Unlock()
	return c.Connection.Write(ctx, m)
}

// sentCancel reports whether notifications/cancelled went out for the
// request that called tool.
func (r *recordingTransport) sentCancel(tool string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	var id jsonrpc.ID
	for _, m := range r.sent {
		req, ok := m.(*jsonrpc.Request)
		if !ok {
			continue
		}
		switch req.Method {
		case methodCallTool:
			if containsName(req.Params, tool) {
				id = req.ID
			}
		case "notifications/cancelled":
			if id.IsValid() && containsID(req.Params, id) {
				return true
			}
		}
	}
	return false
}

// The reference TypeScript server, over stdio, behind the gateway: its
// progress reaches the gateway's client under the client's token, and the
// client's cancellation goes out to the server process.
func TestPeerEverythingProgressAndCancel(t *testing.T) {
	bin := requirePeer(t, filepath.Join("..", "..", "hack", "peers", "node_modules", ".bin", "mcp-server-everything"))
	rec := &recordingTransport{Transport: &mcp.CommandTransport{
		Command:           exec.Command(bin, "stdio"),
		TerminateDuration: 2 * time.Second,
	}}
	be, tools := connectBackend(t, rec)

	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "everything", Prefix: "ev", Backend: withTools(be, tools), CallTimeout: 30 * time.Second})
	if g.Exposed("everything") != len(tools) {
		t.Fatalf("exposed %d of the server's %d tools", g.Exposed("everything"), len(tools))
	}
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := d.call(ctx, "ev_echo", map[string]any{"message": "through the gateway"})
	if err != nil || textOf(res) != "Echo: through the gateway" {
		t.Fatalf("ev_echo = %q, %v", textOf(res), err)
	}

	// Progress: 3 steps over 0.6s. The last notification may be handled by
	// the upstream client after the result, so at least the first two must
	// arrive, in order, under the caller's token.
	p := &mcp.CallToolParams{Name: "ev_trigger-long-running-operation", Arguments: map[string]any{"duration": 0.6, "steps": 3}}
	p.SetProgressToken("agent-7")
	if _, err := d.cs.CallTool(ctx, p); err != nil {
		t.Fatalf("long running operation: %v", err)
	}
	for i := 1; i <= 2; i++ {
		select {
		case pn := <-d.prog:
			if pn.ProgressToken != "agent-7" || pn.Progress != float64(i) || pn.Total != 3 {
				t.Errorf("progress %d = %+v, want agent-7 %d/3", i, pn, i)
			}
		case <-ctx.Done():
			t.Fatalf("progress %d never arrived", i)
		}
	}

	// Cancellation: the client gives up once the operation is under way.
	callCtx, callCancel := context.WithCancel(ctx)
	p = &mcp.CallToolParams{Name: "ev_trigger-long-running-operation", Arguments: map[string]any{"duration": 30, "steps": 60}}
	p.SetProgressToken("agent-8")
	errc := make(chan error, 1)
	go func() {
		_, err := d.cs.CallTool(callCtx, p)
		errc <- err
	}()
	// Wait until the backend is working on it (the first call's last
	// notification may still be in the channel).
	for started := false; !started; {
		select {
		case pn := <-d.prog:
			started = pn.ProgressToken == "agent-8"
		case <-ctx.Done():
			t.Fatal("no progress from the long operation")
		}
	}
	callCancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("canceled call returned %v", err)
	}
	for !rec.sentCancel("trigger-long-running-operation") {
		if ctx.Err() != nil {
			t.Fatal("notifications/cancelled never went out to the backend")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The backend session survives a canceled call.
	if res, err := d.call(ctx, "ev_echo", map[string]any{"message": "still here"}); err != nil || textOf(res) != "Echo: still here" {
		t.Errorf("ev_echo after cancel = %q, %v", textOf(res), err)
	}
}

func containsName(params json.RawMessage, tool string) bool {
	var p struct {
		Name string `json:"name"`
	}
	return json.Unmarshal(params, &p) == nil && p.Name == tool
}

func containsID(params json.RawMessage, id jsonrpc.ID) bool {
	var p struct {
		RequestID json.RawMessage `json:"requestId"`
	}
	want, err := json.Marshal(id.Raw())
	return err == nil && json.Unmarshal(params, &p) == nil && bytes.Equal(p.RequestID, want)
}
