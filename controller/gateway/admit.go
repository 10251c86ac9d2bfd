package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// What the gateway admits from clients, and how long it waits for them
// (docs/contract.md, "Limits on what clients send"). Every bound here is a
// field of Options with a default and a flag of tether run.

// Defaults of the client limits in Options.
const (
	// DefaultRequestReadTimeout bounds the arrival of a request body, the
	// common net/http choice for a server's read timeout.
	DefaultRequestReadTimeout = 30 * time.Second
	// DefaultMaxConnections bounds the gateway's open client connections.
	// An agent holds one to three (a POST or two and its SSE stream);
	// 1024 leaves room for hundreds of local agents, and is lowered by the
	// caller to fit the process's descriptor limit (tether run keeps half
	// of it for its own pipes, files and backends).
	DefaultMaxConnections = 1024
	// DefaultMaxSessions bounds the HTTP sessions: an idle one holds about
	// 18 KB and two goroutines, so 1000 hold under 20 MB. An agent opens
	// one or a few.
	DefaultMaxSessions = 1000
	// DefaultMaxSessionsPerClient is DefaultMaxSessions: a client is a
	// token, and every client without one is the same client; lower it
	// where tokens tell clients apart.
	DefaultMaxSessionsPerClient = DefaultMaxSessions
	// DefaultMaxCallsInFlight bounds the tools/calls being served at once:
	// far above what agents run in parallel (a few each; 1,000 at once on
	// one session are served, docs/reliability.md row G4), far below what
	// exhausts goroutines; the bytes they hold have their own budget.
	DefaultMaxCallsInFlight = 1024
	// DefaultMaxRequestBytesInFlight bounds the request bodies held at
	// once: 32 calls with a body at the 4 MiB limit.
	DefaultMaxRequestBytesInFlight = 128 << 20
)

// withBodyDeadline bounds how long a request body may take to arrive: the
// server's ReadHeaderTimeout ends with the headers, and a client that then
// sends one byte of a long body would hold its connection (a descriptor, a
// go-sdk session) for good. The deadline is lifted once the body is read,
// so a call that runs for minutes afterwards is not cut off (net/http's
// ReadTimeout would cancel it: a read deadline that passes while the
// server watches the connection for a close ends the request's context).
//
// A request is in once its body is: from then on its connection is serving
// and never shed at --max-connections (connlimit.go), except a standalone
// stream when nothing else can make room; until then it is stalled, and the
// one stalled the longest makes room for a new client. A request whose
// connection was shed first is not served (its body read fails).
func withBodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			if markServing(r.Context(), r.Method) {
				next.ServeHTTP(w, r)
			}
			return
		}
		rc := http.NewResponseController(w)
		b := &deadlineBody{ReadCloser: r.Body, ctx: r.Context(), method: r.Method}
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			b.rc = rc
		}
		r.Body = b
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline (if rc is set) once the body is read
// to its end, and marks its connection serving.
type deadlineBody struct {
	io.ReadCloser
	rc     *http.ResponseController
	ctx    context.Context
	method string
	done   bool
	shed   bool
}

// errConnShed fails the read of a body whose connection was shed to make
// room (--max-connections) before the body was in: the call is not run for
// a client that will never get its answer.
var errConnShed = errors.New("connection closed to admit another (--max-connections)")

func (b *deadlineBody) Read(p []byte) (int, error) {
	if b.shed {
		return 0, errConnShed
	}
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		if !markServing(b.ctx, b.method) {
			b.shed = true
			return n, errConnShed
		}
		if b.rc != nil {
			_ = b.rc.SetReadDeadline(time.Time{})
		}
	}
	return n, err
}

