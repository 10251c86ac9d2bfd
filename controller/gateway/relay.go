package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// What a backend sends a client, relayed: log messages, and the requests a
// backend makes while it serves a request of the gateway's (sampling,
// elicitation, roots). The gateway hands each backend request the client it
// is made for (wire.Caller, in its context); the backend session relates
// what its server sends to it (see controller/connection). What belongs to
// no request goes to the connection's listener: resource updates to the
// clients subscribed, log messages to every client whose level admits them.

// logLevels orders the MCP logging levels, most verbose first.
var logLevels = []mcp.LoggingLevel{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"}

func levelRank(l mcp.LoggingLevel) int {
	if i := slices.Index(logLevels, l); i >= 0 {
		return i
	}
	return -1
}

// levels tracks each client's logging level (logging/setLevel, or a
// 2026-07-28 request's _meta) and the most verbose of them, which every
// backend is asked for. A client is a *mcp.ServerSession, or the
// *eraClient of a 2026-07-28 call on the fast path, which has no session
// (its request forgets it when it ends, as its session's end would).
type levels struct {
	mu   sync.Mutex
	m    map[any]mcp.LoggingLevel
	sent mcp.LoggingLevel // what the backends were last asked for; "" none
}

// level returns a client's level; "" when it set none (then it gets no log
// messages, as the go-sdk server does; the fast path, which writes them
// without the go-sdk, needs the level to do the same).
func (g *Gateway) level(client any) mcp.LoggingLevel {
	g.levels.mu.Lock()
	defer g.levels.mu.Unlock()
	return g.levels.m[client]
}

// interceptSetLevel records a client's logging/setLevel (the go-sdk keeps
// the session's own), and asks every backend for the most verbose level a
// client wants.
func (g *Gateway) interceptSetLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "logging/setLevel" {
			// A client of the 2026-07-28 protocol sends its level with
			// each request instead.
			var meta mcp.Meta
			var ss *mcp.ServerSession
			switch r := req.(type) {
			case *mcp.CallToolRequest:
				if r.Params != nil {
					meta, ss = r.Params.Meta, r.Session
				}
			case *mcp.GetPromptRequest:
				if r.Params != nil {
					meta, ss = r.Params.Meta, r.Session
				}
			case *mcp.ReadResourceRequest:
				if r.Params != nil {
					meta, ss = r.Params.Meta, r.Session
				}
			}
			if ss != nil {
				if l, ok := meta[mcp.MetaKeyLogLevel].(string); ok && levelRank(mcp.LoggingLevel(l)) >= 0 && g.level(ss) != mcp.LoggingLevel(l) {
					g.setLevel(ss, mcp.LoggingLevel(l))
				}
			}
			return next(ctx, method, req)
		}
		res, err := next(ctx, method, req)
		if err != nil {
			return res, err
		}
		r, ok := req.(*mcp.ServerRequest[*mcp.SetLoggingLevelParams])
		if !ok || r.Params == nil || r.Session == nil {
			return res, err
		}
		g.setLevel(r.Session, r.Params.Level)
		return res, err
	}
}

// setLevel records a client's level and asks the backends for the level
// the clients now want.
func (g *Gateway) setLevel(client any, l mcp.LoggingLevel) {
	g.levels.mu.Lock()
	if g.levels.m == nil {
		g.levels.m = map[any]mcp.LoggingLevel{}
	}
	g.levels.m[client] = l
	g.levels.mu.Unlock()
	g.sendLevel()
}

// forgetLevel forgets the level of a client that has gone. The backends
// keep the level they were asked for until the clients' next change, as
// they do when a session ends.
func (g *Gateway) forgetLevel(client any) {
	g.levels.mu.Lock()
	delete(g.levels.m, client)
	g.levels.mu.Unlock()
}

// wantedLevelLocked is the most verbose level of the live client sessions
// (live) and fast calls. The caller holds levels.mu.
func (g *Gateway) wantedLevelLocked(live map[*mcp.ServerSession]bool) mcp.LoggingLevel {
	var want mcp.LoggingLevel
	for c, l := range g.levels.m {
		if ss, ok := c.(*mcp.ServerSession); ok && !live[ss] {
			delete(g.levels.m, c) // a session that ended
			continue
		}
		if r := levelRank(l); r >= 0 && (want == "" || r < levelRank(want)) {
			want = l
		}
	}
	return want
}

