//go:build unix

package connection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

const rawToken = "raw-secret-0123456789"

// rawServer is a go-sdk server over streamable HTTP whose tools exercise
// CallToolRaw; seen records the _meta of each call and ended the error of
// each blocked call's context.
type rawServer struct {
	url     string
	srv     *mcp.Server
	mu      sync.Mutex
	seen    []mcp.Meta
	entered chan struct{}
	ended   chan error
}

func newRawServer(t *testing.T, jsonResponse bool) *rawServer {
	t.Helper()
	rs := &rawServer{
		srv:     mcp.NewServer(&mcp.Implementation{Name: "raw", Version: "1"}, nil),
		entered: make(chan struct{}, 4),
		ended:   make(chan error, 4),
	}
	schema := json.RawMessage(`{"type":"object"}`)
	record := func(req *mcp.CallToolRequest) {
		rs.mu.Lock()
		rs.seen = append(rs.seen, req.Params.Meta)
		rs.mu.Unlock()
	}
	rs.srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		record(req)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
	})
	rs.srv.AddTool(&mcp.Tool{Name: "leak", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		got := req.Extra.Header.Get("Authorization")
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "denied for " + got}},
			StructuredContent: map[string]any{"header": got}}, nil
	})
	rs.srv.AddTool(&mcp.Tool{Name: "rpcerr", InputSchema: schema}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return nil, &jsonrpc.Error{Code: 4242, Message: "refused: " + req.Extra.Header.Get("Authorization")}
	})
	rs.srv.AddTool(&mcp.Tool{Name: "progress", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		record(req)
		for i := 1; i <= 3; i++ {
			if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Total: 3,
				Message: fmt.Sprintf("step %d of %s", i, req.Extra.Header.Get("Authorization")),
			}); err != nil {
				return nil, err
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
	})
	rs.srv.AddTool(&mcp.Tool{Name: "block", InputSchema: schema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		rs.entered <- struct{}{}
		<-ctx.Done()
		rs.ended <- ctx.Err()
		return nil, ctx.Err()
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return rs.srv },
		&mcp.StreamableHTTPOptions{JSONResponse: jsonResponse}))
	t.Cleanup(hs.Close)
	rs.url = hs.URL
	return rs
}

func (rs *rawServer) connect(t *testing.T) *Session {
	sp := httpSpec(rs.url, "")
	sp.HTTP.Headers = []spec.EnvVar{{Name: "Authorization", Value: strptr("Bearer " + rawToken)}}
	return connect(t, Request{Spec: sp})
}

func TestCallToolRaw(t *testing.T) {
	for _, jsonResponse := range []bool{false, true} {
		t.Run(fmt.Sprintf("jsonResponse=%v", jsonResponse), func(t *testing.T) {
			rs := newRawServer(t, jsonResponse)
			s := rs.connect(t)
			if v, ok := s.RawProtocolVersion(); !ok || v != s.Server().ProtocolVersion {
				t.Fatalf("RawProtocolVersion = %q, %v; want the session's %q", v, ok, s.Server().ProtocolVersion)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			res, isError, err := s.CallToolRaw(ctx, "echo", []RawParam{{Key: "arguments", Value: json.RawMessage(`{"b":[1, 2],"a":"x"}`)}}, nil)
			if err != nil || isError {
				t.Fatalf("echo: %s, %v, %v", res, isError, err)
			}
			// The arguments reach the server as the caller wrote them.
			if want := `{"content":[{"type":"text","text":"{\"b\":[1, 2],\"a\":\"x\"}"}]}`; string(res) != want {
				t.Errorf("echo result %s, want %s", res, want)
			}

			res, isError, err = s.CallToolRaw(ctx, "leak", nil, nil)
			if err != nil || !isError {
				t.Fatalf("leak: %s, %v, %v", res, isError, err)
			}
			if strings.Contains(string(res), rawToken) || !strings.Contains(string(res), Redacted) {
				t.Errorf("error result not redacted: %s", res)
			}

			_, _, err = s.CallToolRaw(ctx, "rpcerr", nil, nil)
			wire := findServerError(err)
			if wire == nil || wire.Code != 4242 || strings.Contains(err.Error(), rawToken) || strings.Contains(wire.Message, rawToken) {
				t.Errorf("rpcerr: %v (wire %v), want the server's code 4242, redacted", err, wire)
			}

			var got []mcp.ProgressNotificationParams
			res, _, err = s.CallToolRaw(ctx, "progress", nil, func(p *mcp.ProgressNotificationParams) { got = append(got, *p) })
			if err != nil || !strings.Contains(string(res), "done") {
				t.Fatalf("progress: %s, %v", res, err)
			}
			// A JSON-response server sends progress on its standalone
			// stream, which the go-sdk client reads: it arrives too.
			var sdkGot int
			if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "progress"}, func(*mcp.ProgressNotificationParams) { sdkGot++ }); err != nil {
				t.Fatal(err)
			}
			if len(got) != 3 || sdkGot != 3 {
				t.Fatalf("progress: %d notifications (CallTool: %d), want 3: %+v", len(got), sdkGot, got)
			}
			for i, p := range got {
				if p.ProgressToken != nil || p.Progress != float64(i+1) || strings.Contains(p.Message, rawToken) {
					t.Errorf("progress %d = %+v: want no token, progress %d, a redacted message", i, p, i+1)
				}
			}
			rs.mu.Lock()
			last := rs.seen[len(rs.seen)-1]
			rs.mu.Unlock()
			if tok, _ := last["progressToken"].(string); !strings.HasPrefix(tok, "tether-") {
				t.Errorf("server saw progress token %v, want one of the session's", last["progressToken"])
			}

			// The go-sdk client still works beside the raw requests.
			if r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, nil); err != nil || r.IsError {
				t.Errorf("CallTool after raw calls: %v", err)
			}
		})
	}
}