// sessionTable admits the gateway's HTTP sessions (docs/contract.md, "Limits
// on what clients send"): at most max in all and perClient per client, a
// client being who presented a token (its hash) or, without a token, every
// client alike (nothing tells two local processes apart). When a new
// session would pass a bound, the least recently used idle session (no
// request in flight, no stream open) of that scope is closed to make room:
// clients that never DELETE (a crashed agent, a careless script) leave
// sessions behind, and refusing would let those lock every client out until
// the idle timeout; a closed session's client gets 404 and initializes
// again, as MCP clients do. Only when every session of the scope is busy is
// the new one refused (503 for the gateway, 429 for one client), with a
// JSON-RPC error that says which bound.
//
// A session also belongs to the client that created it: presented by
// another, it is unknown (404), as if it had never been issued.
//
// The table also closes a session with no request in flight for idle, the
// session timeout (closeIdleSessions): it sees every request of a session,
// on the fast path and the go-sdk's alike, where the go-sdk's own idle
// timer sees only the requests that reach it and would close a session
// whose calls all take the fast path. A standalone stream (GET) open does
// not keep a session from its timeout, as it does not from the go-sdk's:
// a client holding streams open would otherwise keep every session busy
// for good, and each new one refused at --max-sessions.
//
// A session the table dropped to close (idle, or to make room) is unknown
// from then on (404), though its close may not have run yet: a request that
// came then would run on the session, its call cut off by the close.
type sessionTable struct {
	max, perClient int
	idle           time.Duration // > 0; 0 keeps idle sessions

	mu       sync.Mutex
	m        map[string]*sessionEntry
	clients  map[string]int  // sessions by client
	closing  map[string]bool // sessions dropped, until closeSessions closed them
	evicted  atomic.Int64    // sessions closed to make room (tests, logs)
	warnedAt time.Time       // when the last eviction was logged
}

type sessionEntry struct {
	id       string
	client   string
	inflight int // requests in flight, standalone streams among them
	streams  int // standalone streams (GET) open
	lastUsed time.Time
	ss       *mcp.ServerSession // nil until the session was found
}

// use marks a request of session id as in flight, a standalone stream if
// stream; false if the session belongs to another client or is being
// closed. e is nil for a session the table does not know (not issued by
// this gateway, ended): the go-sdk answers it.
func (t *sessionTable) use(id, client string, stream bool) (e *sessionEntry, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e = t.m[id]
	if e == nil {
		return nil, !t.closing[id]
	}
	if e.client != client {
		return nil, false
	}
	e.inflight++
	if stream {
		e.streams++
	}
	e.lastUsed = time.Now()
	return e, true
}

func (t *sessionTable) done(e *sessionEntry, stream bool) {
	t.mu.Lock()
	e.inflight--
	if stream {
		e.streams--
	}
	e.lastUsed = time.Now()
	t.mu.Unlock()
}

// markClosing marks the sessions dropped for the caller to close
// (closeSessions) as closing until then.
func (t *sessionTable) markClosing(victims []*sessionEntry) {
	if len(victims) > 0 && t.closing == nil {
		t.closing = make(map[string]bool)
	}
	for _, v := range victims {
		t.closing[v.id] = true
	}
}

// errSessionsFull is the refusal of a new session; status is 503 (the
// gateway's bound) or 429 (the client's).
type errSessionsFull struct {
	status int
	msg    string
}

