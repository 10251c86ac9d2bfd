package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/controller/tracing"
)

// The fast path forwards a tools/call as bytes. Through the go-sdk, a call
// crosses a full server hop (decode the request, encode the answer) and a
// full client hop (encode, POST, parse the stream, decode the result), and
// that costs tether about as much CPU as the backend and the agent spend
// together on a direct call. The fast path parses only the envelope of the
// caller's request, sends the call on the backend session's own HTTP
// endpoint and relays the answer, restoring the caller's id and progress
// token.
//
// It is taken only where nothing the go-sdk would do is lost: a POST of one
// tools/call to a tool whose backend is a streamable HTTP session, either
// on a live, initialized HTTP session of the gateway whose protocol
// version (classic, pre-2026-07-28) the backend session negotiated too (so
// nothing needs translating), or of a 2026-07-28 client, which has no
// session: what it would have said at initialize comes in the request's
// _meta, and the go-sdk's stateless handler checks it and the standard
// headers (fastHeaders, parseCall check the same). A call of that era
// runs as its go-sdk path runs it, in rounds (rounds.go), every round
// (the first, and each later one carrying the gateway's requestState)
// taking the path its own request qualifies for: it is the framing of
// the call and of its answer that differs. Anything else, or
// any doubt, goes to the go-sdk handler with the body untouched.

// errCallerCancelled ends a fast call whose caller sent notifications/cancelled.
var errCallerCancelled = errors.New("the caller cancelled the call")

// downSession is a gateway HTTP session the fast path may answer for.
type downSession struct {
	ss *mcp.ServerSession

	mu     sync.Mutex
	calls  map[string]context.CancelCauseFunc // fast calls in flight by request id
	closed bool                               // the session ended: its calls were cancelled
	// relays are the backend requests sent to the client on a fast call's
	// stream, waiting for the client's answer, by the id the gateway gave
	// them; nRelays counts them, so that other POSTs pay nothing.
	relays  map[string]chan *relayAnswer
	nRelays atomic.Int32
}

// relayAnswer is a client's answer to a relayed request.
type relayAnswer struct {
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// errSessionClosed ends the fast calls of a session that closed (DELETE,
// idle timeout, shutdown), as the go-sdk ends the calls of a closed session:
// it cannot end these, which it never saw.
var errSessionClosed = errors.New("the gateway session closed")

// start registers a fast call; false if the id is already in flight.
// closed reports a session that ended meanwhile.
func (ds *downSession) start(key string, cancel context.CancelCauseFunc) (ok, closed bool) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if ds.closed {
		return false, true
	}
	if _, dup := ds.calls[key]; dup {
		return false, false
	}
	if ds.calls == nil {
		ds.calls = make(map[string]context.CancelCauseFunc)
	}
	ds.calls[key] = cancel
	return true, false
}

// end cancels the calls of a session that closed and refuses new ones.
func (ds *downSession) end() {
	ds.mu.Lock()
	ds.closed = true
	calls := ds.calls
	ds.calls = nil
	ds.mu.Unlock()
	for _, cancel := range calls {
		cancel(errSessionClosed)
	}
}

func (ds *downSession) finish(key string) {
	ds.mu.Lock()
	delete(ds.calls, key)
	ds.mu.Unlock()
}

func (ds *downSession) cancel(key string) bool {
	ds.mu.Lock()
	cancel := ds.calls[key]
	ds.mu.Unlock()
	if cancel != nil {
		cancel(errCallerCancelled)
	}
	return cancel != nil
}

// downSessions tracks the gateway's initialized HTTP sessions by id: an id
// that was never issued, or whose session ended, is not among them.
type downSessions struct {
	mu sync.Mutex
	m  map[string]*downSession
	// wg counts the goroutines that wait for a session to end; ServeListener waits
	// for them after it closed the sessions.
	wg sync.WaitGroup
}

func (d *downSessions) get(id string) *downSession {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.m[id]
}

// sessionInitialized is the server's InitializedHandler: it starts tracking
// an HTTP session, until it ends.
func (g *Gateway) sessionInitialized(_ context.Context, req *mcp.InitializedRequest) {
	ss := req.Session
	id := ss.ID()
	if id == "" {
		return // stdio: no HTTP requests
	}
	ds := &downSession{ss: ss}
	g.downs.mu.Lock()
	if g.downs.m == nil {
		g.downs.m = make(map[string]*downSession)
	}
	if _, again := g.downs.m[id]; again {
		g.downs.mu.Unlock()
		return // a repeated notifications/initialized
	}
	g.downs.m[id] = ds
	g.downs.mu.Unlock()
	g.downs.wg.Add(1)
	go func() {
		defer g.downs.wg.Done()
		_ = ss.Wait() // returns when the session is closed, by whoever
		g.downs.mu.Lock()
		delete(g.downs.m, id)
		g.downs.mu.Unlock()
		ds.end()
	}()
}

