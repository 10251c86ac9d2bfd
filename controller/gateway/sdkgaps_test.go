package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

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
	"sync/atomic"
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
			cn := newCancelNotices(context.Background())
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
// relies on in the go-sdk: the header the gateway sets on a session POST
// reaches the request's handler in req.Extra.Header (where the relay finds
// the stream's notices, relay.go), and a server request given up during a
// client's request is followed by a notifications/cancelled on that
// request's own response stream, written as one event that noticeWriter
// recognises. A go-sdk that strips the header from RequestExtra, or frames
// or routes the notice otherwise, fails here (and relays given up would
// then wait noticeWait for nothing, or not at all).
func TestGoSDKNoticeOnTheRequestStream(t *testing.T) {
	var s streamNotices
	found := make(chan bool, 1)   // the handler found its stream's notices
	noticed := make(chan bool, 1) // and the notice was counted on them
	srv := mcp.NewServer(&mcp.Implementation{Name: "canary", Version: "0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			cn := s.of(req.Extra) // as the relay does (relay.go)
			found <- cn != nil
			rctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
			defer cancel()
			_, err := req.Session.CreateMessage(rctx, &mcp.CreateMessageParams{MaxTokens: 1,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}})
			// Hold the answer until the notice is out, as relayed does:
			// the stream closes with the answer.
			noticed <- cn != nil && cn.await(cn.owe(), waitTimeout)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprint(err)}}}, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w, forget := s.watch(w, r)
		defer forget()
		sdk.ServeHTTP(w, r)
	}))
	defer hs.Close()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, _ *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			<-ctx.Done() // never answers
			return nil, ctx.Err()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, classicSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask"}); err != nil {
		t.Fatal(err)
	}
	// The call returned, so the handler did: both were sent.
	if !<-found {
		t.Fatal("the tool handler found no notices through req.Extra: the go-sdk no longer passes the POST's headers in RequestExtra (sdkgaps.go, relay.go)")
	}
	if !<-noticed {
		t.Fatal("no notifications/cancelled counted on the call's stream: the go-sdk no longer writes the notice there as one event (sdkgaps.go)")
	}
}

