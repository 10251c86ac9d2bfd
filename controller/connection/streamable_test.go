//go:build unix

package connection

//lint:file-ignore SA1019 a server that samples during a call is what TestStreamableServerAsksDuringACall is about (deprecated as of 2026-07-28, live on every earlier protocol)

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// classic is the protocol the sessions of these tests ask for.
const classic = "2025-11-25"

// seenRequest is one HTTP request a test server received.
type seenRequest struct {
	method, rpc                     string // HTTP method; the JSON-RPC method of a POST
	sessionID, version, lastEventID string
}

// recorder records the requests of a server and serves them with next.
type recorder struct {
	mu   sync.Mutex
	seen []seenRequest
	next http.Handler
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sr := seenRequest{method: r.Method, sessionID: r.Header.Get(hdrSessionID), version: r.Header.Get(hdrProtocolVersion), lastEventID: r.Header.Get(hdrLastEventID)}
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(r.Body)
		var m struct{ Method string }
		_ = json.Unmarshal(body, &m)
		sr.rpc = m.Method
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	rec.mu.Lock()
	rec.seen = append(rec.seen, sr)
	rec.mu.Unlock()
	rec.next.ServeHTTP(w, r)
}

func (rec *recorder) requests() []seenRequest {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return append([]seenRequest(nil), rec.seen...)
}

func (rec *recorder) count(match func(seenRequest) bool) int {
	n := 0
	for _, r := range rec.requests() {
		if match(r) {
			n++
		}
	}
	return n
}

// ownSession connects a go-sdk client to url over tether's own transport,
// at the classic protocol. The connection it runs on is returned too, and
// closed is told the cause when the connection closes.
func ownSession(t *testing.T, url string, limit *messageLimit, opts *mcp.ClientOptions) (*mcp.ClientSession, *streamableConn, chan error) {
	t.Helper()
	closed := make(chan error, 1)
	client := &http.Client{Transport: &headerRoundTripper{base: newSharedHTTPTransport(), limit: limit}}
	tr := &captureTransport{inner: &streamableTransport{client: client, url: url, onClose: func(err error) { closed <- err }}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tether-test", Version: "1"}, opts).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: classic})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs, tr.conn, closed
}

// captureTransport keeps the connection inner made.
type captureTransport struct {
	inner *streamableTransport
	conn  *streamableConn
}

func (c *captureTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	conn, err := c.inner.Connect(ctx)
	if err == nil {
		c.conn = conn.(*streamableConn)
	}
	return conn, err
}

func callEcho(t *testing.T, cs *mcp.ClientSession) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	if err != nil || textOf(res) != "ok" {
		t.Fatalf("echo = %v, %v", res, err)
	}
}

// The session runs on tether's transport against the go-sdk's own server,
// stateful and stateless, answering in JSON and in event streams: calls
// are answered; every request after initialize carries the protocol
// version and, when the server gave one, the session id; a stateful
// session opens the standalone stream and Close sends DELETE with the id.
func TestStreamableAnswers(t *testing.T) {
	for _, tc := range []struct {
		name                string
		stateless, jsonResp bool
	}{
		{"stateful SSE", false, false},
		{"stateful JSON", false, true},
		{"stateless SSE", true, false},
		{"stateless JSON", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() },
				&mcp.StreamableHTTPOptions{Stateless: tc.stateless, JSONResponse: tc.jsonResp})}
			hs := httptest.NewServer(rec)
			t.Cleanup(hs.Close)
			cs, _, closed := ownSession(t, hs.URL, nil, nil)
			callEcho(t, cs)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) != 1 {
				t.Fatalf("tools/list = %v, %v", tools, err)
			}
			id := cs.ID()
			if (id == "") != tc.stateless {
				t.Fatalf("session id %q on a stateless=%v server", id, tc.stateless)
			}
			if got := cs.InitializeResult().ProtocolVersion; got != classic {
				t.Fatalf("negotiated %s, want %s", got, classic)
			}
			if err := cs.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if err := <-closed; err != nil {
				t.Errorf("a session closed by its owner reports cause %v", err)
			}
			reqs := rec.requests()
			if reqs[0].rpc != "initialize" || reqs[0].version != "" || reqs[0].sessionID != "" {
				t.Errorf("first request %+v, want initialize without session headers", reqs[0])
			}
			for _, r := range reqs[1:] {
				if r.version != classic || r.sessionID != id {
					t.Errorf("%s %s carries version %q and session %q, want %q and %q", r.method, r.rpc, r.version, r.sessionID, classic, id)
				}
			}
			gets := rec.count(func(r seenRequest) bool { return r.method == http.MethodGet })
			deletes := rec.count(func(r seenRequest) bool { return r.method == http.MethodDelete })
			if tc.stateless {
				if deletes != 0 {
					t.Errorf("%d DELETEs for a session without an id", deletes)
				}
				return
			}
			if gets != 1 || deletes != 1 {
				t.Errorf("%d standalone GETs and %d DELETEs, want 1 and 1", gets, deletes)
			}
		})
	}
}