// withFastPath is the gateway's HTTP handler: the fast path where it
// applies, sdk (the go-sdk's streamable handler, wrapped or not) for
// everything else.
func (g *Gateway) withFastPath(sdk http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.serveHTTP(w, r, sdk) })
}

func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request, sdk http.Handler) {
	if r.Method != http.MethodPost || r.Body == nil {
		sdk.ServeHTTP(w, r)
		return
	}
	// A classic request belongs to a session of the gateway's (ds); a
	// 2026-07-28 one (era) to none.
	sid := r.Header.Get(sessionIDHeader)
	var ds *downSession
	era := false
	if sid != "" {
		ds = g.downs.get(sid)
	} else {
		era = isModernRequest(r)
	}
	if (ds == nil && !era) || !fastHeaders(r, era) {
		sdk.ServeHTTP(w, r)
		return
	}
	// Read what the SDK would accept, and no more: a larger body is passed
	// on whole for the SDK to refuse.
	body, err := readBody(r, g.opts.MaxRequestBodyBytes+1)
	if err != nil || int64(len(body)) > g.opts.MaxRequestBodyBytes {
		r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
		sdk.ServeHTTP(w, r)
		return
	}
	orig := r.Body
	r.Body = readCloser{bytes.NewReader(body), orig}
	if g.tryFast(w, r, ds, body) {
		return
	}
	// Rewind: the SDK reads the body from its start.
	r.Body = readCloser{bytes.NewReader(body), orig}
	sdk.ServeHTTP(w, r)
}

// readCloser is a body read ahead (in part), with the rest of the
// original and its Close.
type readCloser struct {
	io.Reader
	io.Closer
}

// readBody reads at most limit bytes of r's body. With a Content-Length it
// reads into one buffer that grows toward that length as the bytes arrive:
// a buffer of the declared length up front let a client that sends one
// byte make the gateway hold megabytes. It starts at bodyChunk and grows
// eightfold, each time taking budget for its room (withBodyBudget), so
// what the gateway holds for a body stays within the budget: a client
// holds at most eight times what it sent. Doubling would hold less, but
// leaves about the body's size again in garbage and copies (a 3.9 MB body
// took 45% longer to read over loopback; eightfold, as long as one buffer
// of its length, within the noise).
func readBody(r *http.Request, limit int64) ([]byte, error) {
	n := r.ContentLength
	if n <= 0 || n >= limit {
		return io.ReadAll(io.LimitReader(r.Body, limit))
	}
	budget, _ := r.Body.(*budgetBody)
	// n+1: room for the read of the body's end, which lifts the body
	// deadline (withBodyDeadline); net/http holds the body to its length.
	buf := make([]byte, 0, min(n+1, bodyChunk))
	for {
		if len(buf) == cap(buf) {
			size := min(n+1, 8*int64(cap(buf)))
			if budget != nil && !budget.ahead(size-int64(len(buf))) {
				return buf, errBodyBudget
			}
			grown := make([]byte, len(buf), size)
			copy(grown, buf)
			buf = grown
		}
		m, err := r.Body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		switch {
		case err == io.EOF && int64(len(buf)) < n:
			return buf, io.ErrUnexpectedEOF
		case err == io.EOF:
			return buf, nil
		case err != nil, int64(len(buf)) > n:
			return buf, err
		}
	}
}

// fastRequest is what the fast path keeps of a caller's tools/call.
type fastRequest struct {
	id     json.RawMessage // the caller's, verbatim
	key    string          // id as a map key
	name   string
	params []wire.RawParam // arguments and the multi-round-trip keys, verbatim
	token  json.RawMessage // the caller's progressToken; nil if none
	trace  mcp.Meta        // the caller's traceparent and tracestate
	// caps are what a 2026-07-28 client declares in _meta, and level the
	// logging level it asks for ("" none); nil for a classic one, which
	// declared them at initialize.
	caps  *mcp.ClientCapabilities
	level mcp.LoggingLevel
	// state and answers are a 2026-07-28 client's later round of a call
	// in rounds (rounds.go): the gateway's requestState and the
	// inputResponses, decoded as the go-sdk decodes them. "" and nil on
	// a first round.
	state   string
	answers mcp.InputResponseMap
}