// TestFastHeadersAgreesWithTheGoSDK is the canary of fastHeaders: each
// header variant of a session POST goes to a bare go-sdk handler on a
// loopback listener, and fastHeaders must accept exactly what the go-sdk
// does not refuse. A go-sdk whose header checks change (media types,
// Accept forms, Host, Last-Event-ID) fails here. The rows marked own are
// the fast path's own rules, stricter than the go-sdk: there fastHeaders
// refuses what the go-sdk accepts.
func TestFastHeadersAgreesWithTheGoSDK(t *testing.T) {
	const version = "2025-06-18"
	srv := mcp.NewServer(&mcp.Implementation{Name: "canary", Version: "0"}, nil)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	fast := make(chan bool, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			select {
			case fast <- fastHeaders(r, false):
			default:
			}
		}
		sdk.ServeHTTP(w, r)
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1, DisableStandaloneSSE: true}, classicSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	<-fast // the client's own POSTs
	base := func() http.Header {
		return http.Header{
			"Content-Type":         {"application/json"},
			"Accept":               {"application/json, text/event-stream"},
			"Mcp-Session-Id":       {cs.ID()},
			"Mcp-Protocol-Version": {version},
		}
	}
	cases := []struct {
		name string
		set  func(h http.Header, r *http.Request)
		own  bool // refused by the fast path's own rule
	}{
		{"the client's headers", func(http.Header, *http.Request) {}, false},
		{"Accept with parameters", func(h http.Header, _ *http.Request) {
			h.Set("Accept", "application/json;q=0.9, text/event-stream; charset=utf-8")
		}, false},
		{"Accept upper case", func(h http.Header, _ *http.Request) { h.Set("Accept", "Application/JSON, TEXT/Event-Stream") }, false},
		{"Accept */*", func(h http.Header, _ *http.Request) { h.Set("Accept", "*/*") }, false},
		{"Accept application/* and text/*", func(h http.Header, _ *http.Request) { h.Set("Accept", "application/*, text/*") }, false},
		{"Accept application/* only", func(h http.Header, _ *http.Request) { h.Set("Accept", "application/*") }, false},
		{"Accept text/* only", func(h http.Header, _ *http.Request) { h.Set("Accept", "text/*") }, false},
		{"Accept application/json only", func(h http.Header, _ *http.Request) { h.Set("Accept", "application/json") }, false},
		{"Accept text/event-stream only", func(h http.Header, _ *http.Request) { h.Set("Accept", "text/event-stream") }, false},
		{"Accept in two lines", func(h http.Header, _ *http.Request) {
			h["Accept"] = []string{"application/json", "text/event-stream"}
		}, false},
		{"Accept near misses", func(h http.Header, _ *http.Request) { h.Set("Accept", "application/json-seq, text/event-streams") }, false},
		{"Accept missing", func(h http.Header, _ *http.Request) { h.Del("Accept") }, false},
		{"Content-Type with charset", func(h http.Header, _ *http.Request) { h.Set("Content-Type", "application/json; charset=utf-8") }, false},
		{"Content-Type upper case", func(h http.Header, _ *http.Request) { h.Set("Content-Type", "Application/JSON") }, false},
		{"Content-Type text/plain", func(h http.Header, _ *http.Request) { h.Set("Content-Type", "text/plain") }, false},
		{"Content-Type malformed", func(h http.Header, _ *http.Request) { h.Set("Content-Type", "application/json; charset") }, false},
		{"Content-Type missing", func(h http.Header, _ *http.Request) { h.Del("Content-Type") }, false},
		{"a foreign Host", func(_ http.Header, r *http.Request) { r.Host = "attacker.example" }, false},
		{"a loopback Host by name", func(_ http.Header, r *http.Request) { r.Host = "localhost" }, false},
		{"Last-Event-ID", func(h http.Header, _ *http.Request) { h.Set("Last-Event-ID", "0_1") }, false},
		{"Last-Event-ID empty", func(h http.Header, _ *http.Request) { h["Last-Event-Id"] = []string{""} }, false},
		{"Mcp-Method", func(h http.Header, _ *http.Request) { h.Set("Mcp-Method", "ping") }, true},
		{"Mcp-Name", func(h http.Header, _ *http.Request) { h.Set("Mcp-Name", "x") }, true},
		{"Mcp-Protocol-Version missing", func(h http.Header, _ *http.Request) { h.Del("Mcp-Protocol-Version") }, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"ping"}`, i+100)
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, hs.URL, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header = base()
			tc.set(req.Header, req)
			resp, err := hs.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			accepted := resp.StatusCode == http.StatusOK
			got := <-fast
			switch {
			case tc.own && (got || !accepted):
				t.Errorf("fastHeaders %v, go-sdk answered %d %q: want the go-sdk to accept and the fast path to leave it to the go-sdk", got, resp.StatusCode, bytes.TrimSpace(b))
			case !tc.own && got != accepted:
				t.Errorf("fastHeaders %v, but the go-sdk answered %d %q: the go-sdk's POST header checks changed (sdkgaps.go fastHeaders, acceptsBoth)", got, resp.StatusCode, bytes.TrimSpace(b))
			}
		})
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

// TestPayloadNamingCancelThenRelayGivenUp is the case isCancelNotice reads
// the method for: on the go-sdk path a backend's log message carrying the
// text "notifications/cancelled" reaches the call's stream, then the
// backend asks the client for sampling and the client never answers. When
// the call times out the client's sampling request must end (the go-sdk's
// notice must reach it): a writer that counted the log message as that
// notice let the relay return at once, the call's answer closed the stream
// first, and the client's request stayed open.
func TestPayloadNamingCancelThenRelayGivenUp(t *testing.T) {
	const relays = 8
	a := newRichBackend(t, "a")
	mimic := map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": 1}}
	a.srv.AddTool(&mcp.Tool{Name: "mimic", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var wg sync.WaitGroup
			for range relays {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: mimic})
				wg.Go(func() {
					_, _ = req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
						Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}})
				})
			}
			wg.Wait()
			return nil, errors.New("sampling failed")
		})
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: a.connect(t), CallTimeout: 300 * time.Millisecond})
	g.noFastPath.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	m := dialMuted(t, url)
	if err := m.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "debug"}); err != nil {
		t.Fatal(err)
	}
	_, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_mimic"})
	if msg := rpcMessage(err); !strings.Contains(msg, "timed out after 300ms") {
		t.Errorf("call: %q, want the timeout", msg)
	}
	for range relays {
		select {
		case <-m.logs: // the log messages were on the stream before the relays
		case <-ctx.Done():
			t.Fatal("the backend's log messages never reached the client")
		}
	}
	if entered, cancelled := m.waitCancelled(3 * time.Second); entered != relays || cancelled != relays {
		t.Errorf("client sampling requests: entered %d, cancelled %d, want %d and %d: a relay given up returned before its notice, and the client's request stays open", entered, cancelled, relays, relays)
	}
}

// TestRelayAfterPayloadNamingCancelWaitsForItsNotice is the same case as
// TestPayloadNamingCancelThenRelayGivenUp, one level down and without its
// race: on a stream that carried a log message whose data names
// "notifications/cancelled", a relay given up must not return until the
// go-sdk's own notice was written (it did at once when the writer counted
// the payload as the notice).
func TestRelayAfterPayloadNamingCancelWaitsForItsNotice(t *testing.T) {
	cn := newCancelNotices(context.Background())
	w := noticeWriter{ResponseWriter: httptest.NewRecorder(), notices: cn}
	write := func(event string) {
		if _, err := w.Write([]byte(event)); err != nil {
			t.Error(err)
		}
	}
	write("event: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":{"method":"notifications/cancelled"}}}` + "\n\n")
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the relay is given up
	returned := make(chan struct{})
	go func() {
		defer close(returned)
		_, _ = relayed(sdkStream{notices: cn}, ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, ctx.Err() })
	}()
	// Wait until the relay owes its notice, then give it well under
	// noticeWait to return early: it must not.
	for owed := 0; owed == 0; {
		cn.mu.Lock()
		owed = cn.owed
		cn.mu.Unlock()
		select {
		case <-returned:
			owed = 1
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case <-returned:
		t.Fatal("the relay given up returned before its notice was written: the payload naming notifications/cancelled was counted as the notice")
	case <-time.After(noticeWait / 4):
	}
	write("event: message\ndata: " + `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"context canceled"}}` + "\n\n")
	<-returned
}