// A server that closes a call's stream mid-way, with numbered events (the
// go-sdk's CloseSSEStream, SEP-1699), is resumed with Last-Event-ID: the
// call gets its answer, and the progress sent before the cut arrives.
func TestStreamableResumesACallStream(t *testing.T) {
	srv := echoServer()
	srv.AddTool(&mcp.Tool{Name: "poll", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 1, Message: "before"})
			req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: time.Millisecond})
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: 2, Message: "after"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "polled"}}}, nil
		})
	rec := &recorder{next: mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	var mu sync.Mutex
	var progress []string
	cs, _, _ := ownSession(t, hs.URL, nil, &mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
		mu.Lock()
		progress = append(progress, r.Params.Message)
		mu.Unlock()
	}})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	params := &mcp.CallToolParams{Name: "poll", Arguments: map[string]any{}}
	params.SetProgressToken("p1")
	res, err := cs.CallTool(ctx, params)
	if err != nil || textOf(res) != "polled" {
		t.Fatalf("poll = %v, %v", res, err)
	}
	if n := rec.count(func(r seenRequest) bool { return r.method == http.MethodGet && r.lastEventID != "" }); n != 1 {
		t.Errorf("%d GETs with Last-Event-ID, want 1 resumption", n)
	}
	// The go-sdk hands notifications to its handlers beside the answers.
	waitUntil(t, "the progress of both streams", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(progress) == 2
	})
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(progress, []string{"before", "after"}) {
		t.Errorf("progress %q, want before and after", progress)
	}
}

// forgetful serves the go-sdk's handler until forget is set; then it
// answers every request of a session 404, as a restarted server does.
func forgetful(forget *atomic.Bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if forget.Load() && r.Header.Get(hdrSessionID) != "" {
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// A server that forgot the session answers 404: the call fails with
// mcp.ErrSessionMissing, the connection closes with it, and no DELETE is
// sent for a session the server does not know.
func TestStreamableForgottenSession(t *testing.T) {
	var forget atomic.Bool
	rec := &recorder{next: forgetful(&forget, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil))}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	cs, _, closed := ownSession(t, hs.URL, nil, nil)
	callEcho(t, cs)
	forget.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	if !errors.Is(err, mcp.ErrSessionMissing) {
		t.Fatalf("call error %v, want mcp.ErrSessionMissing", err)
	}
	select {
	case cause := <-closed:
		if !errors.Is(cause, mcp.ErrSessionMissing) {
			t.Errorf("closed with %v, want mcp.ErrSessionMissing", cause)
		}
	case <-ctx.Done():
		t.Fatal("the connection did not close")
	}
	if n := rec.count(func(r seenRequest) bool { return r.method == http.MethodDelete }); n != 0 {
		t.Errorf("%d DELETEs for a session the server forgot", n)
	}
}

// A server without a standalone stream (405, or 404 as some answer) is
// served as the go-sdk serves it: no stream, and the session works.
func TestStreamableWithoutStandaloneStream(t *testing.T) {
	// A 5xx that is no event stream (a proxy's 502 page, a server's 500)
	// means no standalone stream to the go-sdk too: it looks at the
	// Content-Type before the status.
	for _, status := range []int{http.StatusMethodNotAllowed, http.StatusNotFound, http.StatusInternalServerError, http.StatusBadGateway} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
			rec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodGet {
					http.Error(w, "no stream here", status)
					return
				}
				h.ServeHTTP(w, r)
			})}
			hs := httptest.NewServer(rec)
			t.Cleanup(hs.Close)
			cs, conn, _ := ownSession(t, hs.URL, nil, nil)
			callEcho(t, cs)
			conn.standalone.Wait() // the stream's goroutine has given up
			callEcho(t, cs)
			if err := conn.err(); err != nil {
				t.Fatalf("the connection failed: %v", err)
			}
			if n := rec.count(func(r seenRequest) bool { return r.method == http.MethodGet }); n != 1 {
				t.Errorf("%d GETs, want 1", n)
			}
		})
	}
}