// forwardedParams are the params keys the slow path sends upstream besides
// name and _meta (see callTool); others are dropped there, and here.
var forwardedParams = map[string]bool{"arguments": true, "inputResponses": true, "requestState": true}

// parseCall parses a POST body that should be one tools/call. Keys are
// matched exactly (encoding/json matches struct fields without regard to
// case), and anything unusual answers false. era is the protocol version
// of a 2026-07-28 request (its header), "" for a classic one; memo keeps
// what such requests' _meta decoded to.
func parseCall(body []byte, era string, memo *eraMemo) (*fastRequest, bool) {
	var env map[string]json.RawMessage
	if json.Unmarshal(body, &env) != nil || len(env) != 4 {
		return nil, false
	}
	if string(env["jsonrpc"]) != `"2.0"` || string(env["method"]) != `"`+methodCallTool+`"` {
		return nil, false
	}
	key, ok := idKey(env["id"])
	if !ok {
		return nil, false
	}
	var params map[string]json.RawMessage
	if p := env["params"]; len(p) == 0 || p[0] != '{' || json.Unmarshal(p, &params) != nil {
		return nil, false
	}
	req := &fastRequest{id: env["id"], key: key}
	if json.Unmarshal(params["name"], &req.name) != nil || req.name == "" {
		return nil, false
	}
	for k, v := range params {
		if era != "" && k != "arguments" && forwardedParams[k] {
			// A later round of a call in rounds (rounds.go), or not one
			// the fast path knows.
			if !eraRound(req, k, v) {
				return nil, false
			}
			continue
		}
		if forwardedParams[k] {
			req.params = append(req.params, wire.RawParam{Key: k, Value: v})
		}
	}
	if req.answers != nil && req.state == "" {
		// Answers without the gateway's state start a call that
		// forwards them to the backend on the go-sdk path: left to it.
		return nil, false
	}
	if raw, ok := params["_meta"]; ok && string(raw) != "null" {
		var meta map[string]json.RawMessage
		if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &meta) != nil {
			return nil, false
		}
		versioned := false
		for k, v := range meta {
			switch {
			case strings.HasPrefix(k, "io.modelcontextprotocol/"):
				// Per-request protocol state: on a classic session the
				// go-sdk's business; for a 2026-07-28 request what the
				// go-sdk would check of it (validateRequestMeta and the
				// transport's header match), checked alike.
				if era == "" || !eraMeta(req, k, v, era, &versioned, memo) {
					return nil, false
				}
			case k == "progressToken":
				if _, ok := idKey(v); !ok {
					return nil, false
				}
				req.token = v
			case k == tracing.MetaTraceparent || k == "tracestate":
				var s string
				if json.Unmarshal(v, &s) == nil {
					if req.trace == nil {
						req.trace = mcp.Meta{}
					}
					req.trace[k] = s
				}
			}
		}
		if era != "" && (!versioned || req.caps == nil) {
			return nil, false
		}
	} else if era != "" {
		return nil, false // no protocolVersion: the go-sdk answers it
	}
	return req, true
}

// eraRound takes a key of a 2026-07-28 client's later round into req:
// requestState, when it is one the gateway issued (roundStatePrefix; any
// other belongs to the backend, and the go-sdk path forwards it), and
// inputResponses, decoded with the go-sdk's own decoder, which also gives
// each answer the type the waiting backend request wants (askRound). What
// the go-sdk would refuse is left to it to refuse.
func eraRound(req *fastRequest, k string, v json.RawMessage) bool {
	switch k {
	case "requestState":
		var state string
		if len(v) == 0 || v[0] != '"' || json.Unmarshal(v, &state) != nil || !strings.HasPrefix(state, roundStatePrefix) {
			return false
		}
		req.state = state
		return true
	case "inputResponses":
		var answers mcp.InputResponseMap
		if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &answers) != nil || answers == nil {
			return false
		}
		req.answers = answers
		return true
	}
	return false
}

