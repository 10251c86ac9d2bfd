package gateway

import (
	"bytes"
	"context"
	"encoding/json"
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
//   - a client that disconnects (endWithPOST): the go-sdk cancels a
//     stateful session's handlers only on notifications/cancelled; the
//     gateway ends them with their POST, which it finds through the
//     go-sdk's API (RequestExtra.Header, a receiving middleware);
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
// call's stream has carried the notice, or its POST ended (its client went
// away: nothing more reaches it); the call's answer comes after (the
// connection's end of a request waits for its relays).

// noticesHeader names, on a session POST as the go-sdk hands it to the
// request's handler (RequestExtra.Header), the gateway's state of that POST
// (cancelNotices). Set by the gateway only; a client's own is removed.
const noticesHeader = "Tether-Internal-Stream"

// noticeWait bounds the wait for a notice: below the connection's bound on
// the end of a request, so that the relay returns first.
const noticeWait = 500 * time.Millisecond

var cancelledMethod = []byte(`"notifications/cancelled"`)

// cancelNotices is the gateway's state of one session POST: it counts the
// notifications/cancelled written on the POST's response stream, and holds
// the POST's context.
type cancelNotices struct {
	// post is the POST's request context (endWithPOST).
	post context.Context
	mu   sync.Mutex
	// over: the POST's ServeHTTP returned; clientGone: its context had
	// ended by then (the client went away), rather than the go-sdk ending
	// the POST (its session closed).
	over, clientGone bool
	n                int
	owed             int           // notices the relays given up on this stream wait for
	more             chan struct{} // closed at the next count
}

// owe records one more relay given up on the stream and returns the count
// of notices below which it is not yet written (its own among them).
func (c *cancelNotices) owe() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owed++
	return c.owed - 1
}

func newCancelNotices(post context.Context) *cancelNotices {
	return &cancelNotices{post: post, more: make(chan struct{})}
}

func (c *cancelNotices) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	close(c.more)
	c.more = make(chan struct{})
}

// await waits until more than n notices were written, at most d, and not
// past the POST's end: a stream whose POST ended carries nothing more.
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
		case <-c.post.Done():
			return false
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
	cn := newCancelNotices(r.Context())
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
		cn.mu.Lock()
		cn.over, cn.clientGone = true, cn.post.Err() != nil
		cn.mu.Unlock()
		s.mu.Lock()
		delete(s.m, key)
		s.mu.Unlock()
	}
}

// whyEnded says why the POST's context ended: its client went away
// (before the POST's ServeHTTP returned: net/http ends the context then),
// or the go-sdk ended the POST first, which it does when the session
// closes (a DELETE, the idle timeout, an eviction, shutdown).
func (c *cancelNotices) whyEnded() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.over || c.clientGone {
		return "its client disconnected"
	}
	return "its session was closed"
}

// of returns the notices of the POST that carried a request.
func (s *streamNotices) of(extra *mcp.RequestExtra) *cancelNotices {
	cn, _ := s.lookup(extra)
	return cn
}

// lookup finds the POST a request names; named reports whether it names
// one. Only a POST names itself on a request, and it forgets its name
// when it ends: named and no POST means that POST ended.
func (s *streamNotices) lookup(extra *mcp.RequestExtra) (cn *cancelNotices, named bool) {
	if extra == nil || extra.Header == nil {
		return nil, false
	}
	key := extra.Header.Get(noticesHeader)
	if key == "" {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key], true
}

// Headers of the streamable HTTP transport.
const (
	sessionIDHeader       = "Mcp-Session-Id"
	protocolVersionHeader = "Mcp-Protocol-Version"
)

// watchPOSTs names each session POST on its request (noticesHeader), for
// the handlers of its messages: its relays' notice waits (above) and
// endWithPOST. Any other request (initialize; a 2026-07-28 one, which
// newModernHandler ties to its POST) passes without the header: a client
// names no POST.
func (g *Gateway) watchPOSTs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(noticesHeader) // the gateway's own
		if r.Method != http.MethodPost || r.Header.Get(sessionIDHeader) == "" {
			next.ServeHTTP(w, r)
			return
		}
		w, forget := g.notices.watch(w, r)
		defer forget()
		next.ServeHTTP(w, r)
	})
}

// endWithPOST ends a request of a classic session when its POST ends: the
// client went away, or the POST is over (net/http ends a request's
// context when its ServeHTTP returns). Without an event store an answer
// whose POST is gone can never be delivered, yet the go-sdk ends such a
// handler only on notifications/cancelled (PropagateRequestCancellation
// is for the 2026-07-28 protocol alone): the call ran on to its
// callTimeout. Its context ending, the backend is told as if the client
// had cancelled. A request the go-sdk dispatches after its POST ended
// names a POST the table no longer holds, and ends at once.
// Notifications pass as they came: a POST of notifications alone ends
// before they are handled. /sse (endWithSSEStream; its go-sdk handler
// names no header) and stdio requests carry no name.
func (g *Gateway) endWithPOST(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if strings.HasPrefix(method, "notifications/") {
			return next(ctx, method, req)
		}
		post, named := g.notices.lookup(req.GetExtra())
		if !named {
			return next(ctx, method, req)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		end := func() {
			why := "its POST had ended before it was dispatched"
			if post != nil {
				why = post.whyEnded()
			}
			g.log.Debug("gateway ended a request: "+why, "method", method)
			cancel()
		}
		if post == nil || post.post.Err() != nil {
			end() // now, not from AfterFunc's goroutine: nothing starts
		} else {
			defer context.AfterFunc(post.post, end)()
		}
		return next(ctx, method, req)
	}
}

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