// A standalone stream that breaks is opened again with Last-Event-ID, and
// what the server sends on it afterwards arrives.
func TestStreamableStandaloneStreamResumed(t *testing.T) {
	srv := echoServer()
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)})
	var gets atomic.Int32
	rec := &recorder{next: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && gets.Add(1) == 1 {
			// The first stream breaks after its first list_changed.
			ctx, cancel := context.WithCancel(r.Context())
			h.ServeHTTP(&cutWriter{ResponseWriter: w, cancel: cancel, after: "list_changed"}, r.WithContext(ctx))
			return
		}
		h.ServeHTTP(w, r)
	})}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	changed := make(chan struct{}, 1)
	cs, _, _ := ownSession(t, hs.URL, nil, &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case changed <- struct{}{}:
		default:
		}
	}})
	callEcho(t, cs)
	// Change the tools until the news arrives (the server may take a
	// moment to serve the stream it accepted).
	awaitChange := func(what string) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for i := 0; ; i++ {
			srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("%s%d", what, i), InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
			select {
			case <-changed:
				return
			case <-deadline:
				t.Fatalf("no list_changed arrived on the %s standalone stream", what)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	awaitChange("first")
	waitUntil(t, "the standalone stream to be opened again", func() bool { return gets.Load() >= 2 })
	if n := rec.count(func(r seenRequest) bool { return r.method == http.MethodGet && r.lastEventID != "" }); n != 1 {
		t.Errorf("the standalone stream was opened again %d times with Last-Event-ID, want 1", n)
	}
	awaitChange("resumed")
}

// cutWriter ends its request (cancel) once it wrote an event that
// contains after.
type cutWriter struct {
	http.ResponseWriter
	cancel context.CancelFunc
	after  string
	buf    bytes.Buffer
}

func (c *cutWriter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.buf.Write(p)
	if i := bytes.Index(c.buf.Bytes(), []byte(c.after)); i >= 0 && bytes.Contains(c.buf.Bytes()[i:], []byte("\n\n")) {
		c.cancel()
	}
	return n, err
}

func (c *cutWriter) Flush() { _ = http.NewResponseController(c.ResponseWriter).Flush() }

// A 503 or a JSON-RPC error answer to one request fails that request, not
// the session: the go-sdk reads errRejected as its own rejection (its
// jsonrpc2 package is internal; jsonrpc.Error matches by code). If a go-sdk
// upgrade changes that, the second call fails here.
func TestStreamableRejectedKeepsSession(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body string
		status            int
	}{
		{"503", "text/plain", "busy", http.StatusServiceUnavailable},
		{"JSON-RPC error", "application/json", `{"jsonrpc":"2.0","id":"x","error":{"code":-32600,"message":"no thanks"}}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var refuse atomic.Bool
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && refuse.CompareAndSwap(true, false) {
					w.Header().Set("Content-Type", tc.ctype)
					w.WriteHeader(tc.status)
					_, _ = io.WriteString(w, tc.body)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			cs, conn, _ := ownSession(t, hs.URL, nil, nil)
			refuse.Store(true)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
			if err == nil {
				t.Fatal("the refused call passed")
			}
			if !errors.Is(err, errRejected) {
				t.Errorf("call error %v is not a rejection", err)
			}
			callEcho(t, cs)
			if err := conn.err(); err != nil {
				t.Errorf("the connection failed: %v", err)
			}
		})
	}
}

// hostileAnswer answers a tools/call of the tool it names with answer (a
// content type and a body), and serves the rest with the go-sdk.
func hostileAnswer(t *testing.T, tool, ctype, body string) *httptest.Server {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			var m struct {
				ID     json.RawMessage
				Method string
				Params struct{ Name string }
			}
			_ = json.Unmarshal(b, &m)
			if m.Method == "tools/call" && m.Params.Name == tool {
				w.Header().Set("Content-Type", ctype)
				_, _ = io.WriteString(w, strings.ReplaceAll(body, "ID", string(m.ID)))
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// A message nested deeper than the go-sdk reads breaks the connection, as
// it does on the go-sdk's transport, in a JSON answer and in an event.
func TestStreamableRefusesDeepMessages(t *testing.T) {
	deep := strings.Repeat("[", wire.SDKMaxDepth+1) + strings.Repeat("]", wire.SDKMaxDepth+1)
	msg := `{"jsonrpc":"2.0","id":ID,"result":{"content":[],"x":` + deep + `}}`
	for _, tc := range []struct{ ctype, body string }{
		{"application/json", msg},
		{"text/event-stream", "data: " + msg + "\n\n"},
	} {
		t.Run(tc.ctype, func(t *testing.T) {
			hs := hostileAnswer(t, "deep", tc.ctype, tc.body)
			cs, conn, closed := ownSession(t, hs.URL, nil, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "deep", Arguments: map[string]any{}}); err == nil {
				t.Fatal("the over-deep answer passed")
			}
			want := fmt.Sprintf("nested deeper than %d levels", wire.SDKMaxDepth)
			if err := conn.err(); err == nil || !strings.Contains(err.Error(), want) {
				t.Fatalf("connection error %v, want %q", err, want)
			}
			if cause := <-closed; cause == nil || !strings.Contains(cause.Error(), want) {
				t.Errorf("closed with %v", cause)
			}
		})
	}
}

// An event over the message limit fails the call and breaks the
// connection with the limit's error; the server's endless write ends.
func TestStreamableEventOverLimit(t *testing.T) {
	var streams atomic.Int32
	hs := hostileServer(t, &streams)
	limit := &messageLimit{conn: "hostile", max: 64 << 10}
	cs, conn, _ := ownSession(t, hs.URL, limit, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "endless-sse", Arguments: map[string]any{}}); err == nil {
		t.Fatal("the endless event passed")
	}
	var tooLarge *MessageTooLargeError
	if err := conn.err(); !errors.As(err, &tooLarge) {
		t.Fatalf("connection error %v, want the limit's", err)
	}
	waitUntil(t, "the server's endless write to end", func() bool { return streams.Load() == 0 })
}

// Close ends a call whose answer never ends: the call returns, and the
// server sees its stream closed.
func TestStreamableCloseEndsEndlessStream(t *testing.T) {
	var streams atomic.Int32
	hs := hostileServer(t, &streams)
	cs, conn, closed := ownSession(t, hs.URL, nil, nil)
	failed := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "endless-sse", Arguments: map[string]any{}})
		failed <- err
	}()
	waitUntil(t, "the endless answer to start", func() bool { return streams.Load() == 1 })
	if err := conn.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	select {
	case err := <-failed:
		if err == nil {
			t.Error("the endless call succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close left the call waiting")
	}
	if err := <-closed; err != nil {
		t.Errorf("closed with %v, want nil (closed by its owner)", err)
	}
	waitUntil(t, "the server's endless write to end", func() bool { return streams.Load() == 0 })
}

// decodeMessage reads the envelope as the go-sdk's jsonrpc.DecodeMessage
// reads it: the same message, or an error for the same inputs.
func TestDecodeMessageAsTheSDK(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":"a","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1}}`,
		`{"jsonrpc":"2.0","id":7,"result":{"tools":[]}}`,
		`{"jsonrpc":"2.0","id":7,"result":null}`,
		`{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"nope","data":{"a":1}}}`,
		`{"jsonrpc":"2.0","id":3,"error":null,"result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":""}`,
		`{"jsonrpc":"2.0","ID":1,"Method":"ping"}`,         // exact names only
		`{"jsonrpc":"2.0","id":1,"Result":{},"result":{}}`, // exact names only
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":[1],"method":"ping"}`,
		`{"jsonrpc":"2.0","result":{}}`,
		`{"jsonrpc":"2.0","id":1,"method":5}`,
		`[1,2]`,
		`{"jsonrpc":"2.0",`,
	} {
		want, wantErr := jsonrpc.DecodeMessage([]byte(in))
		got, err := decodeMessage([]byte(in))
		if (err != nil) != (wantErr != nil) {
			t.Errorf("%s: error %v, the go-sdk's %v", in, err, wantErr)
			continue
		}
		if err != nil {
			continue
		}
		wj, _ := jsonrpc.EncodeMessage(want)
		gj, _ := jsonrpc.EncodeMessage(got)
		if reflect.TypeOf(got) != reflect.TypeOf(want) || string(gj) != string(wj) {
			t.Errorf("%s: decoded %T %s, the go-sdk %T %s", in, got, gj, want, wj)
		}
	}
}

// A session to a classic endpoint runs on tether's transport, the first
// one (which asks server/discover) and those that start at the version the
// first learnt, and holds no watcher goroutine: when its server
// forgets it, the standalone stream's reconnection meets the 404, the
// connection closes, and the session ends with mcp.ErrSessionMissing; a
// session that closes sends DELETE.
func TestSessionOnOwnTransport(t *testing.T) {
	var forget atomic.Bool
	rec := &recorder{next: forgetful(&forget, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	c := newConnector(t)
	first := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")}) // learns the version
	if !first.ownConn {
		t.Fatal("the first connect, which tries 2026-07-28, runs on the go-sdk's transport")
	}
	s := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")})
	if !s.ownConn {
		t.Fatal("a connect at a known classic version runs on the go-sdk's transport")
	}
	if v := s.Server().ProtocolVersion; v != classic {
		t.Fatalf("negotiated %s, want %s", v, classic)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, nil); err != nil || textOf(res) != "ok" {
		t.Fatalf("echo = %v, %v", res, err)
	}
	if _, _, err := s.CallToolRaw(ctx, "echo", nil, nil); err != nil {
		t.Fatalf("raw echo: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if n := rec.count(func(r seenRequest) bool { return r.method == http.MethodDelete && r.sessionID == first.cs.ID() }); n != 1 {
		t.Errorf("%d DELETEs for the closed session, want 1", n)
	}
	// The server forgets s; its standalone stream ends and is opened again.
	forget.Store(true)
	hs.CloseClientConnections()
	waitDone(t, s, 10*time.Second)
	if err := s.Err(); !errors.Is(err, mcp.ErrSessionMissing) {
		t.Errorf("the session ended with %v, want mcp.ErrSessionMissing", err)
	}
	if n := rec.count(func(r seenRequest) bool { return r.method == http.MethodDelete && r.sessionID == s.cs.ID() }); n != 0 {
		t.Errorf("%d DELETEs for a session the server forgot", n)
	}
}

// A server that asks the client something while it works on a call (on
// the call's stream) gets its answer, and the call then its own: the
// call's stream is read on the goroutine that wrote the call, and the
// question is answered from another.
func TestStreamableServerAsksDuringACall(t *testing.T) {
	srv := echoServer()
	srv.AddTool(&mcp.Tool{Name: "ask", InputSchema: map[string]any{"type": "object"}},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 5,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "hi"}}}})
			if err != nil {
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{res.Content}}, nil
		})
	for _, jsonResp := range []bool{false, true} {
		t.Run(fmt.Sprintf("JSONResponse=%v", jsonResp), func(t *testing.T) {
			hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
				&mcp.StreamableHTTPOptions{JSONResponse: jsonResp}))
			t.Cleanup(hs.Close)
			cs, _, _ := ownSession(t, hs.URL, nil, &mcp.ClientOptions{
				CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
					return &mcp.CreateMessageResult{Model: "m", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
				}})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "ask", Arguments: map[string]any{}})
			if err != nil || textOf(res) != "sampled" {
				t.Fatalf("ask = %v, %v", res, err)
			}
		})
	}
}