// eraMeta takes one io.modelcontextprotocol/ key of a 2026-07-28 request's
// _meta into req: the protocol version (the header's, which the go-sdk
// requires it to match), the client's capabilities (required) and info
// (optional, but an object), the logging level (optional; one the go-sdk
// path would record, interceptSetLevel). Keys the fast path does not
// know are left to the go-sdk.
func eraMeta(req *fastRequest, k string, v json.RawMessage, era string, versioned *bool, memo *eraMemo) bool {
	switch k {
	case mcp.MetaKeyProtocolVersion:
		var s string
		*versioned = json.Unmarshal(v, &s) == nil && s == era
		return *versioned
	case mcp.MetaKeyClientCapabilities:
		if m := memo.caps.Load(); m != nil && m.raw == string(v) {
			req.caps = m.caps
			return true
		}
		if req.caps = eraCapabilities(v); req.caps == nil {
			return false
		}
		memo.caps.Store(&memoCaps{raw: string(v), caps: req.caps})
		return true
	case mcp.MetaKeyClientInfo:
		if m := memo.info.Load(); m != nil && *m == string(v) {
			return true
		}
		var info *mcp.Implementation
		if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &info) != nil || info == nil {
			return false
		}
		raw := string(v)
		memo.info.Store(&raw)
		return true
	case mcp.MetaKeyLogLevel:
		var l mcp.LoggingLevel
		if json.Unmarshal(v, &l) != nil || levelRank(l) < 0 {
			return false
		}
		req.level = l
		return true
	}
	return false
}

// eraMemo keeps the last client capabilities a 2026-07-28 request's _meta
// decoded to, and the last client info found valid: an agent sends the
// same with every request, and decoding them was most of what such a
// call cost the fast path beyond a classic one. One of each, so a client
// that varies them costs only the decode. The capabilities are shared
// by the requests that sent them, and only read.
type eraMemo struct {
	caps atomic.Pointer[memoCaps]
	info atomic.Pointer[string]
}

type memoCaps struct {
	raw  string
	caps *mcp.ClientCapabilities
}

// eraCapabilities decodes a 2026-07-28 client's capabilities as the go-sdk
// does (roots is a pointer there, RootsV2 here), or nil. The go-sdk's
// decoder matches keys exactly: a key that is not lower case is unusual.
func eraCapabilities(v json.RawMessage) *mcp.ClientCapabilities {
	var keys map[string]json.RawMessage
	if len(v) == 0 || v[0] != '{' || json.Unmarshal(v, &keys) != nil {
		return nil
	}
	for k := range keys {
		if k != strings.ToLower(k) {
			return nil
		}
	}
	var c struct {
		mcp.ClientCapabilities
		Roots *mcp.RootCapabilities `json:"roots,omitempty"`
	}
	if json.Unmarshal(v, &c) != nil {
		return nil
	}
	caps := c.ClientCapabilities
	caps.RootsV2 = c.Roots
	if caps.RootsV2 != nil {
		caps.Roots = *caps.RootsV2
	}
	return &caps
}

// idKey validates a JSON-RPC id (a string or an integer) and returns it as
// a key that tells a string from a number.
func idKey(raw json.RawMessage) (string, bool) {
	if len(raw) == 0 {
		return "", false
	}
	if raw[0] == '"' {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return "", false
		}
		return "s" + s, true
	}
	digits := raw
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		return "", false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return "", false
		}
	}
	return "n" + string(raw), true
}

// tryFast answers the request if the fast path applies; false leaves it,
// unanswered, to the go-sdk. ds is the caller's session, nil for a
// 2026-07-28 request. A notifications/cancelled for a fast call is acted
// on here and still passed on (the go-sdk answers it 202).
func (g *Gateway) tryFast(w http.ResponseWriter, r *http.Request, ds *downSession, body []byte) bool {
	if ds != nil {
		if ds.nRelays.Load() > 0 && ds.answerRelay(body) {
			// The client's answer to a request relayed on a fast call's
			// stream: as the go-sdk acknowledges a response (it would not
			// know the id: the fast path wrote the request).
			w.WriteHeader(http.StatusAccepted)
			return true
		}
		if bytes.Contains(body, cancelledMethod) {
			// cancelFast reads the method: a call whose arguments carry the
			// text is no notice, and a notice whose reason names tools/call is.
			g.cancelFast(ds, body)
		}
	}
	if !bytes.Contains(body, []byte(`"`+methodCallTool+`"`)) {
		return false
	}
	if g.noFastPath.Load() {
		return false
	}
	version := r.Header.Get(protocolVersionHeader)
	era := ""
	if ds == nil {
		era = version
	}
	if !wire.WithinSDKDepth(body) {
		return false // the go-sdk refuses it as malformed
	}
	req, ok := parseCall(body, era, &g.eraMemo)
	if !ok {
		return false
	}
	if ds == nil && r.Header.Get(nameHeader) != req.name {
		return false // the go-sdk answers the mismatch
	}
	rt, ok := g.routes.Load().route(req.name)
	if !ok {
		return false // unknown or down: the go-sdk and interceptDown answer
	}
	t := rt.target
	v, ok := t.backend.RawProtocolVersion()
	switch {
	case !ok:
		return false
	case ds == nil:
		// A 2026-07-28 call has nothing to translate for a classic
		// backend: what the eras differ in (the _meta above, the
		// session) stays at the gateway. A tool that binds headers has
		// its Mcp-Param-* headers checked by the go-sdk.
		if rt.bindsHeaders {
			return false
		}
	case v != version:
		return false
	}
	g.fastCall(w, r, ds, req, rt)
	return true
}