// Cancelling a raw call tells the server.
func TestCallToolRawCancel(t *testing.T) {
	rs := newRawServer(t, false)
	s := rs.connect(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, _, err := s.CallToolRaw(ctx, "block", nil, nil)
		errc <- err
	}()
	<-rs.entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("CallToolRaw = %v, want context.Canceled", err)
	}
	select {
	case err := <-rs.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("server handler ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server never saw the call cancelled")
	}
	if s.Err() != nil {
		t.Errorf("session ended after a cancelled call: %v", s.Err())
	}
}

// A server that forgot the session (404) ends it, as a go-sdk call does.
func TestCallToolRawSessionMissing(t *testing.T) {
	rs := newRawServer(t, false)
	s := rs.connect(t)
	for ss := range rs.srv.Sessions() {
		ss.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := s.CallToolRaw(ctx, "echo", nil, nil)
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Errorf("CallToolRaw = %v, want ErrSessionMissing", err)
	}
	waitDone(t, s, 5*time.Second)
	if _, ok := s.RawProtocolVersion(); ok {
		t.Error("an ended session still offers raw calls")
	}
}

// Only a streamable HTTP session offers raw calls.
func TestRawProtocolVersionStdio(t *testing.T) {
	s := connect(t, Request{Spec: stdioSpec(goEverything(t))})
	if v, ok := s.RawProtocolVersion(); ok {
		t.Errorf("stdio session: RawProtocolVersion = %q, true", v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, _, err := s.CallToolRaw(ctx, "test_simple_text", nil, nil); err == nil {
		t.Error("CallToolRaw on a stdio session succeeded")
	}
}

// A tools/list_changed the server sends on a call's own stream refreshes the
// session's tools, as when the go-sdk client receives it.
func TestCallToolRawListChangedOnCallStream(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "raw", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object"}`)
	srv.AddTool(&mcp.Tool{Name: "grow", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil
	})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	// For a raw call, announce a list change on the call's stream, before
	// the go-sdk writes its answer on the same stream.
	// The standalone stream stays silent, so that the go-sdk's own
	// list_changed (sent there when a tool is added) cannot stand in.
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			_ = http.NewResponseController(w).Flush()
			<-r.Context().Done()
			return
		}
		if r.Method == http.MethodPost && r.Header.Get(hdrSessionID) != "" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tether-fast-`)) {
				srv.AddTool(&mcp.Tool{Name: "new", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
				w.Header().Set("Content-Type", "text/event-stream")
				w.WriteHeader(http.StatusOK)
				fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n")
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	changed := make(chan struct{}, 4)
	s := connect(t, Request{Spec: httpSpec(hs.URL, ""), OnToolsChanged: func() { changed <- struct{}{} }})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, _, err := s.CallToolRaw(ctx, "grow", nil, nil); err != nil || !strings.Contains(string(res), "grown") {
		t.Fatalf("grow: %s, %v", res, err)
	}
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("OnToolsChanged never ran")
	}
	if n := len(s.Tools()); n != 2 {
		t.Errorf("%d tools after the refresh, want 2", n)
	}
}

// The TypeScript SDK's server primes each resumable stream with an event
// that has an id and no data; such an event is not a message.
func TestCallToolRawNpmPeer(t *testing.T) {
	port := testport.Free(t)
	startHTTPPeer(t, port, []string{fmt.Sprintf("PORT=%d", port)}, npmEverything(t), "streamableHttp")
	s := connect(t, Request{Spec: httpSpec(fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "")})
	if _, ok := s.RawProtocolVersion(); !ok {
		t.Fatal("a streamable session of the npm server cannot carry raw calls")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, isError, err := s.CallToolRaw(ctx, "echo", []RawParam{{Key: "arguments", Value: json.RawMessage(`{"message":"primed"}`)}}, nil)
	if err != nil || isError || !strings.Contains(string(res), "primed") {
		t.Fatalf("echo: %s, %v, %v", res, isError, err)
	}
}

// A call that Close ends still tells the server, so that the server stops
// its work and Close's DELETE is not held up by it (the go-sdk bounds that
// DELETE at 5 s).
func TestCallToolRawEndedByClose(t *testing.T) {
	rs := newRawServer(t, false)
	s := rs.connect(t)
	errc := make(chan error, 1)
	go func() {
		_, _, err := s.CallToolRaw(context.Background(), "block", nil, nil)
		errc <- err
	}()
	<-rs.entered
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %s: the server worked on the cancelled call", d.Round(time.Millisecond))
	}
	if err := <-errc; err == nil {
		t.Error("the call succeeded on a closed session")
	}
	select {
	case err := <-rs.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("server handler ended with %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the server never saw the call cancelled")
	}
}
