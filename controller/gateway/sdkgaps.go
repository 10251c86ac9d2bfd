package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/httpguard"
)

// This file holds what the gateway does because the go-sdk (v1.8.0) offers
// no hook for it, each in terms of the go-sdk's behaviour rather than its
// API; sdkgaps_test.go fails when an upgrade changes that behaviour:
//
//   - the cancellation notice of a relay given up (below): the go-sdk
//     writes it from a goroutine of its own, after the relay returned
//     (MCPGODEBUG=blockingcancelnotify=1 would make it synchronous, but the
//     go-sdk reads MCPGODEBUG when the process starts, before tether runs);
//   - a client that disconnects (cancelOnDisconnect): the go-sdk cancels a
//     stateful session's handlers only on notifications/cancelled;
//   - the fast path's view of the go-sdk handler: the header checks it
//     makes of a POST (fastHeaders); its bound on how deep a body's JSON
//     nests (wire.WithinSDKDepth); for a 2026-07-28 call, the HTTP status
//     of an error (eraErrorStatus).

// A request the gateway relays to a client for one of its calls (sampling,
// elicitation, roots during tools/call, prompts/get, resources/read) goes
// on that call's own response stream, and so does
// the notifications/cancelled the go-sdk sends when the relay is given up
// (the call timed out or ended). The go-sdk sends that notice from a
// goroutine of its own, and drops it once the call's answer has been
// written: the stream is closed by then. The client's request would stay
// open forever. So a relay given up waits, at most noticeWait, until the
// call's stream has carried the notice; the call's answer comes after (the
// connection's end of a request waits for its relays).

// noticesHeader names, on a session POST as the go-sdk hands it to the
// request's handler, the cancelNotices of that POST's response stream. Set
// by the gateway only; a client's own is removed.
const noticesHeader = "Tether-Internal-Stream"

// noticeWait bounds the wait for a notice: below the connection's bound on
// the end of a request, so that the relay returns first.
const noticeWait = 500 * time.Millisecond

var cancelledMethod = []byte(`"notifications/cancelled"`)

// cancelNotices counts the notifications/cancelled written on one POST's
// response stream.
type cancelNotices struct {
	mu   sync.Mutex
	n    int
	owed int           // notices the relays given up on this stream wait for
	more chan struct{} // closed at the next count
}

// owe records one more relay given up on the stream and returns the count
// of notices below which it is not yet written (its own among them).
func (c *cancelNotices) owe() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owed++
	return c.owed - 1
}

func newCancelNotices() *cancelNotices { return &cancelNotices{more: make(chan struct{})} }

func (c *cancelNotices) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	close(c.more)
	c.more = make(chan struct{})
}

// await waits until more than n notices were written, at most d.
func (c *cancelNotices) await(n int, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		c.mu.Lock()
		got, more := c.n, c.more
		c.mu.Unlock()
		if got > n {
			return true
		}
		select {
		case <-more:
		case <-t.C:
			return false
		}
	}
}

// noticeWriter counts the notices the go-sdk writes on a POST's response.
// The go-sdk writes each SSE event whole, in one Write (writeEvent).
type noticeWriter struct {
	http.ResponseWriter
	notices *cancelNotices
}

func (w noticeWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if err == nil && isCancelNotice(p) {
		w.notices.add()
	}
	return n, err
}

// isCancelNotice reports whether p, one SSE event as the go-sdk writes it,
// is a notifications/cancelled. The method is read from the message, not
// found in its bytes: a log message or a result may carry that text.
func isCancelNotice(p []byte) bool {
	if !bytes.Contains(p, cancelledMethod) {
		return false // the common case: one scan
	}
	var data []byte
	for line := range bytes.Lines(p) {
		if d, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			data = bytes.TrimRight(d, "\r\n")
			break
		}
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	return json.Unmarshal(data, &msg) == nil && msg.ID == nil && msg.Method == "notifications/cancelled"
}

