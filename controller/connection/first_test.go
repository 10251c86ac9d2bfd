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
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// rpcOf is the JSON-RPC method and raw id of a POST's body, which it
// leaves readable.
func rpcOf(r *http.Request) (method string, id json.RawMessage) {
	if r.Method != http.MethodPost {
		return "", nil
	}
	body, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	var m struct {
		Method string
		ID     json.RawMessage
	}
	_ = json.Unmarshal(body, &m)
	return m.Method, m.ID
}

// goroutinesIn counts the goroutines whose stack has one of fns in it.
func goroutinesIn(fns ...string) int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	count := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		for _, fn := range fns {
			if strings.Contains(g, fn) {
				count++
				break
			}
		}
	}
	return count
}

// A first connect to a classic server (a stateful go-sdk server, which
// answers server/discover with its classic versions only) runs on tether's
// transport from its first message: discover goes out as the go-sdk's
// transport sends it, the go-sdk falls back to initialize on the same
// connection, and the session has what sessions on tether's transport rely
// on: the raw path's client and endpoint, its id kept from logs, and the
// end hook, which ends it when its server forgets it.
func TestFirstConnectOnOwnTransport(t *testing.T) {
	var forget atomic.Bool
	rec := &recorder{next: forgetful(&forget, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() },
		&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))}
	hs := httptest.NewServer(rec)
	t.Cleanup(hs.Close)
	c := newConnector(t)
	s := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")})
	if !s.ownConn {
		t.Fatal("the first connect to a classic server runs on the go-sdk's transport")
	}
	if v := s.Server().ProtocolVersion; v != classic {
		t.Fatalf("negotiated %s, want %s", v, classic)
	}
	var posts []seenRequest
	for _, r := range rec.requests() {
		if r.method == http.MethodPost {
			posts = append(posts, r)
		}
	}
	if len(posts) < 2 || posts[0].rpc != methodDiscover || posts[1].rpc != "initialize" {
		t.Fatalf("the server was sent %+v, want server/discover, then initialize", posts)
	}
	if posts[0].version != protocol2026 || posts[0].sessionID != "" {
		t.Errorf("discover carried version %q and session %q, want %s and none", posts[0].version, posts[0].sessionID, protocol2026)
	}
	if posts[1].version != "" || posts[1].sessionID != "" {
		t.Errorf("the fallback initialize carried version %q and session %q, want neither", posts[1].version, posts[1].sessionID)
	}
	if n := rec.count(func(r seenRequest) bool { return r.rpc == "initialize" }); n != 1 {
		t.Errorf("initialize sent %d times, want 1", n)
	}
	// A goroutine that has not run yet shows the wrapper of its go
	// statement, created by Connect, not watchHTTP.
	if n := goroutinesIn("(*Session).watchHTTP", "created by github.com/tether-mcp/tether/controller/connection.(*Connector).Connect"); n != 0 {
		t.Errorf("%d watchHTTP goroutines: the session's end comes from its transport's Close", n)
	}
	if s.httpClient == nil || s.httpURL != hs.URL {
		t.Errorf("the raw path's client %v and endpoint %q, want the session's", s.httpClient, s.httpURL)
	}
	id := s.cs.ID()
	if id == "" || strings.Contains(s.Redact("session "+id), id) {
		t.Errorf("the session id %q is not redacted", id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, nil); err != nil || textOf(res) != "ok" {
		t.Fatalf("echo = %v, %v", res, err)
	}
	if _, _, err := s.CallToolRaw(ctx, "echo", nil, nil); err != nil {
		t.Fatalf("raw echo: %v", err)
	}
	// The end hook: the server forgets the session, its standalone stream
	// meets the 404, the connection closes and the session ends.
	forget.Store(true)
	hs.CloseClientConnections()
	waitDone(t, s, 10*time.Second)
	if err := s.Err(); !errors.Is(err, mcp.ErrSessionMissing) {
		t.Errorf("the session ended with %v, want mcp.ErrSessionMissing", err)
	}
}

