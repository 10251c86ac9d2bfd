package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestNoticeWriterCountsOnlyCancelNotices: the writer that tells a relay
// given up that the go-sdk's notifications/cancelled reached the stream
// reads the event's method. A log message or a tool result that carries the
// text "notifications/cancelled" (here as structured data, so the quoted
// method name appears verbatim in the bytes) is not a notice: counted as
// one, it let a relay return before its real notice was written, and the
// client's request stayed open.
func TestNoticeWriterCountsOnlyCancelNotices(t *testing.T) {
	events := []struct {
		name   string
		event  string
		notice bool
	}{
		{"log message with the method as data", "event: message\ndata: " +
			`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"method":"notifications/cancelled"}}}` + "\n\n", false},
		{"tool result with the method as content", "event: message\nid: 0_3\ndata: " +
			`{"jsonrpc":"2.0","id":7,"result":{"content":[],"structuredContent":{"method":"notifications/cancelled"}}}` + "\n\n", false},
		{"request named like it", "event: message\ndata: " +
			`{"jsonrpc":"2.0","id":"x","method":"notifications/cancelled","params":{}}` + "\n\n", false},
		{"the go-sdk's notice", "event: message\ndata: " +
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"context canceled","requestId":3}}` + "\n\n", true},
		{"the notice with an event id", "event: message\nid: 1_4\ndata: " +
			`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}` + "\n\n", true},
	}
	for _, e := range events {
		t.Run(e.name, func(t *testing.T) {
			cn := newCancelNotices()
			w := noticeWriter{ResponseWriter: httptest.NewRecorder(), notices: cn}
			if _, err := w.Write([]byte(e.event)); err != nil {
				t.Fatal(err)
			}
			cn.mu.Lock()
			n := cn.n
			cn.mu.Unlock()
			if want := map[bool]int{false: 0, true: 1}[e.notice]; n != want {
				t.Errorf("notices counted for %q: %d, want %d", e.event, n, want)
			}
		})
	}
}

// TestGoSDKNoticeOnTheRequestStream is the canary of what sdkgaps.go
// relies on in the go-sdk: a server request given up during a client's
// request is followed by a notifications/cancelled on that request's own
// response stream, written as one event that noticeWriter recognises. A
// go-sdk that frames or routes it otherwise fails here (and relays given up
// would then wait noticeWait for nothing).
func TestGoSDKNoticeOnTheRequestStream(t *testing.T) {
	seen := make(chan struct{})
	var seenOnce sync.Once
	srv := mcp.NewServer(&mcp.Implementation{Name: "canary", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := req.Session.CreateMessage(rctx, &mcp.CreateMessageParams{MaxTokens: 1,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}})
			// Hold the answer until the notice is out: the stream closes
			// with it.
			select {
			case <-seen:
			case <-time.After(waitTimeout): // a failed test: let the server close
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(err)}}}, nil
		})
	var s streamNotices
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, forget := s.watch(w, r)
		defer forget()
		if cn := s.of(&mcp.RequestExtra{Header: r.Header}); cn != nil && r.Method == http.MethodPost {
			go func() {
				if cn.await(0, waitTimeout) {
					seenOnce.Do(func() { close(seen) })
				}
			}()
		}
		sdk.ServeHTTP(w, r)
	}))
	defer hs.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			<-ctx.Done() // never answers
			return nil, ctx.Err()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	done := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"})
		done <- err
	}()
	select {
	case <-seen:
	case <-ctx.Done():
		t.Fatal("no notifications/cancelled counted on the call's stream: the go-sdk no longer writes the notice there as one event (sdkgaps.go)")
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestPayloadNamingCancelIsNotMisread: a backend's log message, a tool
// result and a relayed request whose payloads carry the text
// "notifications/cancelled" pass through on both paths as they were sent:
// the log message reaches the client, the sampling request is answered,
// the result is the result.
func TestPayloadNamingCancelIsNotMisread(t *testing.T) {
	a := newRichBackend(t, "a")
	mimic := map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": 1}}
	a.srv.AddTool(&mcp.Tool{Name: "mimic", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: mimic})
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: `"notifications/cancelled"`}}}})
			if err != nil {
				return nil, fmt.Errorf("sampling failed: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{res.Content}, StructuredContent: mimic}, nil
		})
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: a.connect(t), CallTimeout: waitTimeout})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	for _, sdkPath := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "sdk"}[sdkPath], func(t *testing.T) {
			g.noFastPath.Store(sdkPath)
			defer g.noFastPath.Store(false)
			fast := g.fastCalls.Load()
			rc := dialRich(t, url, "", nil)
			if err := rc.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
				t.Fatal(err)
			}
			res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_mimic"})
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if got := res.Content[0].(*mcp.TextContent).Text; got != `answer to "notifications/cancelled"` {
				t.Errorf("result text %q, want the sampling answer", got)
			}
			if b, _ := json.Marshal(res.StructuredContent); string(b) != `{"method":"notifications/cancelled","params":{"requestId":1}}` {
				t.Errorf("structured content %s, want it as the backend sent it", b)
			}
			select {
			case l := <-rc.logs:
				if b, _ := json.Marshal(l.Data); string(b) != `{"method":"notifications/cancelled","params":{"requestId":1}}` {
					t.Errorf("log data %s, want it as the backend sent it", b)
				}
			case <-ctx.Done():
				t.Fatal("the backend's log message never reached the client")
			}
			if took := g.fastCalls.Load() > fast; took == sdkPath {
				t.Errorf("fast path taken: %v, want %v", took, !sdkPath)
			}
		})
	}
}

// TestGoSDKIdleTimerRestartsOnPOST is the canary of what idleTimerAllows
// relies on in the go-sdk: its session idle timer is restarted by the POSTs
// it serves (so a session whose client keeps posting stays open, however
// long it lives), and it does close a session nobody posts to. A go-sdk
// whose timer runs otherwise fails here, and the fast path's rule must be
// revisited.
func TestGoSDKIdleTimerRestartsOnPOST(t *testing.T) {
	const timeout = 2 * time.Second
	srv := mcp.NewServer(&mcp.Implementation{Name: "canary", Version: "0"}, nil)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{SessionTimeout: timeout}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	var ss *mcp.ServerSession
	for s := range srv.Sessions() {
		ss = s
	}
	if ss == nil {
		t.Fatal("no server session")
	}
	ended := make(chan struct{})
	go func() { _ = ss.Wait(); close(ended) }()
	// Three timeouts' worth of POSTs, one every tenth of it.
	for deadline := time.Now().Add(3 * timeout); time.Now().Before(deadline); {
		if err := cs.Ping(ctx, nil); err != nil {
			t.Fatalf("ping while the client keeps posting: %v (the go-sdk's POSTs no longer keep its session open)", err)
		}
		select {
		case <-ended:
			t.Fatal("the go-sdk closed a session whose client posts every tenth of its idle timeout")
		case <-time.After(timeout / 10):
		}
	}
	select {
	case <-ended:
	case <-time.After(waitTimeout):
		t.Fatal("the go-sdk never closed a session left idle past its SessionTimeout: its idle timer is gone, and the fast path's rule with it")
	}
}