// admit counts the session id the go-sdk has just issued to client, with
// the request that created it in flight (the caller ends it with done),
// and chooses the idle sessions to close for it (the caller closes them,
// outside the lock). The session is counted under the lock, in flight, or
// a creation running meanwhile could take it for an idle one and close it.
// When a bound is reached and nothing can be closed, the new session is
// refused (full) and not counted: the caller closes it. An empty or known
// id is no new session: nothing to count.
func (t *sessionTable) admit(client, id string) (e *sessionEntry, victims []*sessionEntry, full *errSessionsFull) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[string]*sessionEntry)
		t.clients = make(map[string]int)
	}
	if id == "" || t.m[id] != nil {
		return nil, nil, nil
	}
	if t.clients[client] >= t.perClient {
		v := t.lruIdle(client, true)
		if v == nil {
			return nil, nil, &errSessionsFull{http.StatusTooManyRequests, fmt.Sprintf(
				"tether: this client holds %d gateway sessions, each with a request in flight (--max-sessions-per-client); end one (DELETE) or retry later", t.perClient)}
		}
		victims = append(victims, t.drop(v))
	}
	if len(t.m) >= t.max {
		v := t.lruIdle("", false)
		if v == nil {
			for _, v := range victims { // not closed after all
				t.add(v)
			}
			return nil, nil, &errSessionsFull{http.StatusServiceUnavailable, fmt.Sprintf(
				"tether: the gateway holds %d sessions, each with a request in flight (--max-sessions); retry later", t.max)}
		}
		victims = append(victims, t.drop(v))
	}
	t.markClosing(victims) // only now: a refusal above puts them back
	e = &sessionEntry{id: id, client: client, inflight: 1, lastUsed: time.Now()}
	t.add(e)
	return e, victims, nil
}

// remove forgets a session that ended.
func (t *sessionTable) remove(e *sessionEntry) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[e.id] == e {
		t.drop(e)
	}
}

func (t *sessionTable) drop(e *sessionEntry) *sessionEntry {
	delete(t.m, e.id)
	if t.clients[e.client]--; t.clients[e.client] <= 0 {
		delete(t.clients, e.client)
	}
	return e
}

func (t *sessionTable) add(e *sessionEntry) {
	t.m[e.id] = e
	t.clients[e.client]++
}

// expire drops the sessions idle for t.idle at now (no request in flight
// but standalone streams), for the caller to close, and says when the next
// one may be due: no session the table holds or will admit can be idle
// that long before next (one in flight now is idle at the earliest from
// now on). Linear over at most max sessions, and run when the earliest of
// them may be due, never on a request.
func (t *sessionTable) expire(now time.Time) (victims []*sessionEntry, next time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	next = now.Add(t.idle)
	for _, e := range t.m {
		if e.inflight > e.streams {
			continue
		}
		due := e.lastUsed.Add(t.idle)
		if !due.After(now) {
			victims = append(victims, t.drop(e))
		} else if due.Before(next) {
			next = due
		}
	}
	t.markClosing(victims)
	return victims, next
}

// lruIdle is the least recently used session with nothing in flight, of
// client when mine, of any client otherwise. Linear: it runs only when a
// bound is reached, over at most max sessions.
func (t *sessionTable) lruIdle(client string, mine bool) *sessionEntry {
	var best *sessionEntry
	for _, e := range t.m {
		if e.inflight > 0 || (mine && e.client != client) {
			continue
		}
		if best == nil || e.lastUsed.Before(best.lastUsed) {
			best = e
		}
	}
	return best
}

// maxEvictionsInFlight bounds the closes of sessions evicted at
// --max-sessions that run beside their new sessions' answers (each a
// goroutine holding its victims): a close waits for the session's
// handlers, and a flood of initializes would otherwise start one for each
// however slow they were. Past it, an initialize closes its victim on its
// own path, as it did before closes ran beside.
const maxEvictionsInFlight = 64

// sessionCapture admits the session a POST without a session id creates,
// by the id the go-sdk issues in the response header (it sets one only for
// an initialize it accepted), before the first byte goes out: the client
// may use the id at once, and only then are idle sessions closed for it.
// Tracking never guesses from the body what the go-sdk will make of it: a
// POST the go-sdk refuses, or serves on a session it closes when the
// request ends, issues no id and closes nothing.
//
// A session refused (every session of the scope busy) is refused before
// its response is committed: the client gets the 503 or 429 with the
// JSON-RPC error in place of the go-sdk's answer (and no session id), and
// the session, never announced, is closed when the request ends. The
// go-sdk may write from another goroutine than the handler's: mu orders
// the two.
type sessionCapture struct {
	http.ResponseWriter
	g      *Gateway
	client string

	mu       sync.Mutex
	captured bool
	e        *sessionEntry // the session counted, in flight until end
	refused  string        // the id of the session refused, closed by end
}