// TestGoSDKRunsClassicHandlerOnAfterDisconnect: the go-sdk's stateful
// handler does not end a request's handler when the POST that carried it
// ends because its client went away (what endWithPOST is for), and it
// hands a request's handler that POST's header (RequestExtra.Header, where
// endWithPOST finds the POST). When an upgrade changes either, this fails:
// endWithPOST can go, or must find the POST another way.
func TestGoSDKRunsClassicHandlerOnAfterDisconnect(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "0"}, nil)
	entered, release, ended := make(chan string, 1), make(chan struct{}), make(chan error, 1)
	srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			entered <- req.Extra.Header.Get("X-Post")
			select {
			case <-ctx.Done():
				ended <- ctx.Err()
			case <-release:
				ended <- nil
			}
			return &mcp.CallToolResult{}, nil
		})
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	// The call's POST, served to its end. Only that one: the client's
	// initialize may return to its client before its ServeHTTP does.
	posted := make(chan struct{}, 1)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sdk.ServeHTTP(w, r)
		if r.Header.Get("X-Post") != "" {
			posted <- struct{}{}
		}
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, classicSession)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	defer close(release) // first: closing the session waits for the handler
	c := &rawClient{url: hs.URL, sid: cs.ID(), version: "2025-11-25"}
	callCtx, leave := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(callCtx, http.MethodPost, c.url, strings.NewReader(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"hold"}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set(sessionIDHeader, c.sid)
		req.Header.Set(protocolVersionHeader, c.version)
		req.Header.Set("X-Post", "the call's")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	select {
	case got := <-entered:
		if got != "the call's" {
			t.Errorf("the handler got header X-Post %q, want its POST's", got)
		}
	case <-ctx.Done():
		t.Fatal("the handler never ran")
	}
	leave()
	<-done
	select {
	case <-posted: // the call's POST returned
	case <-ctx.Done():
		t.Fatal("the call's POST never returned")
	}
	// A request answered on the session after that: whatever the go-sdk
	// did at the POST's end is done.
	if status, msgs := c.post(ctx, `{"jsonrpc":"2.0","id":"p","method":"ping"}`); status != http.StatusOK || !strings.Contains(msgs, `"id":"p"`) {
		t.Fatalf("ping: %d %s", status, msgs)
	}
	select {
	case err := <-ended:
		t.Fatalf("the go-sdk ended the handler (%v) when its client went: endWithPOST is no longer needed", err)
	default:
	}
}