// The discover POST on tether's transport carries what the go-sdk's
// transport puts on it: a server that routes or checks by header sees the
// same request from either.
func TestDiscoverHeadersAsTheSDK(t *testing.T) {
	keys := []string{"Content-Type", "Accept", hdrProtocolVersion, hdrMethod, "Mcp-Name", hdrSessionID}
	var mu sync.Mutex
	var seen []http.Header
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, _ := rpcOf(r); m == methodDiscover {
			mu.Lock()
			seen = append(seen, r.Header.Clone())
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	connectWith(t, newConnector(t), Request{Spec: httpSpec(hs.URL, "")})
	connectSDKOnce(t, hs.URL)
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d discover requests, want 2 (tether's, the go-sdk's)", len(seen))
	}
	for _, k := range keys {
		if got, want := seen[0].Values(k), seen[1].Values(k); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("discover's %s: %q on tether's transport, %q on the go-sdk's", k, got, want)
		}
	}
	if seen[0].Get(hdrProtocolVersion) != protocol2026 || seen[0].Get(hdrMethod) != methodDiscover {
		t.Errorf("discover's headers %v", seen[0])
	}
}

// A classic server refuses server/discover in the odd ways real servers
// do; each time the go-sdk falls back to initialize, the connection stays
// up (a refusal breaking it failed the connect) and the session runs on
// tether's transport.
func TestFirstConnectDiscoverRefusals(t *testing.T) {
	for _, tc := range []struct {
		name, ctype, body string // %s: the request's id
		status            int
	}{
		{"400 plain text", "text/plain", "Bad Request: unknown method", http.StatusBadRequest},
		{"404", "text/plain", "404 page not found", http.StatusNotFound},
		{"405", "text/plain", "Method Not Allowed", http.StatusMethodNotAllowed},
		{"400 JSON-RPC error, id null", "application/json", `{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`, http.StatusBadRequest},
		{"400 JSON-RPC error", "application/json", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, http.StatusBadRequest},
		{"200 method not found", "application/json", `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"Method not found"}}`, http.StatusOK},
		{"200 method not found, event stream", "text/event-stream", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n\n", http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var discovers atomic.Int32
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if m, id := rpcOf(r); m == methodDiscover {
					discovers.Add(1)
					w.Header().Set("Content-Type", tc.ctype)
					w.WriteHeader(tc.status)
					body := tc.body
					if strings.Contains(body, "%s") {
						body = fmt.Sprintf(body, id)
					}
					_, _ = io.WriteString(w, body)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			s := connectWith(t, newConnector(t), Request{Spec: httpSpec(hs.URL, "")})
			if discovers.Load() == 0 {
				t.Fatal("no server/discover was sent")
			}
			if !s.ownConn {
				t.Error("the session runs on the go-sdk's transport")
			}
			if v := s.Server().ProtocolVersion; v != classic {
				t.Errorf("negotiated %s, want %s", v, classic)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, nil); err != nil || textOf(res) != "ok" {
				t.Fatalf("echo = %v, %v", res, err)
			}
		})
	}
}

