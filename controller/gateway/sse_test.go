package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseURL is the /sse of a served gateway whose /mcp is url.
func sseURL(url string) string { return strings.TrimSuffix(url, Path) + SSEPath }

// TestSSEListsAndCalls: the go-sdk's legacy SSE client lists and calls
// through /sse when Options.SSE is set; without it /sse is 404.
func TestSSEListsAndCalls(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SSE: true})
	be, tools, _ := newTestBackend("one").connect(t)
	g.Set(Connection{Name: "one", Prefix: "one", Backend: withTools(be, tools)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "sse-agent", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.SSEClientTransport{Endpoint: sseURL(url)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "one_echo", Arguments: map[string]any{"msg": "over sse"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(textOf(res), "over sse") {
		t.Fatalf("call over SSE: %+v", res)
	}

	off := New(Options{Logger: testLogger(t)})
	offURL, _ := serveOn(t, off, "127.0.0.1:0", "")
	resp, err := http.Get(sseURL(offURL))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/sse without Options.SSE: %d, want 404", resp.StatusCode)
	}
}

// openSSE opens an SSE stream with the given headers and returns its
// status; a 200 stream is read up to its endpoint event and kept open
// until the test ends.
func openSSE(t *testing.T, url string, header map[string]string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return resp.StatusCode
	}
	t.Cleanup(func() { resp.Body.Close() })
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "event: endpoint") {
		t.Fatalf("first line of the SSE stream: %q, %v", line, err)
	}
	return resp.StatusCode
}

// TestSSELimits: /sse has /mcp's guards: the bearer token, the Origin
// check, and the session bounds (per client 429, in all 503).
func TestSSELimits(t *testing.T) {
	t.Run("token", func(t *testing.T) {
		g := New(Options{Logger: testLogger(t), SSE: true})
		url, _ := serveOn(t, g, "127.0.0.1:0", writeToken(t, "s3cret"))
		if got := openSSE(t, sseURL(url), nil); got != http.StatusUnauthorized {
			t.Errorf("/sse without the token: %d, want 401", got)
		}
		if got := openSSE(t, sseURL(url), map[string]string{"Authorization": "Bearer s3cret"}); got != http.StatusOK {
			t.Errorf("/sse with the token: %d, want 200", got)
		}
	})
	t.Run("origin", func(t *testing.T) {
		g := New(Options{Logger: testLogger(t), SSE: true})
		url, _ := serveOn(t, g, "127.0.0.1:0", "")
		if got := openSSE(t, sseURL(url), map[string]string{"Origin": "https://evil.example"}); got != http.StatusForbidden {
			t.Errorf("/sse from a foreign Origin: %d, want 403", got)
		}
	})
	t.Run("sessions", func(t *testing.T) {
		g := New(Options{Logger: testLogger(t), SSE: true, MaxSessions: 2, MaxSessionsPerClient: 1})
		url, _ := serveOn(t, g, "127.0.0.1:0", "")
		if got := openSSE(t, sseURL(url), nil); got != http.StatusOK {
			t.Fatalf("first SSE session: %d", got)
		}
		if got := openSSE(t, sseURL(url), nil); got != http.StatusTooManyRequests {
			t.Errorf("a second SSE session of one client past --max-sessions-per-client: %d, want 429", got)
		}
		g.sse.mu.Lock()
		g.sse.perClient = 5
		g.sse.mu.Unlock()
		if got := openSSE(t, sseURL(url), nil); got != http.StatusOK {
			t.Fatalf("second SSE session: %d", got)
		}
		if got := openSSE(t, sseURL(url), nil); got != http.StatusServiceUnavailable {
			t.Errorf("an SSE session past --max-sessions: %d, want 503", got)
		}
	})
}

// sseSession is a raw legacy SSE session: its stream, and POST of one
// message to it.
type sseSession struct {
	t      *testing.T
	post   string // the URL messages go to
	cancel context.CancelFunc

	mu     sync.Mutex
	events strings.Builder // what the stream carried
}

// streamed reports whether the stream carried text.
func (s *sseSession) streamed(text string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.events.String(), text)
}