// cancelFast acts on a caller's notifications/cancelled for a fast call.
func (g *Gateway) cancelFast(ds *downSession, body []byte) {
	var msg struct {
		Method string `json:"method"`
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "notifications/cancelled" {
		return
	}
	if key, ok := idKey(msg.Params.RequestID); ok && ds.cancel(key) {
		g.log.Debug("gateway: caller cancelled a call", "id", string(msg.Params.RequestID))
	}
}

// fastCall runs one call on the fast path and answers it. It does what
// callTool does, with the same span, metrics, log line and errors: a call
// of a classic session (ds) at once, one of a 2026-07-28 client (ds nil)
// in rounds.
func (g *Gateway) fastCall(w http.ResponseWriter, r *http.Request, ds *downSession, req *fastRequest, rt route) {
	g.fastCalls.Add(1)
	// A client has come, as serveTools marks on the go-sdk path: a
	// 2026-07-28 client's first request may be this call.
	g.settle()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	out := &fastWriter{w: w, id: req.id, token: req.token, era: ds == nil}
	// A call in rounds runs on after its question was answered: what it
	// sends later must not reach this response, which is over.
	defer out.close()
	if !g.calls.acquire(1) {
		out.error(http.StatusOK, g.errCallsFull())
		return
	}
	defer g.calls.release(1)
	if ds != nil {
		ok, closed := ds.start(req.key, cancel)
		if closed {
			// As the go-sdk answers a request of a session that is gone
			// (the call does not reach it to answer).
			http.Error(w, "session not found", http.StatusNotFound)
			return
		}
		if !ok {
			// As the go-sdk answers a call whose id is in flight (the
			// call does not reach it to answer).
			out.error(http.StatusBadRequest, &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
				Message: fmt.Sprintf("duplicate in-flight request ID %s", idText(req.id))})
			return
		}
		defer ds.finish(req.key)
	}

	name := req.name
	start := time.Now()
	if g.log.Enabled(ctx, slog.LevelDebug) {
		// The call's DEBUG line says which path carried it.
		ctx = context.WithValue(ctx, fastPathKey{}, true)
	}
	ctx, span := startCallSpan(ctx, req.trace, r.Header, name)
	defer span.End()
	annotateCallSpan(span, rt)
	var progress func(*mcp.ProgressNotificationParams)
	if req.token != nil {
		progress = out.progress
	}
	var res json.RawMessage
	var err error
	if ds != nil {
		ctx = wire.WithCaller(ctx, &caller{g: g, ss: ds.ss, out: fastStream{g: g, ds: ds, out: out}})
		send := rawSend(r.Header.Get(protocolVersionHeader), req.params, progress, nil, &res)
		err = g.roundTrip(ctx, name, start, func() sent { return g.sendCall(ctx, rt, name, send) })
	} else {
		c := &caller{g: g, era: &eraClient{caps: req.caps}}
		var log func(*mcp.LoggingMessageParams)
		if req.level != "" {
			// As interceptSetLevel does on the go-sdk path, before the
			// call: the backends are asked for the level the clients want.
			g.setLevel(c.era, req.level)
			defer g.forgetLevel(c.era)
			log = func(p *mcp.LoggingMessageParams) {
				if levelRank(p.Level) >= levelRank(req.level) {
					out.notify("notifications/message", p)
				}
			}
		}
		p := &mcp.CallToolParams{Name: rt.tool, RequestState: req.state, InputResponses: req.answers}
		w := roundWaiter{log: log, progress: progress}
		err = g.roundTrip(ctx, name, start, func() sent {
			cr, asked, s := g.callInRounds(ctx, c, rt.target, name, p, w,
				func(cr *callRound, progress func(*mcp.ProgressNotificationParams)) sendFunc {
					return rawSend("", req.params, progress, g.serverInfo, &cr.raw)
				})
			switch {
			case asked != nil:
				// The backend asked the client something: the question
				// is this round's answer, as on the go-sdk path.
				var merr error
				if res, merr = json.Marshal(asked); merr == nil {
					res, merr = resultJSON(res, g.serverInfo)
				}
				if merr != nil {
					s.answered, s.err = false, merr
				}
			case s.err == nil && s.answered:
				var rerr error
				if res, rerr = cr.resultJSON(g.serverInfo); rerr != nil {
					s.answered, s.err = false, rerr
				}
			}
			return s
		})
	}
	if err == nil {
		out.result(res)
		return
	}
	var je *jsonrpc.Error
	if !errors.As(err, &je) {
		je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
	}
	out.error(http.StatusOK, je)
}