func (c *sessionCapture) captureLocked() {
	if c.captured {
		return
	}
	c.captured = true
	id := c.Header().Get(sessionIDHeader)
	e, victims, full := c.g.sessions.admit(c.client, id)
	if full != nil {
		c.refused = id
		h := c.Header()
		for k := range h {
			delete(h, k)
		}
		writeRPCError(c.ResponseWriter, full.status, full.msg)
		return
	}
	c.e = e
	// Closed beside the new session's answer, which does not wait for the
	// go-sdk's Close of each (it waits for the session's handlers): the
	// victims are dropped from the table already, and answered 404 until
	// closed. On the request's path when the gateway is closing, or while
	// maxEvictionsInFlight closes run: a flood of initializes then waits
	// for its own.
	if len(victims) > 0 && !c.g.evictions.goRun(func() { c.g.evict(victims) }) {
		c.g.evict(victims)
	}
}

func (c *sessionCapture) WriteHeader(code int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.captureLocked()
	if c.refused == "" {
		c.ResponseWriter.WriteHeader(code)
	}
}

func (c *sessionCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.captureLocked()
	if c.refused != "" {
		return len(p), nil // the refusal was written instead
	}
	return c.ResponseWriter.Write(p)
}

func (c *sessionCapture) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *sessionCapture) Flush() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.captureLocked()
	_ = http.NewResponseController(c.ResponseWriter).Flush()
}

// end runs when the request ends, normally or by a panic: a session whose
// id was issued but never written (the client went away first) is admitted
// or refused now; the one counted is watched, the one refused closed.
func (c *sessionCapture) end() {
	c.mu.Lock()
	c.captureLocked()
	e, refused := c.e, c.refused
	c.mu.Unlock()
	if refused != "" {
		for s := range c.g.server.Sessions() {
			if s.ID() == refused {
				s.Close()
			}
		}
	}
	if e != nil {
		c.g.sessions.done(e, false)
		c.g.watchSession(e)
	}
}

// admitSessions puts the session table in front of next. client names the
// caller (the token's hash; "" without a token).
func (g *Gateway) admitSessions(client func(*http.Request) string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		who := client(r)
		if sid := r.Header.Get(sessionIDHeader); sid != "" {
			stream := r.Method == http.MethodGet
			e, ok := g.sessions.use(sid, who, stream)
			if !ok {
				// As the go-sdk answers an id it never issued: the session
				// is refused here, before the go-sdk handler that would.
				http.Error(w, "session not found", http.StatusNotFound)
				return
			}
			if e != nil {
				defer g.sessions.done(e, stream)
			}
			next.ServeHTTP(w, r)
			return
		}
		if r.Method != http.MethodPost {
			next.ServeHTTP(w, r) // the go-sdk creates sessions only on POST
			return
		}
		cw := &sessionCapture{ResponseWriter: w, g: g, client: who}
		defer cw.end()
		next.ServeHTTP(cw, r)
	})
}

// watchSession forgets e once its session ends, by whoever (DELETE, idle
// timeout, eviction, a failed initialize, shutdown).
func (g *Gateway) watchSession(e *sessionEntry) {
	var ss *mcp.ServerSession
	for s := range g.server.Sessions() {
		if s.ID() == e.id {
			ss = s
			break
		}
	}
	if ss == nil {
		g.sessions.remove(e) // ended already
		return
	}
	g.sessions.mu.Lock()
	e.ss = ss
	g.sessions.mu.Unlock()
	g.downs.wg.Add(1)
	go func() {
		defer g.downs.wg.Done()
		_ = ss.Wait()
		g.sessions.remove(e)
	}()
}