// A first connect to a 2026-07-28 server (a stateless go-sdk server, which
// offers it in its discover answer) ends up on a working 2026-07-28
// session on the go-sdk's transport, after one more discover; the memory
// remembers it, so the next connect goes straight there; the handshake
// slot is held once through the retry and given back.
func TestFirstConnectTo2026Server(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	c := newConnector(t)
	var (
		mu        sync.Mutex
		discovers int
		initials  int
		holding   = -1 // the slots in flight when the retry's discover came
	)
	var key string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch m, _ := rpcOf(r); m {
		case methodDiscover:
			mu.Lock()
			discovers++
			if discovers == 2 {
				holding, _ = c.handshakes.inFlight(key)
			}
			mu.Unlock()
		case "initialize":
			mu.Lock()
			initials++
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	key = "streamable " + hs.URL
	s := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")})
	if s.ownConn {
		t.Fatal("a 2026-07-28 session runs on tether's transport")
	}
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Probe(ctx); err != nil {
		t.Fatalf("probe of the 2026-07-28 session: %v", err)
	}
	mu.Lock()
	if discovers != 2 || initials != 0 || holding != 1 {
		t.Errorf("first connect: %d discovers, %d initializes, %d slots held at the retry; want 2, 0, 1", discovers, initials, holding)
	}
	mu.Unlock()
	if hold, wait := c.handshakes.inFlight(key); hold != 0 || wait != 0 {
		t.Errorf("after the connect: %d in flight, %d waiting", hold, wait)
	}
	c.versions.mu.Lock()
	e := c.versions.m[key]
	c.versions.mu.Unlock()
	if e == nil || e.learning != nil || e.version < protocol2026 {
		t.Fatalf("the memory holds %+v, want a learnt 2026-07-28 version", e)
	}
	next := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")})
	if next.ownConn || next.Server().ProtocolVersion < protocol2026 {
		t.Errorf("the next connect: own transport %v, version %s", next.ownConn, next.Server().ProtocolVersion)
	}
	mu.Lock()
	defer mu.Unlock()
	if discovers != 3 {
		t.Errorf("%d discovers for two connects, want 3: the next one went to tether's transport first", discovers)
	}
}

// A connect that waits while another learns a 2026-07-28 endpoint is let
// go once the learner's discover was accepted, with that version: it goes
// straight to the go-sdk's transport (one discover), not to tether's (two).
// The learner's second discover is held here until the waiter's came (10 s
// at most: a waiter let go only when the learner's retry is done never
// comes before it).
func TestFirstConnectRetryLetsWaitersGo(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var discovers atomic.Int32
	var heldTooLong atomic.Bool
	firstCame, thirdCame := make(chan struct{}), make(chan struct{})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, _ := rpcOf(r); m == methodDiscover {
			switch n := discovers.Add(1); {
			case n == 1:
				close(firstCame)
			case n == 3:
				close(thirdCame)
			}
			if n := discovers.Load(); n >= 2 {
				select {
				case <-thirdCame:
				case <-time.After(10 * time.Second):
					heldTooLong.Store(true)
				case <-r.Context().Done():
				}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	c := newConnector(t)
	// The waiter must wait for the learner however long its first discover
	// takes on a loaded machine: negotiating on its own after
	// versionLearnWait would ask a fourth discover.
	c.versions.learnWait = time.Minute
	learner := make(chan *Session, 1)
	go func() {
		s, err := c.Connect(context.Background(), Request{Name: "learner", Spec: httpSpec(hs.URL, ""), Logger: testLogger(t)})
		if err != nil {
			t.Errorf("learner: %v", err)
		}
		learner <- s
	}()
	<-firstCame
	waiter := connectWith(t, c, Request{Name: "waiter", Spec: httpSpec(hs.URL, "")})
	s := <-learner
	if s != nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	if waiter.ownConn || waiter.Server().ProtocolVersion < protocol2026 {
		t.Errorf("the waiter: own transport %v, version %s", waiter.ownConn, waiter.Server().ProtocolVersion)
	}
	if heldTooLong.Load() {
		t.Error("the learner's second discover waited 10 s for the waiter's: the waiter was not let go when the learner learnt the version")
	}
	if n := discovers.Load(); n != 3 {
		t.Errorf("%d discovers for two connects, want 3 (two of the learner's, one of the waiter's)", n)
	}
}

// A call the server refuses with a JSON-RPC error in a 4xx answer fails
// with the server's error, as on the go-sdk's transport (which wraps it
// before its rejection): its code reaches whoever reads it with errors.As,
// not the transport's -32005.
func TestStreamableRefusalKeepsServersCode(t *testing.T) {
	var refuse atomic.Bool
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, id := rpcOf(r); id != nil && refuse.CompareAndSwap(true, false) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32602,"message":"bad arguments"}}`, id)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	cs, _, _ := ownSession(t, hs.URL, nil, nil)
	refuse.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}})
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) || werr.Code != -32602 || !errors.Is(err, errRejected) {
		t.Fatalf("call error %v (as %+v), want the server's -32602, rejected", err, werr)
	}
	callEcho(t, cs)
}

// A server remembered as 2026-07-28 that now speaks a classic protocol (a
// downgrade on the same URL, within versionMemoTTL): the connect the memory
// sent to the go-sdk's transport falls back to initialize there, and the
// memory, proven wrong, is dropped; the next connect learns the classic
// version on tether's transport instead of starting every classic session
// on the go-sdk's with a refused discover until the memory expires.
func TestDowngradedServerForgotten(t *testing.T) {
	modern := modernServerHandler()
	classicH := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	var downgraded atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if downgraded.Load() {
			classicH.ServeHTTP(w, r)
			return
		}
		modern.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	c := newConnector(t)
	if s := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")}); s.Server().ProtocolVersion < protocol2026 {
		t.Fatalf("negotiated %s with the 2026-07-28 server", s.Server().ProtocolVersion)
	}
	downgraded.Store(true)
	if s := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")}); s.Server().ProtocolVersion != classic {
		t.Fatalf("negotiated %s with the downgraded server, want %s", s.Server().ProtocolVersion, classic)
	}
	s := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")})
	if !s.ownConn || s.Server().ProtocolVersion != classic {
		t.Errorf("the next connect: own transport %v, version %s; want tether's, %s", s.ownConn, s.Server().ProtocolVersion, classic)
	}
}

// A server that refuses the first discover with the go-sdk's unsupported
// version error, naming 2026-07-28 among the versions it has, is asked
// discover again at that version (the go-sdk reads the error's code and
// data with errors.As, so the server's error must come before tether's
// rejection in the chain, in a 4xx answer as in a 200), then connected on
// the go-sdk's transport.
func TestFirstConnectDiscoverUnsupportedVersion(t *testing.T) {
	for _, status := range []int{http.StatusOK, http.StatusBadRequest} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			h := modernServerHandler()
			var discovers atomic.Int32
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if m, id := rpcOf(r); m == methodDiscover && discovers.Add(1) == 1 {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(status)
					fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"unsupported protocol version","data":{"supported":[%q],"requested":"x"}}}`,
						id, mcp.CodeUnsupportedProtocolVersion, protocol2026)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			s := connectWith(t, newConnector(t), Request{Spec: httpSpec(hs.URL, "")})
			if s.ownConn || s.Server().ProtocolVersion != protocol2026 {
				t.Errorf("own transport %v, version %s; want the go-sdk's, %s", s.ownConn, s.Server().ProtocolVersion, protocol2026)
			}
			// Refused, asked again (accepted: errModernServer), and asked
			// on the go-sdk's transport.
			if n := discovers.Load(); n != 3 {
				t.Errorf("%d discovers, want 3", n)
			}
		})
	}
}