// sendLevel asks every available backend for the wanted level when it
// changed, and waits for their answers (each bounded by its callTimeout),
// so that the level is in force when the client's setLevel is answered.
//
// The level is decided and recorded as sent under one hold of levels.mu:
// decided before and recorded after, two changes at once could record the
// older decision last, and every ask (askLevel) then ended at a level no
// client wanted. The live sessions are read under it too: read before, a
// session that began and recorded its level meanwhile was taken for one
// that ended, and its level forgotten. A session records its level only
// once the go-sdk server holds it, so one read after sees it.
func (g *Gateway) sendLevel() {
	g.levels.mu.Lock()
	live := map[*mcp.ServerSession]bool{}
	for ss := range g.server.Sessions() { // the go-sdk server's lock, a leaf
		live[ss] = true
	}
	want := g.wantedLevelLocked(live)
	changed := want != g.levels.sent
	g.levels.sent = want
	g.levels.mu.Unlock()
	if !changed || want == "" {
		return
	}
	g.mu.Lock()
	var targets []*target
	for _, st := range g.conns {
		if st.available && st.target != nil {
			targets = append(targets, st.target)
		}
	}
	g.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() { g.askLevel(t, want) })
	}
	wg.Wait()
}

// askLevel asks one backend for level, and again for the level the clients
// want now while that changed meanwhile: two asks of one backend (two
// clients' changes at once, a reconnect's and a client's) are answered in
// no set order, and the older level answered last would stay in force
// until the next change. The ask that began after every other was answered
// carries the level decided last.
func (g *Gateway) askLevel(t *target, level mcp.LoggingLevel) {
	for {
		g.setBackendLevel(t, level)
		g.levels.mu.Lock()
		now := g.levels.sent
		g.levels.mu.Unlock()
		if now == level || now == "" || t.life.Err() != nil {
			return
		}
		level = now
	}
}

// setBackendLevel asks one backend for level.
func (g *Gateway) setBackendLevel(t *target, level mcp.LoggingLevel) {
	ctx, done := t.callContext(context.Background())
	defer done()
	if err := t.backend.SetLogLevel(ctx, level); err != nil && t.life.Err() == nil {
		g.log.Debug("gateway could not set a backend's logging level", "connection", t.name, "level", level, "error", err)
	}
}

// broadcastLog sends a backend's log message that belongs to no request to
// every client session; the go-sdk drops it for a session whose level does
// not admit it.
func (g *Gateway) broadcastLog(p *mcp.LoggingMessageParams) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for ss := range g.server.Sessions() {
		_ = ss.Log(ctx, p)
	}
}

// connListener receives one connection's backend events.
type connListener struct {
	g    *Gateway
	name string
}

func (l connListener) ResourceUpdated(p *mcp.ResourceUpdatedNotificationParams) {
	l.g.relayOut(func() { l.g.resourceUpdated(l.name, p) })
}

func (l connListener) Log(p *mcp.LoggingMessageParams) { l.g.relayOut(func() { l.g.broadcastLog(p) }) }

// relayOut sends a backend's message that belongs to no request to the
// clients, on a goroutine of its own so that the backend's session never
// waits for them. At most maxRelaysOut run at once: a client that stops
// reading holds a send for up to the stream write timeout, and a backend
// that sends faster than that would pile up goroutines and their messages
// without bound. Past it the message is dropped, with one WARN a minute.
func (g *Gateway) relayOut(send func()) {
	if !g.relaysOut.acquire(1) {
		if n := g.relaysDropped.Add(1); n == 1 || time.Since(time.Unix(0, g.relaysWarned.Load())) > time.Minute {
			g.relaysWarned.Store(time.Now().UnixNano())
			g.log.Warn("gateway dropped backend messages for clients: clients are not reading them as fast as backends send", "dropped", n)
		}
		return
	}
	go func() {
		defer g.relaysOut.release(1)
		send()
	}()
}

// maxRelaysOut bounds the backend messages being sent to clients at once
// (relayOut).
const maxRelaysOut = 64

