package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitTimeout bounds every wait for a condition in these tests.
const waitTimeout = 10 * time.Second

// sessionBackend adapts a go-sdk client session to Backend the way the
// connection package does: a backend-side progress token per call, and the
// session's progress notifications dispatched back by that token.
type sessionBackend struct {
	fakeBackend // the catalog; no raw calls
	cs          *mcp.ClientSession
	next        atomic.Int64

	mu       sync.Mutex
	progress map[string]func(*mcp.ProgressNotificationParams)
}

func newSessionBackend() *sessionBackend {
	return &sessionBackend{progress: make(map[string]func(*mcp.ProgressNotificationParams))}
}

func (b *sessionBackend) clientOptions() *mcp.ClientOptions {
	return &mcp.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			tok, _ := req.Params.ProgressToken.(string)
			b.mu.Lock()
			f := b.progress[tok]
			b.mu.Unlock()
			if f != nil {
				f(req.Params)
			}
		},
	}
}

func (b *sessionBackend) CallTool(ctx context.Context, p *mcp.CallToolParams, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	if progress != nil {
		tok := fmt.Sprintf("up-%d", b.next.Add(1))
		b.mu.Lock()
		b.progress[tok] = progress
		b.mu.Unlock()
		defer func() {
			b.mu.Lock()
			delete(b.progress, tok)
			b.mu.Unlock()
		}()
		p.SetProgressToken(tok)
	}
	return b.cs.CallTool(ctx, p)
}

// withTools sets the tool list a test backend offers (what a session holds
// after it listed its server's tools) and returns the backend.
func withTools[B interface{ setTools([]*mcp.Tool) }](b B, tools []*mcp.Tool) B {
	b.setTools(tools)
	return b
}

// sdkServerError is connection.Session.ServerError for a bare go-sdk session: the
// JSON-RPC error the server sent, not one of the go-sdk's local codes.
func sdkServerError(err error) *jsonrpc.Error {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		switch je.Code {
		case -32001, -32003, -32004, -32005:
			return nil
		}
		return je
	}
	return nil
}

// connectBackend connects a sessionBackend over t and lists its tools.
func connectBackend(t testing.TB, t2 mcp.Transport) (*sessionBackend, []*mcp.Tool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	b := newSessionBackend()
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-test-upstream", Version: "0"}, b.clientOptions())
	cs, err := c.Connect(ctx, t2, nil)
	if err != nil {
		t.Fatalf("connect backend: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	b.cs = cs
	var tools []*mcp.Tool
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("list backend tools: %v", err)
		}
		tools = append(tools, tool)
	}
	b.tools = tools
	return b, tools
}

// inMemoryBackend serves srv in-process and connects a backend to it. kill
// cuts the pipe under the server, as when a backend process dies: closing
// the server session instead would wait for the calls in flight.
func inMemoryBackend(t testing.TB, srv *mcp.Server) (be *sessionBackend, tools []*mcp.Tool, kill func()) {
	t.Helper()
	sp, cp := net.Pipe()
	ss, err := srv.Connect(context.Background(), &mcp.IOTransport{Reader: sp, Writer: sp}, nil)
	if err != nil {
		t.Fatalf("serve backend: %v", err)
	}
	t.Cleanup(func() { sp.Close(); ss.Close() })
	be, tools = connectBackend(t, &mcp.IOTransport{Reader: cp, Writer: cp})
	return be, tools, func() { sp.Close() }
}

// callRecord is what a test backend saw of one call.
type callRecord struct {
	Tool string
	Args json.RawMessage
	Meta map[string]any
}

// testBackend is an in-process MCP server whose tools record their calls.
type testBackend struct {
	name    string
	srv     *mcp.Server
	calls   chan callRecord
	entered chan struct{} // a blocking tool has started
	ended   chan error    // a blocking tool's ctx ended, with ctx.Err()
	// release lets the progress tool return. The upstream client may handle
	// a progress notification after the response that follows it, and then
	// nobody is listening for it any more: the test holds the result back
	// until it has seen the notifications.
	release chan struct{}
	// stop, closed when a test that closes it ends (newFastFixture), ends
	// a blocking tool its call's cancellation never reached: the backend's
	// close would otherwise wait for it for good, and the package's
	// timeout end the run instead of the test's own failure.
	stop chan struct{}
}