// fastPathKey marks, in a call's context, a call on the fast path.
type fastPathKey struct{}

// rawSend is the fast path's backend call: CallToolRaw on the route's
// backend, its result, as the caller gets it (resultJSON), kept in *into.
// version is the protocol version the backend session must speak, ""
// when any will do. Sent again (see reroute) on a new session that does
// not (the restarted server negotiated another), the call fails as it
// came.
func rawSend(version string, params []wire.RawParam, progress func(*mcp.ProgressNotificationParams), serverInfo json.RawMessage, into *json.RawMessage) sendFunc {
	var lastErr error
	return func(callCtx context.Context, r route) (answered, isError bool, err error) {
		if v, raw := r.target.backend.RawProtocolVersion(); lastErr != nil && (!raw || (version != "" && v != version)) {
			return false, false, lastErr
		}
		res, isError, err := r.target.backend.CallToolRaw(callCtx, r.tool, params, progress)
		if lastErr = err; err != nil || res == nil {
			return false, false, err
		}
		if res, err = resultJSON(res, serverInfo); err != nil {
			return false, false, fmt.Errorf("invalid result: %w", err)
		}
		*into = res
		return true, isError, nil
	}
}

func idText(id json.RawMessage) string {
	var s string
	if json.Unmarshal(id, &s) == nil {
		return s
	}
	return string(id)
}

// resultJSON is dropHopMeta for a result as JSON, and makes an absent
// content an empty list as the go-sdk server does (the fast path never
// decodes the result into the go-sdk's types). With serverInfo (a
// 2026-07-28 caller) it also does what eraResult does for the go-sdk
// path: the result names the gateway in _meta, and its resultType. A
// result that needs none of it is returned as it is.
func resultJSON(res, serverInfo json.RawMessage) (json.RawMessage, error) {
	var head struct {
		Meta          json.RawMessage `json:"_meta"`
		Content       json.RawMessage `json:"content"`
		ResultType    json.RawMessage `json:"resultType"`
		InputRequests json.RawMessage `json:"inputRequests"`
	}
	if err := json.Unmarshal(res, &head); err != nil {
		return nil, err
	}
	var meta map[string]json.RawMessage
	if len(head.Meta) > 0 && string(head.Meta) != "null" {
		if err := json.Unmarshal(head.Meta, &meta); err != nil {
			return nil, err
		}
	}
	hop := false
	for k := range meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			hop = true
			break
		}
	}
	noContent := len(head.Content) == 0 || string(head.Content) == "null"
	var resultType json.RawMessage
	if serverInfo != nil && (len(head.ResultType) == 0 || string(head.ResultType) == "null") {
		resultType = json.RawMessage(`"` + resultTypeOf(len(head.InputRequests) > 0 && string(head.InputRequests) != "null") + `"`)
	}
	if !hop && !noContent {
		switch {
		case serverInfo == nil:
			return res, nil
		case len(head.Meta) == 0 && string(head.ResultType) != "null":
			// The common case of the era: nothing to merge with. (A
			// null resultType is replaced below: prepended, it would
			// leave the null after it, which a client reads last.)
			first := make([]byte, 0, len(serverInfo)+80)
			first = append(first, `"_meta":{"`+mcp.MetaKeyServerInfo+`":`...)
			first = append(first, serverInfo...)
			first = append(first, '}')
			if resultType != nil {
				first = append(first, `,"resultType":`...)
				first = append(first, resultType...)
			}
			return withFirstMembers(res, first), nil
		}
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(res, &m); err != nil {
		return nil, err
	}
	for k := range meta {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			delete(meta, k)
		}
	}
	if serverInfo != nil {
		if meta == nil {
			meta = map[string]json.RawMessage{}
		}
		meta[mcp.MetaKeyServerInfo] = serverInfo
		if resultType != nil {
			m["resultType"] = resultType
		}
	}
	if len(meta) == 0 {
		delete(m, "_meta")
	} else {
		b, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		m["_meta"] = b
	}
	if noContent {
		m["content"] = json.RawMessage("[]")
	}
	return json.Marshal(m)
}