func (w noticeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w noticeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamNotices is the gateway's table of the session POSTs in flight.
type streamNotices struct {
	mu  sync.Mutex
	seq uint64
	m   map[string]*cancelNotices
}

// watch wraps w to count the notices of r's response and names them on r
// for the tool handler; done forgets them.
func (s *streamNotices) watch(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	cn := newCancelNotices()
	s.mu.Lock()
	s.seq++
	key := strconv.FormatUint(s.seq, 10)
	if s.m == nil {
		s.m = make(map[string]*cancelNotices)
	}
	s.m[key] = cn
	s.mu.Unlock()
	r.Header.Set(noticesHeader, key)
	return noticeWriter{ResponseWriter: w, notices: cn}, func() {
		s.mu.Lock()
		delete(s.m, key)
		s.mu.Unlock()
	}
}

// of returns the notices of the POST that carried a request.
func (s *streamNotices) of(extra *mcp.RequestExtra) *cancelNotices {
	if extra == nil || extra.Header == nil {
		return nil
	}
	key := extra.Header.Get(noticesHeader)
	if key == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}

// Headers of the streamable HTTP transport that a synthetic request repeats.
const (
	sessionIDHeader       = "Mcp-Session-Id"
	protocolVersionHeader = "Mcp-Protocol-Version"
)

// cancelOnDisconnect cancels the tools/call requests of a POST whose client
// went away before their answers were written.
//
// The gateway's HTTP sessions are stateful and keep no event store: an
// answer whose POST stream is gone can never be delivered (there is nothing
// to resume from). The go-sdk still runs the handler on, for older protocol
// versions, until the call ends or its callTimeout expires, holding a backend
// call nobody waits for. So when a POST that carried tools/call ends because
// its request context did (the client disconnected), the gateway sends the
// session the notifications/cancelled the client did not get to send: the
// handler's context ends and the cancellation reaches the backend as if the
// client had cancelled. For a call that had already been answered the
// notification names no request in flight and is ignored.
func (g *Gateway) cancelOnDisconnect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(noticesHeader) // the gateway's own (sdkgaps.go)
		session := r.Header.Get(sessionIDHeader)
		if r.Method != http.MethodPost || session == "" || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		// Read what the SDK would accept, and no more: a larger body is
		// passed on whole for the SDK to refuse.
		body, err := io.ReadAll(io.LimitReader(r.Body, g.opts.MaxRequestBodyBytes+1))
		if err != nil || int64(len(body)) > g.opts.MaxRequestBodyBytes {
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			next.ServeHTTP(w, r)
			return
		}
		r.Body = readCloser{bytes.NewReader(body), r.Body}
		ids := toolCallIDs(body)
		// Every request's stream, not only tools/call's: prompts/get and
		// resources/read relay the backend's requests too.
		w, forget := g.notices.watch(w, r)
		defer forget()
		next.ServeHTTP(w, r)
		if len(ids) == 0 || r.Context().Err() == nil {
			return
		}
		for _, id := range ids {
			g.sendCancelled(r, id)
		}
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// toolCallIDs returns the JSON-RPC ids of the tools/call requests (and of
// the lists that may wait for first outcomes, firstanswer.go) in a POST
// body (one message or a batch), verbatim.
func toolCallIDs(body []byte) []json.RawMessage {
	// The common case costs a scan or two; "tools\/call" and \u escapes
	// spell the method too.
	if !bytes.Contains(body, []byte("call")) && !bytes.Contains(body, []byte("list")) && !bytes.Contains(body, []byte(`\u`)) {
		return nil
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var batch []message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &batch) != nil {
			return nil
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return nil
		}
		batch = []message{m}
	}
	var ids []json.RawMessage
	for _, m := range batch {
		// A list waiting for the first outcomes (firstanswer.go) is freed
		// the same way.
		if (m.Method == methodCallTool || firstAnswerMethods[m.Method]) && len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")) {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// sendCancelled delivers notifications/cancelled for request id to the
// session of r, through the SDK's own handler.
func (g *Gateway) sendCancelled(r *http.Request, id json.RawMessage) {
	msg, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": "the client disconnected"},
	})
	if err != nil {
		return
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, r.URL.String(), bytes.NewReader(msg))
	if err != nil {
		return
	}
	req.Host = r.Host
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionIDHeader, r.Header.Get(sessionIDHeader))
	if v := r.Header.Get(protocolVersionHeader); v != "" {
		req.Header.Set(protocolVersionHeader, v)
	}
	g.handler.ServeHTTP(discardResponse{header: http.Header{}}, req)
	g.log.Debug("gateway cancelled a call whose client disconnected", "session", r.Header.Get(sessionIDHeader), "id", string(id))
}

// discardResponse is a ResponseWriter that keeps nothing.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header         { return d.header }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}

// Standard headers of a 2026-07-28 request (SEP-2243), which the go-sdk
// requires to match the body.
const (
	methodHeader = "Mcp-Method"
	nameHeader   = "Mcp-Name"
)

// fastHeaders checks what the go-sdk checks of a POST before it reads the
// body (a foreign Host on a loopback listener, the media types) and what
// the fast path needs (no resumption; a classic protocol version, or for
// a 2026-07-28 request (era) exactly that version, which the gateway's
// server supports, and Mcp-Method naming tools/call; parseCall and
// tryFast check the rest): a request that fails is left to the go-sdk,
// which answers it.
func fastHeaders(r *http.Request, era bool) bool {
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok && local != nil {
		if httpguard.IsLoopbackHost(local.String()) && !httpguard.IsLoopbackHost(r.Host) {
			return false
		}
	}
	v := r.Header.Get(protocolVersionHeader)
	if len(r.Header.Values("Last-Event-ID")) > 0 {
		return false
	}
	if era {
		if v != modernProtocol || r.Header.Get(methodHeader) != methodCallTool {
			return false
		}
	} else if v == "" || v >= modernProtocol || r.Header.Get(methodHeader) != "" || r.Header.Get(nameHeader) != "" {
		return false
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return false
	}
	return acceptsBoth(r.Header.Values("Accept"))
}

// acceptsBoth reports whether Accept admits application/json and
// text/event-stream, as the go-sdk requires of a POST.
func acceptsBoth(values []string) bool {
	var jsonOK, streamOK bool
	for _, value := range values {
		for token := range strings.SplitSeq(value, ",") {
			base, _, _ := strings.Cut(token, ";")
			switch strings.ToLower(strings.TrimSpace(base)) {
			case "application/json", "application/*":
				jsonOK = true
			case "text/event-stream", "text/*":
				streamOK = true
			case "*/*":
				jsonOK, streamOK = true, true
			}
		}
	}
	return jsonOK && streamOK
}

// eraErrorStatus is the HTTP status the go-sdk answers a 2026-07-28
// request's JSON-RPC error with (SEP-2575: method not found 404; invalid
// params, an unsupported protocol version, missing client capabilities
// 400), 0 for the others, which go out as any answer does.
func eraErrorStatus(code int64) int {
	switch code {
	case jsonrpc.CodeMethodNotFound:
		return http.StatusNotFound
	case jsonrpc.CodeInvalidParams, mcp.CodeUnsupportedProtocolVersion, mcp.CodeMissingRequiredClientCapabilities:
		return http.StatusBadRequest
	}
	return 0
}