// caller is the client of a request the gateway sends a backend
// (tools/call, prompts/get, resources/read), on either path: the one relay
// of what the backend sends that client while it serves the request. The
// paths differ only in how it reaches the client (clientStream).
type caller struct {
	g  *Gateway
	ss *mcp.ServerSession
	// era is the client of a 2026-07-28 call on the fast path, which has
	// no session (ss nil): what it declared comes with the request.
	era *eraClient
	out clientStream
}

// eraClient is a 2026-07-28 client as one request of its declares it
// (_meta, SEP-2575). Each request is a client of its own, as each is a
// session of its own on the go-sdk's stateless path.
type eraClient struct {
	caps *mcp.ClientCapabilities
}

// clientStream writes on the response stream of one client request: the
// go-sdk's (sdkStream), or the fast call's own (fastStream, fastpath.go).
// A backend's request goes out there and waits for the client's answer.
type clientStream interface {
	// log writes a notifications/message if the client's level admits it.
	log(p *mcp.LoggingMessageParams)
	createMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error)
	elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	listRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
}

func (c *caller) Client() any {
	if c.ss == nil {
		return c.era
	}
	return c.ss
}

func (c *caller) Log(p *mcp.LoggingMessageParams) { c.out.log(p) }

func (c *caller) LogLevel() mcp.LoggingLevel { return c.g.level(c.Client()) }

func (c *caller) Capabilities() *mcp.ClientCapabilities {
	if c.ss == nil {
		return c.era.caps
	}
	return clientCaps(c.ss)
}

func (c *caller) CreateMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	return c.out.createMessage(ctx, p)
}

func (c *caller) Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return c.out.elicit(ctx, p)
}

func (c *caller) ListRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	if p == nil {
		p = &mcp.ListRootsParams{}
	}
	return c.out.listRoots(ctx, p)
}

// withCaller returns ctx carrying the client session ss as the Caller of
// the requests sent upstream for it, through the go-sdk; extra is the
// request's.
func (g *Gateway) withCaller(ctx context.Context, ss *mcp.ServerSession, extra *mcp.RequestExtra) context.Context {
	if ss == nil {
		return ctx
	}
	return wire.WithCaller(ctx, &caller{g: g, ss: ss, out: sdkStream{ss: ss, ctx: ctx, notices: g.notices.of(extra)}})
}

// sdkStream reaches a client through its go-sdk session, with the
// request's context, so on the request's own stream.
type sdkStream struct {
	ss  *mcp.ServerSession
	ctx context.Context // the client's request
	// notices counts the cancellations written on the request's stream;
	// nil where the request has none of its own (sdkgaps.go).
	notices *cancelNotices
}

// The go-sdk drops a message the session's level does not admit.
func (s sdkStream) log(p *mcp.LoggingMessageParams) { _ = s.ss.Log(s.ctx, p) }

func (s sdkStream) createMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	return relayed(s, ctx, func(ctx context.Context) (*mcp.CreateMessageWithToolsResult, error) {
		return s.ss.CreateMessageWithTools(ctx, p)
	})
}

func (s sdkStream) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return relayed(s, ctx, func(ctx context.Context) (*mcp.ElicitResult, error) { return s.ss.Elicit(ctx, p) })
}

func (s sdkStream) listRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return relayed(s, ctx, func(ctx context.Context) (*mcp.ListRootsResult, error) { return s.ss.ListRoots(ctx, p) })
}

// relayed runs a request relayed to the client; when it is given up (its
// ctx ended), it returns once the go-sdk's notice of that reached the
// request's stream (see sdkgaps.go).
func relayed[R any](s sdkStream, ctx context.Context, send func(context.Context) (R, error)) (R, error) {
	res, err := send(ctx)
	if err != nil && ctx.Err() != nil && s.notices != nil {
		s.notices.await(s.notices.owe(), noticeWait)
	}
	return res, err
}

// clientCaps is what a client session declared at initialize.
func clientCaps(ss *mcp.ServerSession) *mcp.ClientCapabilities {
	if ip := ss.InitializeParams(); ip != nil && ip.Capabilities != nil {
		return ip.Capabilities
	}
	return &mcp.ClientCapabilities{}
}