// A server that sends a call's response on the standalone stream (which
// the spec forbids; the go-sdk's client takes it), and answers the call's
// POST with a stream it keeps open, or not at all: the call is answered,
// and tether lets go of the call's request.
func TestStreamableResponseOnAnotherStream(t *testing.T) {
	for _, headers := range []bool{true, false} {
		t.Run(fmt.Sprintf("call stream answered=%v", headers), func(t *testing.T) {
			standalone := make(chan io.Writer, 1)
			var callStreamClosed atomic.Bool
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set(hdrSessionID, "s1")
				switch r.Method {
				case http.MethodGet:
					w.Header().Set("Content-Type", "text/event-stream")
					w.WriteHeader(http.StatusOK)
					http.NewResponseController(w).Flush()
					standalone <- w
					<-r.Context().Done()
					return
				case http.MethodDelete:
					return
				}
				var m struct {
					ID     json.RawMessage
					Method string
				}
				_ = json.NewDecoder(r.Body).Decode(&m)
				switch m.Method {
				case "initialize":
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"odd","version":"1"}}}`, m.ID, classic)
				case "tools/call":
					if headers {
						w.Header().Set("Content-Type", "text/event-stream")
						w.WriteHeader(http.StatusOK)
						http.NewResponseController(w).Flush()
					}
					sw := <-standalone
					fmt.Fprintf(sw, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"elsewhere\"}]}}\n\n", m.ID)
					http.NewResponseController(sw.(http.ResponseWriter)).Flush()
					<-r.Context().Done() // the call's request stays open until tether goes
					callStreamClosed.Store(true)
				default:
					w.WriteHeader(http.StatusAccepted)
				}
			}))
			t.Cleanup(hs.Close)
			cs, conn, _ := ownSession(t, hs.URL, nil, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "x", Arguments: map[string]any{}})
			if err != nil || textOf(res) != "elsewhere" {
				t.Fatalf("call = %v, %v", res, err)
			}
			waitUntil(t, "tether to let go of the call's request", callStreamClosed.Load)
			if err := conn.err(); err != nil {
				t.Errorf("the connection failed: %v", err)
			}
		})
	}
}

// A call given up while its JSON answer is still coming fails alone: the
// session stays up (the go-sdk's transport breaks it).
func TestStreamableCancelDuringJSONAnswer(t *testing.T) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if bytes.Contains(b, []byte(`"stall"`)) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("X-Stall", "1")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0",`)
				http.NewResponseController(w).Flush()
				<-r.Context().Done()
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	// answering: tether has the stalled answer's head and reads its body.
	answering := make(chan struct{}, 1)
	base := newSharedHTTPTransport()
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := base.RoundTrip(r)
		if err == nil && resp.Header.Get("X-Stall") != "" {
			answering <- struct{}{}
		}
		return resp, err
	})}
	tr := &captureTransport{inner: &streamableTransport{client: client, url: hs.URL}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tether-test", Version: "1"}, nil).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: classic})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	failed := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "stall", Arguments: map[string]any{}})
		failed <- err
	}()
	<-answering
	cancel()
	if err := <-failed; !errors.Is(err, context.Canceled) {
		t.Errorf("the given-up call failed with %v", err)
	}
	callEcho(t, cs)
	if err := tr.conn.err(); err != nil {
		t.Errorf("the connection failed: %v", err)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// A server that keeps a call's stream open after the call's response (the
// spec says it SHOULD close it) does not hold the call: on tether's
// transport and on the raw path, the call returns with its answer, and
// tether lets go of the stream.
func TestStreamableStreamLingersAfterTheAnswer(t *testing.T) {
	var released atomic.Int32
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost && bytes.Contains(b, []byte(`"tools/call"`)) {
			<-r.Context().Done()
			released.Add(1)
		}
	}))
	t.Cleanup(hs.Close)
	for _, path := range []string{"transport", "raw"} {
		t.Run(path, func(t *testing.T) {
			before := released.Load()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var err error
			if path == "transport" {
				cs, _, _ := ownSession(t, hs.URL, nil, nil)
				var res *mcp.CallToolResult
				if res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err == nil && textOf(res) != "ok" {
					t.Errorf("echo = %v", res)
				}
			} else {
				s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
				_, _, err = s.CallToolRaw(ctx, "echo", nil, nil)
			}
			if err != nil {
				t.Fatalf("call: %v", err)
			}
			if ctx.Err() != nil {
				t.Fatal("the call returned only when its deadline ended the stream")
			}
			waitUntil(t, "tether to let go of the stream", func() bool { return released.Load() > before })
		})
	}
}