// openSSESession opens a stream on url's /sse, reads the endpoint event,
// discards the rest, and initializes the session.
func openSSESession(t *testing.T, url string) *sseSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, sseURL(url), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	br := bufio.NewReader(resp.Body)
	var endpoint string
	for endpoint == "" {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("reading the endpoint event: %v", err)
		}
		if rest, ok := strings.CutPrefix(line, "data:"); ok {
			endpoint = strings.TrimSpace(rest)
		}
	}
	s := &sseSession{t: t, post: strings.TrimSuffix(url, Path) + endpoint, cancel: cancel}
	go func() { // ends with the stream
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			s.mu.Lock()
			s.events.WriteString(line)
			s.mu.Unlock()
		}
	}()
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}`)
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	return s
}

func (s *sseSession) send(msg string) {
	s.t.Helper()
	resp, err := http.Post(s.post, "application/json", bytes.NewBufferString(msg))
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		s.t.Fatalf("POST %s: %d", msg, resp.StatusCode)
	}
}

// TestSSEClientThatLeavesFreesItsRequests: when an SSE client's stream
// ends, its requests end with it: a list waiting for the first outcomes
// stops waiting, and its session's place is given back, rather than both
// being held until --connect-timeout.
func TestSSEClientThatLeavesFreesItsRequests(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SSE: true, FirstAnswer: make(chan struct{}), FirstAnswerTimeout: time.Hour})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	s := openSSESession(t, url)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	waitFor(t, "the list waits", func() bool { return g.firstWaiting.Load() == 1 })
	s.cancel()
	waitFor(t, "the wait ends with its stream", func() bool { return g.firstWaiting.Load() == 0 })
	waitFor(t, "the SSE session's place is given back", func() bool {
		g.sse.mu.Lock()
		defer g.sse.mu.Unlock()
		return g.sse.n == 0
	})
}

// TestSSERequestsInFlightAreBounded: an SSE message is answered 202 and
// served meanwhile, so a client could keep any number running; past
// Options.MaxConnections requests of SSE sessions in flight (as many as
// /mcp could hold, one per connection), a request gets an error at once.
func TestSSERequestsInFlightAreBounded(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SSE: true, MaxConnections: 2, FirstAnswer: make(chan struct{}), FirstAnswerTimeout: time.Hour})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	s := openSSESession(t, url)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	waitFor(t, "two lists wait", func() bool { return g.firstWaiting.Load() == 2 })
	s.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	waitFor(t, "the third request is refused", func() bool {
		return s.streamed(`"id":3,"error"`) && s.streamed("requests of SSE sessions are in flight")
	})
	s.cancel()
	waitFor(t, "the waits end with the stream", func() bool { return g.firstWaiting.Load() == 0 && g.sseInFlight.n.Load() == 0 })
}

// TestSSEListensHoldHalfTheBound: an SSE session's subscriptions/listen
// is served for its stream's life and holds a place among the requests of
// SSE sessions in flight: listens hold at most half of them, and one past
// that is answered with the error naming --max-connections, so the other
// requests are served. Before, 4 listens of one session at
// --max-connections 4 had every other request of every SSE session
// refused until its stream ended.
func TestSSEListensHoldHalfTheBound(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SSE: true, MaxConnections: 4})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	s := openSSESession(t, url)
	for id := 1; id <= 4; id++ {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`, id))
	}
	waitFor(t, "the listens past half the bound are refused", func() bool {
		return s.streamed(`"id":3,"error"`) && s.streamed(`"id":4,"error"`) && s.streamed("(half of --max-connections")
	})
	s.send(`{"jsonrpc":"2.0","id":9,"method":"ping"}`)
	waitFor(t, "a ping with listens at their share is answered", func() bool { return s.streamed(`"id":9,"result"`) })
	if s.streamed(`"id":1,"error"`) || s.streamed(`"id":2,"error"`) {
		t.Error("a listen within the share was refused")
	}
	s.cancel()
	waitFor(t, "the listens end with the stream", func() bool { return g.sseListens.Load() == 0 && g.sseInFlight.n.Load() == 0 })
}

// TestSSECallInFlightAnsweredAtShutdown: at shutdown a call in flight of
// an SSE session gets its answer on the session's stream before the stream
// ends, as a call over /mcp does: the drain counted only the POSTs in
// flight, and an SSE message is answered 202 at once, so the streams were
// ended at once and the call's answer lost.
func TestSSECallInFlightAnsweredAtShutdown(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SSE: true, ShutdownTimeout: 30 * time.Second})
	tb := newTestBackend("one")
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	tb.srv.AddTool(&mcp.Tool{Name: "hold", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tb.entered <- struct{}{}
			<-release
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil
		})
	be, tools, _ := tb.connect(t)
	g.Set(Connection{Name: "one", Prefix: "one", Backend: withTools(be, tools)})
	url, stop := serveOn(t, g, "127.0.0.1:0", "")
	s := openSSESession(t, url)
	s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"one_hold","arguments":{}}}`)
	select {
	case <-tb.entered:
	case <-time.After(waitTimeout):
		t.Fatal("the call never reached the backend")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	t.Cleanup(func() { free(); <-stopped; stopped <- nil })
	addr := strings.TrimPrefix(strings.TrimSuffix(url, Path), "http://")
	waitFor(t, "shutdown to begin (the listener closed)", func() bool {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	free()
	waitFor(t, "the call's answer on the SSE stream", func() bool { return s.streamed(`"id":7,"result"`) })
	if err := <-stopped; err != nil {
		t.Errorf("Serve returned %v", err)
	}
	stopped <- nil // for the cleanup
}