// withFirstMembers returns the JSON object obj with members (JSON object
// members, comma-separated) first.
func withFirstMembers(obj json.RawMessage, members []byte) json.RawMessage {
	rest := bytes.TrimLeft(obj, " \t\r\n")[1:] // after '{'
	trimmed := bytes.TrimLeft(rest, " \t\r\n")
	empty := len(trimmed) > 0 && trimmed[0] == '}'
	out := make([]byte, 0, len(obj)+len(members)+2)
	out = append(out, '{')
	out = append(out, members...)
	if !empty {
		out = append(out, ',')
	}
	return append(out, rest...)
}

// fastWriter answers one fast call: application/json when the answer is all
// there is, an event stream once a progress notification must go out before
// it (framed as the go-sdk frames it, whose stream writer is not exported;
// without event ids: the gateway keeps no event store). Its methods are called one at a time: progress from the
// session's delivery goroutine, which CallToolRaw waits for before it
// returns, then the answer.
type fastWriter struct {
	mu    sync.Mutex // log messages and progress come from different goroutines
	w     http.ResponseWriter
	id    json.RawMessage
	token json.RawMessage
	era   bool // a 2026-07-28 caller: some errors have their own status
	sse   bool
	gone  bool // writing failed (the caller is gone), or the answer is out
}

// close ends the response: whatever comes later is dropped.
func (f *fastWriter) close() {
	f.mu.Lock()
	f.gone = true
	f.mu.Unlock()
}

func (f *fastWriter) progress(p *mcp.ProgressNotificationParams) {
	if p != nil {
		f.notify("notifications/progress", &mcp.ProgressNotificationParams{
			ProgressToken: f.token, Progress: p.Progress, Total: p.Total, Message: p.Message,
		})
	}
}

func (f *fastWriter) event(msg []byte) {
	if !f.sse {
		f.sse = true
		h := f.w.Header()
		h.Set("Cache-Control", "no-cache, no-transform")
		h.Set("Content-Type", "text/event-stream")
		h.Set("Connection", "keep-alive")
		f.w.WriteHeader(http.StatusOK)
	}
	if bytes.ContainsAny(msg, "\r\n") {
		// A data line cannot hold a line break, and the backend's JSON may
		// (pretty-printed, or joined from several data lines): compact it,
		// or failing that send one data line per line, which a client
		// joins back with "\n".
		var c bytes.Buffer
		if json.Compact(&c, msg) == nil {
			msg = c.Bytes()
		} else {
			msg = bytes.ReplaceAll(bytes.ReplaceAll(msg, []byte("\r\n"), []byte("\n")), []byte("\r"), []byte("\n"))
			msg = bytes.ReplaceAll(msg, []byte("\n"), []byte("\ndata: "))
		}
	}
	buf := make([]byte, 0, len(msg)+24)
	buf = append(buf, "event: message\ndata: "...)
	buf = append(buf, msg...)
	buf = append(buf, "\n\n"...)
	if _, err := f.w.Write(buf); err != nil {
		f.gone = true
		return
	}
	_ = http.NewResponseController(f.w).Flush()
}

func (f *fastWriter) result(res json.RawMessage) {
	buf := make([]byte, 0, len(res)+len(f.id)+40)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, f.id...)
	buf = append(buf, `,"result":`...)
	buf = append(buf, res...)
	buf = append(buf, '}')
	f.answer(http.StatusOK, buf)
}

func (f *fastWriter) error(status int, je *jsonrpc.Error) {
	if f.era {
		if s := eraErrorStatus(je.Code); s != 0 {
			status = s
		}
	}
	e, err := json.Marshal(je)
	if err != nil {
		e = []byte(`{"code":-32603,"message":"internal error"}`)
	}
	buf := make([]byte, 0, len(e)+len(f.id)+40)
	buf = append(buf, `{"jsonrpc":"2.0","id":`...)
	buf = append(buf, f.id...)
	buf = append(buf, `,"error":`...)
	buf = append(buf, e...)
	buf = append(buf, '}')
	f.answer(status, buf)
}