// modernServerHandler serves a stateless go-sdk server, which speaks
// 2026-07-28.
func modernServerHandler() http.Handler {
	srv := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
}

// connectModern serves srv as a stateless go-sdk server, which speaks
// 2026-07-28, and connects to it with req (whose Spec it sets): a first
// connect, which ends on the go-sdk's transport. The session must be a
// 2026-07-28 one.
func connectModern(t *testing.T, srv *mcp.Server, req Request) *Session {
	t.Helper()
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	req.Spec = httpSpec(hs.URL, "")
	s := connect(t, req)
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	return s
}

// A 2026-07-28 server that gives a session id with its discover answer
// meets the first connection's DELETE for it when tether's transport
// hands the connect to the go-sdk's; a 404 to that DELETE says nothing
// about the session that follows: its calls refused on a closed
// connection are not taken for a lost session (notSent).
func TestFirstConnectRetryForgetsFirstSession(t *testing.T) {
	h := modernServerHandler()
	var deletes atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
			http.NotFound(w, r)
			return
		}
		if m, _ := rpcOf(r); m == methodDiscover {
			w.Header().Set(hdrSessionID, "discover-session")
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s := connectWith(t, newConnector(t), Request{Spec: httpSpec(hs.URL, "")})
	if s.ownConn || s.Server().ProtocolVersion != protocol2026 {
		t.Fatalf("own transport %v, version %s; want the go-sdk's, %s", s.ownConn, s.Server().ProtocolVersion, protocol2026)
	}
	// The first connection's DELETE goes after the handshake: wait for
	// its answer.
	s.deletes.Wait()
	if deletes.Load() == 0 {
		t.Fatal("the first connection sent no DELETE: the test proves nothing")
	}
	var lost *sessionLostError
	if err := s.notSent(fmt.Errorf("calling: %w", mcp.ErrConnectionClosed)); errors.As(err, &lost) {
		t.Errorf("a call refused on a closed connection reads %v: the first connection's DELETE counted as the session's loss", err)
	}
}