// A call returns as soon as its response came, as on the go-sdk's
// transport, which reads the answer on a goroutine of its own: the rest of
// the call's stream (here held open by the server until the call returned)
// is drained after, not before, so that no call (and no connect's
// initialize and lists) waits for the end of the server's stream. The
// drain reads to the stream's end though the caller's ctx ended, so that
// the connection goes back to the pool.
func TestStreamableCallReturnsBeforeItsStreamEnds(t *testing.T) {
	returned := make(chan struct{})
	var released atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost && bytes.Contains(b, []byte(`"tools/call"`)) {
			select {
			case <-returned:
			case <-r.Context().Done():
			}
			released.Store(true)
		}
	}))
	t.Cleanup(hs.Close)
	var mu sync.Mutex
	var order []string
	note := func(what string) {
		mu.Lock()
		order = append(order, what)
		mu.Unlock()
	}
	base := newSharedHTTPTransport()
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		call := false
		if r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			call = bytes.Contains(b, []byte(`"tools/call"`))
		}
		resp, err := base.RoundTrip(r)
		if err == nil && call {
			resp.Body = &noteClose{ReadCloser: resp.Body, closed: func(eof bool) { note(fmt.Sprintf("stream closed (read to its end: %v)", eof)) }}
		}
		return resp, err
	})}
	tr := &streamableTransport{client: client, url: hs.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tether-test", Version: "1"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: classic})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	callCtx, callDone := context.WithCancel(ctx)
	res, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	note("call returned")
	callDone()
	close(returned)
	if err != nil || textOf(res) != "ok" {
		t.Fatalf("echo = %v, %v", res, err)
	}
	waitUntil(t, "the call's stream to be drained and closed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 2 && released.Load()
	})
	if want := []string{"call returned", "stream closed (read to its end: true)"}; !reflect.DeepEqual(order, want) {
		t.Errorf("events %q, want %q", order, want)
	}
}