// closeIdleSessions closes the sessions idle for the session timeout
// (sessionTable.expire), as evict closes one, until ctx is done: their
// clients get 404 and initialize again. One timer, set to when the
// earliest session may be due, serves them all; a request costs it
// nothing beyond what use and done record anyway. The go-sdk's Close
// waits for the session's handlers (a call whose client went away may
// still run, until its cancellation or its timeout): sessions are closed
// beside the timer, so that one such session delays no other's close.
func (g *Gateway) closeIdleSessions(ctx context.Context) {
	var closing sync.WaitGroup
	defer closing.Wait()
	timer := time.NewTimer(g.sessions.idle)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		victims, next := g.sessions.expire(time.Now())
		if len(victims) > 0 {
			g.log.Debug("gateway closing idle sessions", "sessions", len(victims), "idleTimeout", g.sessions.idle)
			closing.Go(func() { g.closeSessions(victims) })
		}
		timer.Reset(time.Until(next))
	}
}

// evict closes the sessions chosen to make room, with one log line a
// minute at most: a client creating sessions in a loop must not flood the
// log.
func (g *Gateway) evict(victims []*sessionEntry) {
	if len(victims) == 0 {
		return
	}
	n := g.sessions.evicted.Add(int64(len(victims)))
	g.sessions.mu.Lock()
	logNow := time.Since(g.sessions.warnedAt) > time.Minute
	if logNow {
		g.sessions.warnedAt = time.Now()
	}
	g.sessions.mu.Unlock()
	g.closeSessions(victims)
	if logNow {
		g.log.Warn("gateway closed its least recently used idle sessions to admit new ones (--max-sessions, --max-sessions-per-client)",
			"closed", n, "max", g.sessions.max, "perClient", g.sessions.perClient)
	}
}

// closeSessions closes the sessions of victims, which the table has
// dropped and marked closing: watched ones by their session, one admitted
// but not yet watched found by its id. Closed, they are no longer marked:
// the go-sdk answers 404 for them.
func (g *Gateway) closeSessions(victims []*sessionEntry) {
	g.sessions.mu.Lock()
	ss := make([]*mcp.ServerSession, 0, len(victims))
	var unseen map[string]bool // settled, not yet watched
	for _, v := range victims {
		if v.ss != nil {
			ss = append(ss, v.ss)
		} else {
			if unseen == nil {
				unseen = make(map[string]bool)
			}
			unseen[v.id] = true
		}
	}
	g.sessions.mu.Unlock()
	if unseen != nil {
		for s := range g.server.Sessions() {
			if unseen[s.ID()] {
				ss = append(ss, s)
			}
		}
	}
	for _, s := range ss {
		g.closeSession(s)
	}
	g.sessions.mu.Lock()
	for _, v := range victims {
		delete(g.sessions.closing, v.id)
	}
	g.sessions.mu.Unlock()
}

// writeRPCError answers a request the gateway refuses before any JSON-RPC
// is read: a JSON-RPC error with a null id, which MCP clients show.
func writeRPCError(w http.ResponseWriter, status int, msg string) {
	b, _ := json.Marshal(&jsonrpc.Error{Code: codeLimit, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"jsonrpc":"2.0","id":null,"error":%s}`, b)
}

// writeRPCErrorIDs answers a request the gateway refuses once its
// JSON-RPC is read: a JSON-RPC error with the request's id (null when it
// has none), status 200, as any answer to a request; for a batch, an
// array of one such error for each of its requests (ids).
func writeRPCErrorIDs(w http.ResponseWriter, ids []json.RawMessage, batch bool, msg string) {
	b, _ := json.Marshal(&jsonrpc.Error{Code: codeLimit, Message: msg})
	w.Header().Set("Content-Type", "application/json")
	if !batch || len(ids) == 0 {
		id := json.RawMessage("null")
		if len(ids) > 0 {
			id = ids[0]
		}
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"error":%s}`, id, b)
		return
	}
	var out bytes.Buffer
	out.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			out.WriteByte(',')
		}
		fmt.Fprintf(&out, `{"jsonrpc":"2.0","id":%s,"error":%s}`, id, b)
	}
	out.WriteByte(']')
	_, _ = w.Write(out.Bytes())
}