// TestRelayGivenUpWithItsPOSTWaitsNoLonger: a relay given up because its
// client went away (the POST's context ended, endWithPOST) does not wait
// noticeWait for a notice its stream can no longer carry: the call, whose
// end waits for its relays, is not held back by it.
func TestRelayGivenUpWithItsPOSTWaitsNoLonger(t *testing.T) {
	post, end := context.WithCancel(context.Background())
	cn := newCancelNotices(post)
	returned := make(chan bool, 1)
	go func() { returned <- cn.await(cn.owe(), time.Hour) }()
	end()
	select {
	case got := <-returned:
		if got {
			t.Error("await reported a notice that was never written")
		}
	case <-time.After(waitTimeout):
		t.Fatal("the wait for a notice went on after its POST ended")
	}
}

// namingTransport adds a header to every request it sends.
type namingTransport struct {
	key, value string
}

func (h namingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(h.key, h.value)
	return http.DefaultTransport.RoundTrip(r)
}

// TestGoSDKSSERequestsCarryNoHeader: the go-sdk's SSE handler hands a
// request's handler none of its POST's headers. The /sse route relies on
// it: it does not clear the name of a POST (noticesHeader) that a client
// sends, which endWithPOST would otherwise read. When an upgrade changes
// that, this fails: /sse must clear the name as watchPOSTs does.
func TestGoSDKSSERequestsCarryNoHeader(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "bare", Version: "0"}, nil)
	got := make(chan string, 1)
	srv.AddTool(&mcp.Tool{Name: "look", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			if req.Extra != nil && req.Extra.Header != nil {
				got <- req.Extra.Header.Get(noticesHeader)
			} else {
				got <- ""
			}
			return &mcp.CallToolResult{}, nil
		})
	sse := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var named atomic.Int32 // POSTs that reached the handler naming a POST
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.Header.Get(noticesHeader) != "" {
			named.Add(1)
		}
		sse.ServeHTTP(w, r)
	}))
	defer hs.Close()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	client := &http.Client{Transport: namingTransport{noticesHeader, "1"}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "0"}, nil).Connect(ctx,
		&mcp.SSEClientTransport{Endpoint: hs.URL, HTTPClient: client}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "look"}); err != nil {
		t.Fatal(err)
	}
	if named.Load() == 0 {
		t.Fatal("no POST reached the handler with the header")
	}
	if name := <-got; name != "" {
		t.Fatalf("an SSE request's handler got %s %q from its POST: /sse must clear it", noticesHeader, name)
	}
}