// A server that refused server/discover and answers it late, offering
// 2026-07-28 on its standalone stream once the session is up (a buggy or
// hostile one), does not break the session: the go-sdk fell back to
// initialize, and the stray answer is no 2026-07-28 server. It failed the
// connection with errModernServer, which the end hook leaves to Connect:
// the session stayed up on a dead transport until a call or a probe met
// it. Here the server's ping, sent after the late answer on the same
// stream, is still answered.
func TestFirstConnectLateDiscoverAnswer(t *testing.T) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	var discoverID atomic.Value
	pinged := make(chan struct{})
	var once sync.Once
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch m, id := rpcOf(r); {
		case r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "text/event-stream")
			w.WriteHeader(http.StatusOK)
			fmt.Fprintf(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"supportedVersions\":[%q]}}\n\n", discoverID.Load(), protocol2026)
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"server-ping\",\"method\":\"ping\"}\n\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case m == methodDiscover:
			discoverID.Store(string(id))
			http.Error(w, "unknown method", http.StatusBadRequest)
		case m == "" && string(id) == `"server-ping"`:
			once.Do(func() { close(pinged) })
			w.WriteHeader(http.StatusAccepted)
		default:
			h.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(hs.Close)
	s := connectWith(t, newConnector(t), Request{Spec: httpSpec(hs.URL, "")})
	select {
	case <-pinged:
	case <-s.Done():
		t.Fatalf("the session ended: %v", s.Err())
	case <-time.After(10 * time.Second):
		t.Fatal("the server's ping after the late discover answer was not answered: the connection broke")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{}}, nil); err != nil || textOf(res) != "ok" {
		t.Fatalf("echo = %v, %v", res, err)
	}
}

// A discover answered on an event stream that breaks before the answer is
// resumed as the go-sdk's transport resumes it: a GET with Last-Event-ID
// and the version discover was asked at (tether's transport sent the
// session's, none before initialize, so a server that checks the header
// on a GET would refuse tether's resumption and not the go-sdk's).
func TestDiscoverStreamResumedAsTheSDK(t *testing.T) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	var mu sync.Mutex
	var resumed []http.Header
	var discoverID json.RawMessage
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && r.Header.Get(hdrLastEventID) == "d1" {
			mu.Lock()
			resumed = append(resumed, r.Header.Clone())
			id := discoverID
			mu.Unlock()
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "id: d2\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":%s,\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n\n", id)
			return
		}
		if m, id := rpcOf(r); m == methodDiscover {
			mu.Lock()
			discoverID = id
			mu.Unlock()
			// A priming event, numbered, then the stream breaks.
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "id: d1\nretry: 1\ndata:\n\n")
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s := connectWith(t, newConnector(t), Request{Spec: httpSpec(hs.URL, "")})
	if !s.ownConn || s.Server().ProtocolVersion != classic {
		t.Errorf("own transport %v, version %s; want tether's, %s", s.ownConn, s.Server().ProtocolVersion, classic)
	}
	connectSDKOnce(t, hs.URL)
	mu.Lock()
	defer mu.Unlock()
	if len(resumed) != 2 {
		t.Fatalf("%d resumptions of discover's stream, want 2 (tether's, the go-sdk's)", len(resumed))
	}
	for _, k := range []string{"Accept", hdrProtocolVersion, hdrLastEventID, hdrSessionID} {
		if got, want := resumed[0].Values(k), resumed[1].Values(k); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("the resumed discover stream's %s: %q on tether's transport, %q on the go-sdk's", k, got, want)
		}
	}
}

// connectSDKOnce connects the go-sdk's own client, on its own transport,
// to url and closes the session: what it sends is the reference for what
// tether's transport sends.
func connectSDKOnce(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tether-test", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = cs.Close()
}