// codeLimit is the JSON-RPC error code of a request refused by a limit of
// the gateway (in the implementation-defined server error range).
const codeLimit = -32000

// inflight bounds a quantity in flight (calls, body bytes) without
// waiting: a request past the bound is refused at once, never queued, so a
// flood of them costs nothing that grows.
type inflight struct {
	max int64
	n   atomic.Int64
}

func (f *inflight) acquire(k int64) bool {
	if f.n.Add(k) > f.max {
		f.n.Add(-k)
		return false
	}
	return true
}

func (f *inflight) release(k int64) { f.n.Add(-k) }

// errCallsFull answers a tools/call past --max-calls-in-flight.
func (g *Gateway) errCallsFull() *jsonrpc.Error {
	return &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf(
		"tether: %d tool calls are in flight, the gateway's bound (--max-calls-in-flight); retry later", g.calls.max)}
}

// bodyChunk is the budget a request body takes ahead of its bytes: a
// client that has sent nothing holds this much, so the connections the
// gateway admits (--max-connections, 1024 by default) cannot hold the
// default budget by declaring long bodies and sending nothing. (The fast
// path's buffer takes budget for its room as it grows, readBody.)
const bodyChunk = 64 << 10

// errBodyBudget fails the read of a body past --max-request-bytes-in-flight.
var errBodyBudget = errors.New("request bodies in flight past the gateway's bound (--max-request-bytes-in-flight)")

// withBodyBudget bounds the bytes of request bodies in flight: a body is
// held whole while its call runs (the fast path forwards it as it came),
// so without a budget 80 concurrent 4 MB calls held gigabytes. A body takes
// budget as its bytes arrive, never for the length it declares: clients
// that declared 4 MiB and sent a byte held the whole budget for the body
// deadline, and every real call got 503. A body that cannot get more is
// refused at once with 503 and a JSON-RPC error; what it took comes back
// when its request ends.
func (g *Gateway) withBodyBudget(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		// One allocation for both: this runs on every call.
		b := &budgetRequest{
			body: budgetBody{ReadCloser: r.Body, budget: &g.bodies, left: r.ContentLength},
		}
		b.w = refusingWriter{ResponseWriter: w, body: &b.body, max: g.bodies.max}
		defer b.body.end()
		r.Body = &b.body
		next.ServeHTTP(&b.w, r)
	})
}

type budgetRequest struct {
	body budgetBody
	w    refusingWriter
}

// budgetBody is a request body that takes budget (bodyChunk at a time)
// before its bytes are read, and reads no more than it took.
type budgetBody struct {
	io.ReadCloser
	budget *inflight
	// left is what the body may still bring by its declared length; -1
	// if it declared none (chunked: its readers stop at the body limit).
	left      int64
	held, got int64 // budget taken, bytes read
	refused   bool  // sticky: the request is answered 503
	ended     bool  // the request ended: its budget came back
}

func (b *budgetBody) Read(p []byte) (int, error) {
	if b.refused {
		return 0, errBodyBudget
	}
	if b.ended || b.left == 0 || len(p) == 0 {
		// Past its declared end a body brings nothing (net/http holds it
		// to Content-Length): the read that sees its end takes no budget.
		return b.ReadCloser.Read(p)
	}
	if b.got == b.held {
		k := int64(bodyChunk)
		if b.left > 0 && b.left < k {
			k = b.left
		}
		if !b.budget.acquire(k) {
			b.refused = true
			return 0, errBodyBudget
		}
		b.held += k
	}
	if room := b.held - b.got; int64(len(p)) > room {
		p = p[:room]
	}
	n, err := b.ReadCloser.Read(p)
	b.got += int64(n)
	if b.left > 0 {
		b.left -= int64(n)
	}
	return n, err
}