// send writes a message on the call's stream; false when the caller is
// gone.
func (f *fastWriter) send(msg []byte) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return false
	}
	f.event(msg)
	return !f.gone
}

// notify sends a notification on the call's stream.
func (f *fastWriter) notify(method string, params any) {
	msg, err := json.Marshal(&struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", method, params})
	if err != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.gone {
		f.event(msg)
	}
}

// answer writes the call's answer, the last thing its response holds: a
// call in rounds that asked a question runs on, and its progress and log
// messages must not follow the answer into the body.
func (f *fastWriter) answer(status int, msg []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.gone {
		return
	}
	f.gone = true
	if f.sse {
		f.event(msg)
		return
	}
	h := f.w.Header()
	h.Set("Cache-Control", "no-cache, no-transform")
	h.Set("Content-Type", "application/json")
	f.w.WriteHeader(status)
	_, _ = f.w.Write(msg)
}

// fastStream reaches the client of a fast call on the call's own stream:
// log messages (at the level the client set) and the backend's requests go
// out there as the backend sent them; the client's answers come back as
// POSTs that the fast path takes (answerRelay).
type fastStream struct {
	g   *Gateway
	ds  *downSession
	out *fastWriter
}

func (c fastStream) log(p *mcp.LoggingMessageParams) {
	lvl := c.g.level(c.ds.ss)
	if lvl == "" || levelRank(p.Level) < levelRank(lvl) {
		return
	}
	c.out.notify("notifications/message", p)
}

func (c fastStream) createMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	var res mcp.CreateMessageWithToolsResult
	return &res, c.request(ctx, "sampling/createMessage", p, &res)
}

func (c fastStream) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	var res mcp.ElicitResult
	return &res, c.request(ctx, "elicitation/create", p, &res)
}

func (c fastStream) listRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	var res mcp.ListRootsResult
	return &res, c.request(ctx, "roots/list", p, &res)
}

// relaySeq numbers the requests relayed on fast calls' streams.
var relaySeq atomic.Uint64

// request sends a backend's request to the client on the fast call's own
// stream (where the backend sent it, and where every client reads) and
// waits for the client's answer, which comes as a POST (answerRelay). When
// ctx ends first the client is told the request is cancelled.
func (c fastStream) request(ctx context.Context, method string, params, result any) error {
	id := "tether-relay-" + strconv.FormatUint(relaySeq.Add(1), 10)
	msg, err := json.Marshal(&struct {
		JSONRPC string `json:"jsonrpc"`
		ID      string `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params"`
	}{"2.0", id, method, params})
	if err != nil {
		return err
	}
	ch := make(chan *relayAnswer, 1)
	ds := c.ds
	ds.mu.Lock()
	if ds.relays == nil {
		ds.relays = make(map[string]chan *relayAnswer)
	}
	ds.relays[id] = ch
	ds.mu.Unlock()
	ds.nRelays.Add(1)
	defer func() {
		ds.mu.Lock()
		delete(ds.relays, id)
		ds.mu.Unlock()
		ds.nRelays.Add(-1)
	}()
	if !c.out.send(msg) {
		return errors.New("the client's stream of the call is gone")
	}
	select {
	case a := <-ch:
		if a.Error != nil {
			return a.Error
		}
		if len(a.Result) == 0 {
			return errors.New("the client answered without a result")
		}
		return json.Unmarshal(a.Result, result)
	case <-ctx.Done():
		c.out.notify("notifications/cancelled", map[string]any{"requestId": id, "reason": "the request it was made for ended"})
		return ctx.Err()
	}
}

// answerRelay hands a POST that answers a relayed request to the request
// waiting for it; false if the body is no such answer.
func (ds *downSession) answerRelay(body []byte) bool {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		relayAnswer
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "" {
		return false
	}
	var id string
	if json.Unmarshal(msg.ID, &id) != nil || !strings.HasPrefix(id, "tether-relay-") {
		return false
	}
	ds.mu.Lock()
	ch := ds.relays[id]
	delete(ds.relays, id)
	ds.mu.Unlock()
	if ch == nil {
		return true // answered already, or too late: nobody waits
	}
	ch <- &relayAnswer{Result: msg.Result, Error: msg.Error}
	return true
}