// The first connection to a stateful 2026-07-28 server, on tether's
// transport, ends with a DELETE of the session its discover answer gave.
// A server that stalls that DELETE holds no handshake slot with it: with
// one slot per endpoint, the connect and a second one to the endpoint
// both finish while the DELETE is still unanswered. The DELETE stays
// bounded and owned: the session's Close waits for it to end.
func TestFirstConnectDeleteHoldsNoSlot(t *testing.T) {
	h := modernServerHandler()
	deleting := make(chan struct{}, 1)
	firstReturned := make(chan struct{})
	var stalled atomic.Int32
	var cut atomic.Bool // tether gave up on the DELETE before its connect returned
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			if stalled.Add(1) == 1 { // the first connection's
				deleting <- struct{}{}
				<-r.Context().Done() // until tether gives up on it
				select {
				case <-firstReturned:
				default:
					cut.Store(true)
				}
			}
			return
		}
		if m, _ := rpcOf(r); m == methodDiscover {
			w.Header().Set(hdrSessionID, "discover-session")
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	conn := NewConnector(ConnectorOptions{HandshakesPerEndpoint: 1})
	t.Cleanup(conn.Close)

	first := make(chan *Session, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		s, err := conn.Connect(ctx, Request{Name: "first", Spec: httpSpec(hs.URL, ""), Logger: testLogger(t)})
		if err != nil {
			t.Errorf("first connect: %v", err)
		}
		first <- s
	}()
	select {
	case <-deleting:
	case <-time.After(20 * time.Second):
		t.Fatal("the first connection sent no DELETE: the test proves nothing")
	}
	// The DELETE is stalled now. The connect that sent it, and another one
	// through the endpoint's only slot, finish regardless.
	s1 := <-first
	close(firstReturned)
	if cut.Load() {
		t.Fatal("the connect waited for its first connection's stalled DELETE, until closeDeleteTimeout ended it")
	}
	if s1 == nil {
		t.FailNow()
	}
	second := connectWith(t, conn, Request{Name: "second", Spec: httpSpec(hs.URL, "")})
	if goroutinesIn("sendDelete") == 0 {
		t.Fatal("the DELETE ended before the second connect finished: the test proves nothing")
	}
	if second.ownConn || second.Server().ProtocolVersion != protocol2026 {
		t.Errorf("second: own transport %v, version %s; want the go-sdk's, %s", second.ownConn, second.Server().ProtocolVersion, protocol2026)
	}
	// Close waits for the DELETE it still owns, which the server stalls
	// until closeDeleteTimeout ends it: nothing is left running after it.
	_ = s1.Close()
	if n := goroutinesIn("sendDelete"); n != 0 {
		t.Errorf("the session closed with %d DELETEs of its handshake still in flight", n)
	}
}

// A connect that fails after its first connection's DELETE was left to run
// after the handshake (TestFirstConnectDeleteHoldsNoSlot) leaves no session
// to wait for it: the failed connect waits for it (bounded by
// closeDeleteTimeout), and nothing is left running.
func TestFailedConnectWaitsForItsDelete(t *testing.T) {
	h := modernServerHandler()
	var discovers, deletes atomic.Int32
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodDelete {
			deletes.Add(1)
			<-r.Context().Done() // until tether gives up on it
			return
		}
		if m, _ := rpcOf(r); m == methodDiscover && discovers.Add(1) == 1 {
			w.Header().Set(hdrSessionID, "discover-session")
			h.ServeHTTP(w, r)
			return
		}
		// The connect again on the go-sdk's transport fails.
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := Connect(ctx, Request{Name: "failing", Spec: httpSpec(hs.URL, ""), Logger: testLogger(t)}); err == nil {
		t.Fatal("the connect succeeded")
	}
	if discovers.Load() < 2 {
		t.Fatalf("%d discovers: the connect did not go again on the go-sdk's transport, the test proves nothing", discovers.Load())
	}
	if deletes.Load() == 0 {
		t.Fatal("the first connection sent no DELETE: the test proves nothing")
	}
	if n := goroutinesIn("sendDelete"); n != 0 {
		t.Errorf("the failed connect left %d DELETEs running", n)
	}
}