// ahead takes budget for the next k bytes of the body (a buffer about to
// receive them, readBody), so that what the gateway holds for it stays
// within the budget; false if the budget has not that much.
func (b *budgetBody) ahead(k int64) bool {
	if b.ended || b.refused {
		return !b.refused
	}
	if b.left >= 0 && k > b.left {
		k = b.left
	}
	if need := b.got + k - b.held; need > 0 {
		if !b.budget.acquire(need) {
			b.refused = true
			return false
		}
		b.held += need
	}
	return true
}

// end gives back what the body took.
func (b *budgetBody) end() {
	b.ended = true
	b.budget.release(b.held)
	b.held = 0
}

// refusingWriter answers a request whose body was refused budget with the
// gateway's 503 and JSON-RPC error, whoever read the body (the fast path,
// the go-sdk, which would answer 400): the client is told which bound.
type refusingWriter struct {
	http.ResponseWriter
	body     *budgetBody
	max      int64
	answered bool // the refusal was written: what the handler writes is dropped
}

func (w *refusingWriter) refuse() bool {
	if w.answered {
		return true
	}
	if !w.body.refused {
		return false
	}
	w.answered = true
	h := w.Header()
	h.Del("Content-Length")
	h.Del("X-Content-Type-Options")
	// The rest of the body is not wanted: without this net/http would
	// read it (up to 256 KiB) before answering, as long as the client
	// takes to send it.
	h.Set("Connection", "close")
	writeRPCError(w.ResponseWriter, http.StatusServiceUnavailable, fmt.Sprintf(
		"tether: %d bytes of request bodies are in flight, the gateway's bound (--max-request-bytes-in-flight); retry later", w.max))
	return true
}

func (w *refusingWriter) WriteHeader(code int) {
	if !w.refuse() {
		w.ResponseWriter.WriteHeader(code)
	}
}

func (w *refusingWriter) Write(p []byte) (int, error) {
	if w.refuse() {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

func (w *refusingWriter) Flush() {
	w.refuse()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *refusingWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// DefaultStreamWriteTimeout bounds one write on a session's standalone
// stream: a client that does not read it for that long loses the stream.
const DefaultStreamWriteTimeout = 10 * time.Second

// withStreamDeadline bounds every write on a session's standalone stream
// (GET), where what backends send outside any request goes (log messages,
// resource updates, list_changed). The go-sdk writes to the response as the
// message comes, holding the stream's lock: a client that opened the
// stream and stopped reading blocked every later message's goroutine
// behind that lock, and tether grew with them (420 MB in 30 s). A write
// that does not finish within d ends the stream (the request's context is
// cancelled, so the go-sdk lets go of it); the client may open another.
func (g *Gateway) withStreamDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		sw := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d, cut: cancel}
		next.ServeHTTP(sw, r.WithContext(ctx))
		if sw.failed.Load() {
			g.log.Warn("gateway closed a session's stream: its client did not read it (it may open another)", "writeTimeout", d)
		}
	})
}

// streamWriter is a standalone stream's response with a deadline on every
// write and flush.
type streamWriter struct {
	http.ResponseWriter
	rc     *http.ResponseController
	d      time.Duration
	cut    context.CancelFunc
	failed atomic.Bool
}

func (s *streamWriter) Write(p []byte) (int, error) {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
	n, err := s.ResponseWriter.Write(p)
	s.check(err)
	return n, err
}

func (s *streamWriter) Flush() {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
	s.check(s.rc.Flush())
}

func (s *streamWriter) FlushError() error {
	_ = s.rc.SetWriteDeadline(time.Now().Add(s.d))
	err := s.rc.Flush()
	s.check(err)
	return err
}

func (s *streamWriter) check(err error) {
	if err != nil && !s.failed.Swap(true) {
		s.cut()
	}
}

func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }
