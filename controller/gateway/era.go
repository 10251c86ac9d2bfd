package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol eras over streamable HTTP (docs/contract.md §5).
//
// The go-sdk's StreamableHTTPHandler serves the 2026-07-28 protocol
// (SEP-2575: no initialize, no session; every request carries its version,
// client info and capabilities in _meta) only when it is stateless, and the
// classic protocol's sessions (list_changed on the standalone stream,
// cancellation, resumption) only when it is stateful: a stateful handler
// answers server/discover with the classic versions alone, so a client of
// the new era was refused over HTTP while --stdio served it. The gateway
// runs both over its one shared server and sends each request to the
// handler of its era: a request that names a protocol version of
// 2026-07-28 or later in MCP-Protocol-Version, and belongs to no classic
// session, goes to the stateless one. Everything in front of the two (auth,
// Host and Origin checks, the session, connection, call and body bounds)
// is the same for both, and so is the byte fast path (fastpath.go), which
// takes a tools/call of either era before it reaches them.

// modernProtocol is the first protocol version of the stateless era. The
// go-sdk compares versions as strings too; they are dates.
const modernProtocol = "2026-07-28"

// newModernHandler is the stateless handler of the 2026-07-28 era, on the
// gateway's shared server. Cancellation of a request whose client went
// away is propagated to its handler, as endWithPOST does for classic
// sessions.
func newModernHandler(srv *mcp.Server, opts *mcp.StreamableHTTPOptions) http.Handler {
	o := *opts
	o.Stateless = true
	o.PropagateRequestCancellation = true
	o.SessionTimeout = 0
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &o)
}

// isModernRequest reports whether r is of the 2026-07-28 era or later.
func isModernRequest(r *http.Request) bool {
	v := r.Header.Get(protocolVersionHeader)
	return v >= modernProtocol && r.Header.Get(sessionIDHeader) == ""
}

// byEra sends a request of the 2026-07-28 era to modern and any other to
// classic.
func byEra(classic, modern http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isModernRequest(r) {
			modern.ServeHTTP(w, r)
			return
		}
		classic.ServeHTTP(w, r)
	})
}

// endListens ends the subscriptions/listen requests when stop is done (the
// listener's shutdown begins), and holds them to their share of the
// connection bound (holdListen). Such a request is the 2026-07-28
// client's channel for list_changed and resource updates, open for the
// client's life, as a classic session's standalone stream is: left to run,
// it was counted among the POSTs in flight that shutdown lets finish, and
// held tether's exit for the whole --shutdown-timeout. The go-sdk serves
// one on a classic session's POST too, open as long: it is in front of
// both eras (byEra), so that no listen escapes either. Other requests run
// on: a call in flight gets its answer.
func (g *Gateway) endListens(stop context.Context, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		// Read what the SDK would accept, and no more: a larger body is
		// passed on whole for the SDK to refuse.
		body, err := io.ReadAll(io.LimitReader(r.Body, g.opts.MaxRequestBodyBytes+1))
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		ids, batch, listen := listenIDs(body)
		if err != nil || int64(len(body)) > g.opts.MaxRequestBodyBytes || !listen {
			next.ServeHTTP(w, r)
			return
		}
		// A listen is answered for its client's life and never shed at
		// --max-connections: past its share of that bound it is refused at
		// once (connlimit.go, holdListen).
		release, bound, ok := holdListen(r.Context())
		if !ok {
			if warnListensFull(r.Context()) {
				g.log.Warn("gateway refuses subscriptions/listen: open listens hold half its connection bound (--max-connections)", "maxListens", bound)
			}
			writeRPCErrorIDs(w, ids, batch, errListensFull(bound))
			return
		}
		defer release()
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(stop, cancel)()
		// A stream as a session's standalone one is, with its bound on a
		// write (withStreamDeadline): the go-sdk server notifies sessions
		// one after another, and a listen whose client stopped reading
		// held every update after it, and its connection, for good.
		sw := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: g.opts.StreamWriteTimeout, cut: cancel}
		next.ServeHTTP(sw, r.WithContext(ctx))
		if sw.failed.Load() {
			g.log.Warn("gateway closed a subscriptions/listen: its client did not read it", "writeTimeout", sw.d)
		}
	})
}

// listenIDs reports whether body is a subscriptions/listen request, or a
// batch that holds one (the go-sdk serves batches on a classic session of
// a protocol before 2025-06-18), and the ids of the requests it carries,
// each of which an answer that refuses it names.
func listenIDs(body []byte) (ids []json.RawMessage, batch, listen bool) {
	if !bytes.Contains(body, []byte("listen")) && !bytes.Contains(body, []byte(`\u`)) {
		return nil, false, false
	}
	msgs := []json.RawMessage{body}
	var all []json.RawMessage // left alone by a failed decode
	if decodeAsSDK(body, &all) == nil {
		msgs, batch = all, true
	}
	for _, raw := range msgs {
		// Keys matched exactly, as the go-sdk's decoder matches them: a
		// struct would take "Method" for "method", and a listen whose
		// body also names another method that way went uncounted
		// (holdListen).
		var m map[string]json.RawMessage
		var method string
		if decodeAsSDK(raw, &m) != nil || json.Unmarshal(m["method"], &method) != nil {
			continue
		}
		listen = listen || method == "subscriptions/listen"
		if id, ok := m["id"]; ok {
			ids = append(ids, id)
		}
	}
	return ids, batch, listen
}

// decodeAsSDK decodes the first JSON value of data into v as the go-sdk
// reads a message (a decoder: bytes past the value are left unread, where
// json.Unmarshal refuses them, and a listen followed by a byte went
// uncounted).
func decodeAsSDK(data []byte, v any) error {
	return json.NewDecoder(bytes.NewReader(data)).Decode(v)
}