func newTestBackend(name string) *testBackend {
	tb := &testBackend{
		name:    name,
		srv:     mcp.NewServer(&mcp.Implementation{Name: name, Version: "1.0.0"}, nil),
		calls:   make(chan callRecord, 64),
		entered: make(chan struct{}, 8),
		ended:   make(chan error, 8),
		release: make(chan struct{}),
		stop:    make(chan struct{}),
	}
	record := func(req *mcp.CallToolRequest) {
		select {
		case tb.calls <- callRecord{Tool: req.Params.Name, Args: req.Params.Arguments, Meta: req.Params.Meta}:
		default:
		}
	}
	tb.srv.AddTool(&mcp.Tool{
		Name:        "echo",
		Description: "echoes " + name,
		InputSchema: json.RawMessage(`{"type":"object","properties":{"msg":{"type":"string"}}}`),
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true, Title: "Echo"},
	}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		record(req)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: name + ":" + string(req.Params.Arguments)}}}, nil
	})
	tb.srv.AddTool(&mcp.Tool{Name: "fail", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "failed on purpose"}}}, nil
		})
	tb.srv.AddTool(&mcp.Tool{Name: "block", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			tb.entered <- struct{}{}
			select {
			case <-ctx.Done():
			case <-tb.stop:
				// The test ended and never cancelled the call: the
				// server's close must not wait for it.
				tb.ended <- errors.New("the test ended with the call running")
				return nil, errors.New("the test ended")
			}
			tb.ended <- ctx.Err()
			return nil, ctx.Err()
		})
	tb.srv.AddTool(&mcp.Tool{Name: "progress", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			record(req)
			tok := req.Params.GetProgressToken()
			for i := 1; i <= 3 && tok != nil; i++ {
				if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
					ProgressToken: tok, Progress: float64(i), Total: 3, Message: fmt.Sprintf("step %d", i),
				}); err != nil {
					return nil, err
				}
			}
			select {
			case <-tb.release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	return tb
}

// connect connects the gateway-facing side: a Backend, its tool list, and a
// function that kills the backend.
func (tb *testBackend) connect(t testing.TB) (*sessionBackend, []*mcp.Tool, func()) {
	return inMemoryBackend(t, tb.srv)
}

// observed collects ObserveCall invocations.
type observed struct {
	mu    sync.Mutex
	calls []string // "connection/result"
}

func (o *observed) observe(conn, result string, _ time.Duration) {
	o.mu.Lock()
	o.calls = append(o.calls, conn+"/"+result)
	o.mu.Unlock()
}

func (o *observed) has(want string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.calls, want)
}

// downstream is a gateway client over streamable HTTP that counts
// tools/list_changed notifications.
type downstream struct {
	cs      *mcp.ClientSession
	changed chan struct{}
	prog    chan *mcp.ProgressNotificationParams
}

func newTestGateway(t testing.TB, opts Options) (*Gateway, *httptest.Server) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	g := New(opts)
	hs := httptest.NewServer(g.Handler())
	t.Cleanup(hs.Close)
	return g, hs
}

// classicSession pins a go-sdk client to the classic protocol, whose
// sessions (the fast path, the session table, resumption, list_changed on
// the standalone stream) the tests using it are about: the go-sdk's client
// speaks 2026-07-28 by default, which the gateway now serves over HTTP too
// (era.go), statelessly.
var classicSession = &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"}

func dial(t testing.TB, g *Gateway, hs *httptest.Server) *downstream {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	d := &downstream{changed: make(chan struct{}, 64), prog: make(chan *mcp.ProgressNotificationParams, 64)}
	c := mcp.NewClient(&mcp.Implementation{Name: "gateway-test-agent", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { d.changed <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
			d.prog <- req.Params
		},
	})
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, classicSession)
	if err != nil {
		t.Fatalf("connect to gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	d.cs = cs
	return d
}

func (d *downstream) toolNames(t testing.TB) []string {
	t.Helper()
	var names []string
	for _, tool := range d.tools(t) {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return names
}

func (d *downstream) tools(t testing.TB) []*mcp.Tool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var tools []*mcp.Tool
	for tool, err := range d.cs.Tools(ctx, nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		tools = append(tools, tool)
	}
	return tools
}

func (d *downstream) call(ctx context.Context, name string, args any) (*mcp.CallToolResult, error) {
	return d.cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
}

// waitChanged waits for one tools/list_changed.
func (d *downstream) waitChanged(t testing.TB, why string) {
	t.Helper()
	select {
	case <-d.changed:
	case <-time.After(waitTimeout):
		t.Fatalf("no tools/list_changed after %s", why)
	}
}

func textOf(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}

// rpcMessage is the message of the JSON-RPC error the client got.
func rpcMessage(err error) string {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Message
	}
	if err == nil {
		return ""
	}
	return err.Error()
}

// requirePeer returns the path of a peer binary, skipping the test when it
// is missing, except under CI=true where a missing peer is a failure.
func requirePeer(t testing.TB, path string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("peer %s missing (CI=true forbids skipping): %v; run `cd hack/peers && npm ci`", path, err)
		}
		t.Skipf("peer %s missing: %v; run `cd hack/peers && npm ci`", path, err)
	}
	return path
}

// testLogger logs to t.Log while the test runs; lines written by goroutines
// that outlive the test are dropped instead of panicking.
func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (g *Gateway) toolChangesForTest() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.toolChanges
}