// noteClose tells closed when its body is closed, once, and whether it
// was read to its end.
type noteClose struct {
	io.ReadCloser
	once   sync.Once
	eof    atomic.Bool
	closed func(eof bool)
}

func (n *noteClose) Read(p []byte) (int, error) {
	k, err := n.ReadCloser.Read(p)
	if err == io.EOF {
		n.eof.Store(true)
	}
	return k, err
}

func (n *noteClose) Close() error {
	n.once.Do(func() { n.closed(n.eof.Load()) })
	return n.ReadCloser.Close()
}

// A raw call answered 500 with the server's JSON-RPC error (as servers on
// the TypeScript SDK answer an error they did not expect, "id":null) fails
// with the server's words, as it did before the raw path shared
// responseError, not with the status text alone.
func TestRawCallKeepsTheServersWordsOn500(t *testing.T) {
	var broken atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if broken.Load() && r.Method == http.MethodPost {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"jsonrpc":"2.0","error":{"code":-32603,"message":"the database is down"},"id":null}`)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	broken.Store(true)
	_, _, err := s.CallToolRaw(ctx, "echo", nil, nil)
	if err == nil || !strings.Contains(err.Error(), "the database is down") {
		t.Fatalf("raw call answered 500 with a JSON-RPC error: %v, want the server's message", err)
	}
	if s.Err() != nil {
		t.Errorf("a 500 ended the session: %v", s.Err())
	}
}

// Nothing of a session on tether's transport outlives its Close: the
// standalone stream's goroutines, the drains of its calls' streams (here
// held open by the server until the test ends) and Close's end are gone.
func TestStreamableLeavesNoGoroutines(t *testing.T) {
	hold := make(chan struct{})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		h.ServeHTTP(w, r)
		if r.Method == http.MethodPost && bytes.Contains(b, []byte(`"tools/call"`)) {
			select {
			case <-hold:
			case <-r.Context().Done():
			}
		}
	}))
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(hold) }) // before hs.Close, which waits for the handlers
	for range 3 {
		cs, _, closed := ownSession(t, hs.URL, nil, nil)
		callEcho(t, cs)
		if err := cs.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		<-closed
	}
	var stacks string
	waitUntil(t, "the sessions' goroutines to end", func() bool {
		buf := make([]byte, 1<<20)
		stacks = string(buf[:runtime.Stack(buf, true)])
		return !strings.Contains(stacks, "(*streamableConn)") && !strings.Contains(stacks, "connection.drain")
	})
}

// A Write that breaks the connection (here a server that answers a call
// under another session id) ends it with its own error: the go-sdk closes
// the connection after such a Write, and Close tells onClose the cause,
// which the session's end reports.
func TestStreamableBrokenWriteIsTheCause(t *testing.T) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				w.Header().Set(hdrSessionID, "another")
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{}}`)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	cs, _, closed := ownSession(t, hs.URL, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}); err == nil {
		t.Fatal("a call answered under another session id succeeded")
	}
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "mismatching session IDs") {
			t.Fatalf("the connection closed with %v, want the mismatching session ids", err)
		}
	case <-ctx.Done():
		t.Fatal("the connection outlived a Write that broke it")
	}
}
