package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/exposure"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/controller/httpguard"
	"github.com/tether-mcp/tether/spec"
)

// Backend is a live upstream session: everything the gateway knows of and
// asks of one backend, in the parts its consumers use (Offer, ToolCalls,
// Requests, Subscriptions, Relays). controller/connection's *Session
// implements it (the controller asserts so at compile time); the gateway
// never looks behind it.
//
// Implementations must be comparable (a pointer, typically): the gateway
// compares backends to tell a reconnect from a filter or prefix edit.
type Backend interface {
	Offer
	ToolCalls
	Requests
	Subscriptions
	Relays
}

// Offer is what a backend offers, read when the gateway (re)builds what it
// exposes (Set). The slices and their elements are shared and read-only; a
// new list is a new slice (the gateway compares slices to skip a Set that
// changes nothing).
type Offer interface {
	Tools() []*mcp.Tool
	Prompts() []*mcp.Prompt
	Resources() []*mcp.Resource
	ResourceTemplates() []*mcp.ResourceTemplate
}

// ToolCalls is what the call path uses: a tools/call held as values (the
// go-sdk path) or as bytes (the fast path), where the call goes (for its
// span) and what its error says.
type ToolCalls interface {
	// CallTool calls a tool. The progress callback receives the backend's
	// progress notifications for this call with the backend-side token; the
	// gateway forwards them to the downstream caller with the caller's
	// original progressToken. progress is nil when the caller sent no
	// progressToken. CallTool must return promptly once ctx is done (the
	// gateway bounds every call with it).
	CallTool(ctx context.Context, p *mcp.CallToolParams,
		progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error)
	// RawProtocolVersion is the protocol version the session negotiated when
	// it can carry a call as bytes (CallToolRaw); ok is false when it cannot
	// (stdio, SSE, a session that ended): the fast path is then not taken.
	RawProtocolVersion() (version string, ok bool)
	// CallToolRaw is CallTool for a call held as bytes: params (arguments and
	// the multi-round-trip keys) are forwarded verbatim and the result comes
	// back as the backend sent it, with its isError.
	CallToolRaw(ctx context.Context, name string, params []wire.RawParam,
		progress func(*mcp.ProgressNotificationParams)) (result json.RawMessage, isError bool, err error)
	// Endpoint says where the session goes, for traces (no credentials).
	Endpoint() string
	// ServerError returns the JSON-RPC error the backend sent that err (an
	// error of a call or request) carries, redacted, so that the gateway
	// can forward it with its code; nil when err is a local failure
	// (transport, timeout, closed session).
	ServerError(err error) *jsonrpc.Error
}

// Requests are the other requests a client's request becomes upstream.
// They send the request as given and must return promptly once ctx is
// done. ctx carries the client they are made for (wire.WithCaller) where
// there is one: what the backend sends while it serves them (log messages,
// sampling, elicitation, roots) goes to that client.
type Requests interface {
	GetPrompt(ctx context.Context, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error)
	ReadResource(ctx context.Context, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error)
	Complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error)
}

// Subscriptions are the gateway's resource subscriptions upstream, one per
// URI however many clients subscribed.
type Subscriptions interface {
	Subscribe(ctx context.Context, uri string) error
	Unsubscribe(ctx context.Context, uri string) error
}

// Relays is what the backend sends by itself, for the clients.
type Relays interface {
	// SetLogLevel asks the backend for log messages from level up (nothing
	// when it declared no logging).
	SetLogLevel(ctx context.Context, level mcp.LoggingLevel) error
	// Listen sets where the backend's messages that belong to no request go
	// (nil: nowhere): resource updates, and log messages.
	Listen(l wire.Listener)
}

// Connection is one connected backend as the gateway exposes it. The
// gateway reads what the backend offers from the Backend itself.
type Connection struct {
	Name        string
	Prefix      string           // "" = names unchanged
	Filter      *spec.ToolFilter // nil = all; matched with (*spec.ToolFilter).Allows
	CallTimeout time.Duration    // <= 0: spec.DefaultCallTimeout
	Backend     Backend
}

// DefaultSessionTimeout bounds how long an idle HTTP session of the gateway
// is kept.
const DefaultSessionTimeout = time.Hour

// Options configure a Gateway.
type Options struct {
	Logger *slog.Logger
	// ObserveCall receives every tools/call outcome routed to a connection:
	// result is ok | error | timeout | canceled. It runs on the call path:
	// keep it cheap. May be nil.
	ObserveCall func(connection, result string, d time.Duration)
	// OnCollisionsChanged is called (not under a gateway lock) when the set
	// of collisions changes, so the reconciler can refresh statuses. May be nil.
	OnCollisionsChanged func()
	// Wake, when set, is asked to bring an unavailable connection back for
	// a request that needs it (reconnect on use), and returns once the
	// gateway serves that connection again, or with why not. The request
	// waits for it within the connection's call timeout. May be nil: such a
	// request is answered that the connection is not connected.
	Wake func(ctx context.Context, connection string) error
	// FirstAnswer, when set, is closed once every connection has reached
	// its first outcome (connected, failed, idle with a saved catalog,
	// waiting for a login). Until then a client's list of tools, prompts,
	// resources or templates waits for it, at most FirstAnswerTimeout
	// (firstanswer.go); once it is closed no list waits.
	// SSE serves the legacy HTTP+SSE transport at SSEPath beside /mcp
	// (sse.go).
	SSE                bool
	FirstAnswer        <-chan struct{}
	FirstAnswerTimeout time.Duration
	Version            string
	// MaxNameLength bounds an exposed tool or prompt name, in characters:
	// a longer one is not exposed (names.go). 0 means DefaultMaxNameLength.
	MaxNameLength int
	// MaxCatchAllTemplates bounds the resource templates of one connection
	// that do not fix the URI scheme: each is tried on every URI (catalog.go,
	// templateIndex); the ones past it are not exposed. 0 means
	// DefaultMaxCatchAllTemplates.
	MaxCatchAllTemplates int
	// MaxTemplatesPerPrefix bounds the resource templates of one connection
	// that share a literal prefix (catalog.go, templateIndex); the ones past
	// it are not exposed. 0 means DefaultMaxTemplatesPerPrefix.
	MaxTemplatesPerPrefix int
	// MaxRequestBodyBytes bounds an HTTP request body; 0 means 4 MiB.
	MaxRequestBodyBytes int64
	// ShutdownTimeout bounds the graceful part of ServeListener's shutdown; 0 means 5s.
	ShutdownTimeout time.Duration
	// SessionTimeout closes an HTTP session idle that long (no request in
	// flight but its standalone stream; sessionTable); its client must initialize
	// again, as MCP clients do on 404. 0 means DefaultSessionTimeout;
	// negative keeps sessions forever.
	SessionTimeout time.Duration

	// The limits on what clients send (admit.go); 0 means the default.
	//
	// RequestReadTimeout bounds the arrival of a request body once its
	// headers are in; MaxConnections bounds the open client connections
	// (at the bound the one stalled the longest is shed, connlimit.go).
	RequestReadTimeout time.Duration
	MaxConnections     int
	// AllowedOrigins admits requests by their Origin header; the zero
	// value admits loopback origins only.
	AllowedOrigins httpguard.Origins
	// MaxSessions bounds the HTTP sessions, MaxSessionsPerClient those of
	// one client (a token; every client without one is the same client):
	// past a bound the least recently used idle session is closed, or the
	// new one refused when none is idle (sessionTable).
	MaxSessions          int
	MaxSessionsPerClient int
	// MaxCallsInFlight bounds the tools/calls served at once (one past it
	// gets an MCP error at once); MaxRequestBytesInFlight the request
	// bodies held at once (503 past it).
	MaxCallsInFlight        int
	MaxRequestBytesInFlight int64
	// StreamWriteTimeout bounds a write on a session's standalone stream:
	// a client that does not read loses the stream.
	StreamWriteTimeout time.Duration
	// MaxSubscriptionsPerSession bounds the resource URIs one client
	// session holds subscriptions to at once, MaxSubscriptions the
	// distinct URIs the gateway subscribes upstream: a subscribe past
	// either gets an MCP error naming its flag (subscriptions.go).
	MaxSubscriptionsPerSession int
	MaxSubscriptions           int
}

// Call results passed to Options.ObserveCall.
const (
	ResultOK       = "ok"
	ResultError    = "error"
	ResultTimeout  = "timeout"
	ResultCanceled = "canceled"
)

// notifyBurstWindow is how long the go-sdk's failures to deliver one
// notification are gathered into one log line (sdklog.go).
const notifyBurstWindow = 500 * time.Millisecond

const (
	defaultMaxBody         = 4 << 20
	defaultShutdownTimeout = 5 * time.Second
)

// Gateway is the aggregated MCP server. All methods are safe for concurrent use.
type Gateway struct {
	log    *slog.Logger
	opts   Options
	server *mcp.Server
	// posts counts the HTTP POSTs in flight on every listener (serve.go).
	posts atomic.Int64
	// sdk is the go-sdk's streamable HTTP handler; handler puts the fast
	// path for tools/call (fastpath.go) in front of it.
	sdk     *mcp.StreamableHTTPHandler
	handler http.Handler
	// modern serves the 2026-07-28 era over HTTP, stateless (era.go).
	modern http.Handler
	// answered is set once Options.FirstAnswer is closed: lists no
	// longer wait (firstanswer.go).
	answered atomic.Bool
	// firstWaiting counts the lists waiting for it.
	firstWaiting atomic.Int64
	// sse bounds the legacy SSE sessions, sseInFlight their requests
	// in flight (sse.go).
	sse         sseSessions
	sseInFlight inflight
	// sseListens are the SSE sessions' subscriptions/listen requests in
	// flight, at most half of sseInFlight's bound (endWithSSEStream).
	sseListens atomic.Int64
	downs      downSessions
	// templateMatches counts the URI-against-template matches the catalog
	// tries (catTable.match), for tests of how that work grows.
	templateMatches atomic.Int64
	// sessions admits HTTP sessions and binds them to their client
	// (admit.go).
	sessions sessionTable
	// calls and bodies are the tools/calls and request body bytes in
	// flight, bounded (admit.go).
	calls, bodies inflight
	// relaysOut are the backend messages being sent to clients
	// (relay.go), relaysDropped those dropped past the bound.
	relaysOut     inflight
	relaysDropped atomic.Int64
	relaysWarned  atomic.Int64 // unix nanoseconds of the last WARN
	// fastCalls counts the calls the fast path answered (tests);
	// noFastPath turns it off (tests comparing it with the go-sdk path).
	fastCalls  atomic.Int64
	noFastPath atomic.Bool
	// serverInfo is the gateway's mcp.Implementation as JSON: a
	// 2026-07-28 result names its server in _meta (SEP-2575), which the
	// fast path writes itself.
	serverInfo json.RawMessage
	// eraMemo keeps what 2026-07-28 requests' _meta decoded to
	// (fastpath.go).
	eraMemo eraMemo
	// notices are the session POSTs in flight on the go-sdk path
	// (sdkgaps.go).
	notices streamNotices

	// routes is what the call path reads: an immutable snapshot, replaced on
	// every change, so a call costs one atomic load and one map lookup and
	// never waits for Set.
	routes atomic.Pointer[routeTable]

	// mu serialises changes of the exposed set: conns, claims, exposed and
	// the server's tool list move together under it. The call path never
	// takes it.
	mu    sync.Mutex
	conns map[string]*connState
	// claims lists, for every exposed name, the available connections whose
	// filtered tools include it, in claim order (claimBefore): the first
	// owns the name, the others lost it to a collision. A change
	// re-examines only the names it touches, so the cost of Set does not
	// grow with the number of connections.
	claims map[string][]claim
	// settled turns true at the first request of a client (registry.go):
	// from then on a name is kept by the connection that claimed it first
	// (seq); before it, every claim has seq 0 and a name goes to the first
	// connection by name, whatever order the servers connected in
	// (docs/contract.md §5). claimSeq numbers the claims made since.
	settled  atomic.Bool
	claimSeq uint64
	// unavailable holds the connections known but not available: what the
	// routing table's "not connected" answers are built from.
	unavailable map[string]*connState
	exposed     map[string]*exposedTool // exposed name → published definition
	// listed is the exposed tools sorted by name, as tools/list answers
	// them; nil after a change until the next tools/list (see listing).
	listed []*mcp.Tool
	// toolChanges counts tools added to or removed from the exposed set, so
	// tests can prove an identical Set changed nothing.
	toolChanges int

	// cat routes prompts, resources and templates (catalog.go); pub is
	// what the go-sdk server holds of them, changed under mu.
	cat atomic.Pointer[catTable]
	pub published

	// subs are the resource subscriptions of clients, by URI
	// (subscriptions.go).
	subs subscriptions

	levels levels // clients' logging levels (relay.go)
	rounds rounds // backend calls of 2026-07-28 clients across rounds (rounds.go)

	// evictions are the closes of sessions chosen to make room, run off
	// the new client's request; renewals the reconnected backends'
	// subscription renewals (subscriptions.go). Serving and Close wait
	// for them (serve.go, tasks).
	evictions, renewals tasks // evictions: maxEvictionsInFlight at once
	// closeSession closes a session chosen to make room or idle: the
	// go-sdk's Close, which waits for the session's handlers (tests slow
	// it down).
	closeSession func(*mcp.ServerSession)
	// sweeps runs the session table's idle sweeper and the subscriptions'
	// pruning once however many listeners serve the gateway (serve.go).
	sweeps sweeps
}

// claim is one connection's bid for an exposed name.
type claim struct {
	st  *connState
	et  *exposedTool
	seq uint64 // when st first claimed the name (0: before settled)
}

// claimBefore orders the claims on one name: the earlier claim first, then
// connection name.
func claimBefore(aSeq uint64, aName string, bSeq uint64, bName string) int {
	return exposure.ClaimBefore(aSeq, aName, bSeq, bName)
}

// nextSeqLocked numbers a new claim: 0 until the gateway is settled.
func (g *Gateway) nextSeqLocked() uint64 {
	if !g.settled.Load() {
		return 0
	}
	g.claimSeq++
	return g.claimSeq
}

// settle ends the start-up: names claimed from now on rank after those
// claimed so far.
func (g *Gateway) settle() {
	if !g.settled.Load() {
		g.settled.Store(true)
	}
}

// connState is the gateway's record of one connection.
type connState struct {
	name      string
	prefix    string
	available bool
	reason    string // why it is not available
	filter    *spec.ToolFilter
	timeout   time.Duration
	tools     []*mcp.Tool
	backend   Backend
	// candidates are the tools after the filter, in backend order; rebuilt
	// only when tools, filter or prefix change.
	candidates []*exposedTool
	// claimed are the candidates registered in Gateway.claims: those of
	// its last tool list, kept while it is not available (SetUnavailable).
	claimed []*exposedTool
	// seqs is when this connection first claimed each name it claims: kept
	// across its Sets and while it is not available (a list_changed or a
	// reconnect keeps the names it still lists), forgotten with the claim.
	seqs map[string]uint64
	// toolWarnings are the tools not exposed for their names (names.go),
	// as of the last tool list it served.
	toolWarnings []spec.NameWarning
	// target is where this connection's routes lead; replaced when the
	// backend, its life or the call timeout change.
	target *target
	// life ends when this backend stops serving calls (replaced, unavailable,
	// removed); its cause is the error in-flight calls answer.
	life     context.Context
	endLife  context.CancelCauseFunc
	exposedN int
	lost     []spec.ToolCollision

	// The backend's prompts, resources and templates as last Set (see
	// catalog.go), kept while it is not available (its claims hold), and
	// the catalog names it lost to others.
	prompts   []*mcp.Prompt
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	lostOther []spec.ToolCollision
	// catSeqs is seqs for the catalog ("p:", "r:", "t:" + key); catWarnings
	// the prompts and templates the gateway does not serve as offered.
	catSeqs     map[string]uint64
	catWarnings []spec.NameWarning
	// exposedCat counts the prompts, resources and templates this
	// connection exposes (it owns their names).
	exposedCat struct{ prompts, resources, templates int }
}

// New returns a gateway with no connections. Its server declares the tools
// capability with listChanged from the start: clients that see no tools
// capability at initialize never listen for tools/list_changed.
func New(opts Options) *Gateway {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.MaxRequestBodyBytes <= 0 {
		opts.MaxRequestBodyBytes = defaultMaxBody
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = defaultShutdownTimeout
	}
	if opts.MaxNameLength <= 0 {
		opts.MaxNameLength = DefaultMaxNameLength
	}
	if opts.MaxCatchAllTemplates <= 0 {
		opts.MaxCatchAllTemplates = DefaultMaxCatchAllTemplates
	}
	if opts.MaxTemplatesPerPrefix <= 0 {
		opts.MaxTemplatesPerPrefix = DefaultMaxTemplatesPerPrefix
	}
	if opts.RequestReadTimeout <= 0 {
		opts.RequestReadTimeout = DefaultRequestReadTimeout
	}
	if opts.MaxConnections <= 0 {
		opts.MaxConnections = DefaultMaxConnections
	}
	if opts.StreamWriteTimeout <= 0 {
		opts.StreamWriteTimeout = DefaultStreamWriteTimeout
	}
	if opts.MaxCallsInFlight <= 0 {
		opts.MaxCallsInFlight = DefaultMaxCallsInFlight
	}
	if opts.MaxRequestBytesInFlight <= 0 {
		opts.MaxRequestBytesInFlight = DefaultMaxRequestBytesInFlight
	}
	if opts.MaxSessions <= 0 {
		opts.MaxSessions = DefaultMaxSessions
	}
	if opts.MaxSessionsPerClient <= 0 {
		opts.MaxSessionsPerClient = DefaultMaxSessionsPerClient
	}
	if opts.FirstAnswerTimeout <= 0 {
		opts.FirstAnswerTimeout = DefaultFirstAnswerTimeout
	}
	if opts.MaxSubscriptionsPerSession <= 0 {
		opts.MaxSubscriptionsPerSession = DefaultMaxSubscriptionsPerSession
	}
	if opts.MaxSubscriptions <= 0 {
		opts.MaxSubscriptions = DefaultMaxSubscriptions
	}
	g := &Gateway{
		log:         log,
		opts:        opts,
		conns:       make(map[string]*connState),
		claims:      make(map[string][]claim),
		unavailable: make(map[string]*connState),
		exposed:     make(map[string]*exposedTool),
	}
	g.sessions.max, g.sessions.perClient = opts.MaxSessions, opts.MaxSessionsPerClient
	switch {
	case opts.SessionTimeout == 0:
		g.sessions.idle = DefaultSessionTimeout
	case opts.SessionTimeout > 0:
		g.sessions.idle = opts.SessionTimeout
	}
	g.sse.max, g.sse.perClient = opts.MaxSessions, opts.MaxSessionsPerClient
	g.sseInFlight.max = int64(opts.MaxConnections)
	g.calls.max, g.bodies.max = int64(opts.MaxCallsInFlight), opts.MaxRequestBytesInFlight
	g.rounds.max = opts.MaxCallsInFlight
	g.rounds.maxKeptBytes = roundResultsKeptBytes
	g.closeSession = func(ss *mcp.ServerSession) { _ = ss.Close() }
	g.evictions.max = maxEvictionsInFlight
	g.relaysOut.max = maxRelaysOut
	g.subs.init(opts.MaxSubscriptionsPerSession, opts.MaxSubscriptions)
	g.routes.Store(&routeTable{})
	g.cat.Store(&catTable{})
	// The SDK logs every session start and end at INFO; tether's log keeps
	// its own lifecycle lines and only the SDK's warnings and errors.
	sdkLog := slog.New(newNotifyFailures(minLevel{h: log.Handler(), min: slog.LevelWarn}, notifyBurstWindow)).With("component", "mcp-sdk")
	impl := &mcp.Implementation{Name: "tether", Version: opts.Version}
	g.serverInfo, _ = json.Marshal(impl) // two strings: cannot fail
	g.server = mcp.NewServer(impl, &mcp.ServerOptions{
		Logger: sdkLog,
		// Declared from the start, also while nothing is offered: clients
		// that see no capability at initialize never listen for its
		// list_changed.
		Capabilities: &mcp.ServerCapabilities{
			Tools:       &mcp.ToolCapabilities{ListChanged: true},
			Prompts:     &mcp.PromptCapabilities{ListChanged: true},
			Resources:   &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Logging:     &mcp.LoggingCapabilities{},
			Completions: &mcp.CompletionCapabilities{},
		},
		InitializedHandler: g.sessionInitialized,
		CompletionHandler:  g.complete,
		SubscribeHandler:   g.subscribe,
		UnsubscribeHandler: g.unsubscribe,
	})
	g.server.AddReceivingMiddleware(g.endWithSSEStream, g.endWithPOST, g.waitFirstAnswer, g.interceptDown, g.interceptSetLevel, g.serveTools)
	srv := g.server
	httpOpts := &mcp.StreamableHTTPOptions{
		Logger:              sdkLog,
		MaxRequestBodyBytes: opts.MaxRequestBodyBytes,
		// No SessionTimeout: the go-sdk's idle timer sees only the
		// requests that reach it, not the fast path's calls, and would
		// close a session in use. The session table closes idle sessions
		// instead (sessionTable, closeIdleSessions), from every request.
	}
	g.sdk = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, httpOpts)
	g.modern = newModernHandler(srv, httpOpts)
	g.handler = g.withFastPath(g.watchPOSTs(byEra(g.sdk, g.modern)))
	return g
}

// Server returns the one server shared by every gateway session.
func (g *Gateway) Server() *mcp.Server { return g.server }

// Set adds or replaces a connected backend. It is idempotent and cheap: only
// tools whose published definition changed are added or removed, so a Set
// that changes nothing visible sends no tools/list_changed, and its cost
// depends on the connection's own tools, not on how many connections the
// gateway serves. Replacing the Backend (a reconnect) fails calls still in
// flight on the old one.
func (g *Gateway) Set(c Connection) {
	if c.Backend == nil {
		// A programming error upstream; answering calls with a clear error
		// beats a nil dereference on the call path.
		g.log.Error("gateway: Set without a backend session", "connection", c.Name)
		g.SetUnavailable(c.Name, c.Prefix, "no backend session")
		return
	}
	timeout := c.CallTimeout
	if timeout <= 0 {
		timeout = spec.DefaultCallTimeout
	}
	g.mu.Lock()
	st := g.conns[c.Name]
	if st == nil {
		st = &connState{name: c.Name}
		g.conns[c.Name] = st
	}
	tools := c.Backend.Tools()
	newBackend := !st.available || !sameBackend(st.backend, c.Backend)
	newTools := !st.available || st.prefix != c.Prefix || !reflect.DeepEqual(st.filter, c.Filter) || !slices.Equal(st.tools, tools)
	newCatalog := catalogChanged(st, c.Backend)
	if !newBackend && !newTools && !newCatalog && st.timeout == timeout {
		// What a reconcile of a steady connection sends: nothing to do.
		g.mu.Unlock()
		return
	}
	touched := g.releaseLocked(st, nil)
	if newBackend {
		st.end(fmt.Errorf("connection %s reconnected while the call was in flight", c.Name))
		st.life, st.endLife = context.WithCancelCause(context.Background())
	}
	if newTools {
		var warnings []spec.NameWarning
		st.candidates, warnings = candidates(c, tools, g.opts.MaxNameLength)
		g.warnNamesLocked(st.name, st.toolWarnings, warnings)
		st.toolWarnings = warnings
	}
	st.available = true
	st.reason = ""
	st.prefix = c.Prefix
	st.filter = cloneFilter(c.Filter) // compared on the next Set: keep our own
	st.timeout = timeout
	st.tools = tools
	st.backend = c.Backend
	b := st.backend
	var levelSet chan struct{}
	var awaited <-chan struct{}
	if newBackend {
		levelSet = make(chan struct{})
		awaited = levelSet
	} else if st.target != nil {
		// The same backend with new tools: the level asked for it at its
		// (re)connect may still be on its way.
		awaited = st.target.levelSet
	}
	st.target = &target{name: st.name, backend: routed{ToolCalls: b, Requests: b, Subscriptions: b, Relays: b}, timeout: st.timeout, life: st.life, levelSet: awaited}
	touched = g.claimLocked(st, touched)
	// Only a connection that was unavailable leaves the "not connected"
	// answers; a new one was never among them.
	_, wasDown := g.unavailable[st.name]
	delete(g.unavailable, st.name)
	changed := g.applyLocked(st, touched, wasDown)
	hadCatalog := st.hasCatalog() || st.lostOther != nil
	st.prompts, st.resources, st.templates = c.Backend.Prompts(), c.Backend.Resources(), c.Backend.ResourceTemplates()
	if hadCatalog || st.hasCatalog() {
		// Routes of the catalog point at st.target, which is new.
		changed = g.applyCatalogLocked() || changed
	}
	t := st.target
	g.mu.Unlock()
	if newBackend {
		c.Backend.Listen(connListener{g: g, name: c.Name})
		g.resubscribe(st, t)
		g.levels.mu.Lock()
		level := g.levels.sent
		g.levels.mu.Unlock()
		if level != "" {
			// A call sent meanwhile waits (awaitLevel): the level the
			// clients set before the backend (re)connected is in force for
			// their first call to it, not only for the calls after.
			go func() {
				defer close(levelSet)
				// A client's change meanwhile (sendLevel) asks this
				// backend as well: askLevel ends with the level asked last.
				g.askLevel(t, level)
			}()
		} else {
			close(levelSet)
		}
	}
	g.notifyCollisions(changed)
}

// SetUnavailable records that the connection exists but is not Connected:
// its tools leave tools/list, calls in flight on it fail at once, and a call
// to one of its former tools (or any name under prefix+"_") answers
// "connection <name> is not connected: <reason>" instead of "unknown tool".
//
// Its claims outlast its session (docs/contract.md §5): the names of its
// last lists stay its own, answered as above (or woken on use), and no
// other connection takes them meanwhile; a prefix other than the one its
// names were exposed with gives them up. Its tool filter is kept; see
// SetUnavailableFiltered.
func (g *Gateway) SetUnavailable(name, prefix, reason string) {
	g.setUnavailable(name, prefix, nil, true, reason)
}

// SetUnavailableFiltered is SetUnavailable with the connection's current
// tool filter: the claims on tools it no longer allows are given up, as a
// prefix change gives up all of them. The reconciler calls it again when
// the spec changes while the connection is away.
func (g *Gateway) SetUnavailableFiltered(name, prefix string, filter *spec.ToolFilter, reason string) {
	g.setUnavailable(name, prefix, filter, false, reason)
}

func (g *Gateway) setUnavailable(name, prefix string, filter *spec.ToolFilter, keepFilter bool, reason string) {
	g.mu.Lock()
	st := g.conns[name]
	if st == nil {
		st = &connState{name: name}
		g.conns[name] = st
	}
	if st.backend != nil {
		st.backend.Listen(nil)
	}
	// While its manifest declares it, a name its last lists offered stays
	// its own. Its name warnings are kept too (not shown while it is
	// away), so a reconnect does not log them again.
	var touched []string
	switch {
	case prefix != st.prefix:
		// The names it held are not the ones it would expose.
		touched = g.releaseLocked(st, nil)
		st.seqs = nil
		// Prompts are prefixed too; resource URIs and templates are not.
		st.prompts = nil
		maps.DeleteFunc(st.catSeqs, func(k string, _ uint64) bool { return strings.HasPrefix(k, "p:") })
	case !keepFilter && !reflect.DeepEqual(st.filter, filter):
		// Re-register the claims the filter still allows; claimLocked
		// keeps their places and forgets the others'.
		claimed := st.claimed
		touched = g.releaseLocked(st, nil)
		st.candidates = slices.DeleteFunc(slices.Clone(claimed), func(et *exposedTool) bool { return !filter.Allows(et.orig) })
		touched = g.claimLocked(st, touched)
	default:
		for _, et := range st.claimed {
			touched = append(touched, et.tool.Name)
		}
	}
	if !keepFilter {
		st.filter = cloneFilter(filter)
	}
	st.end(fmt.Errorf("connection %s is not connected: %s", name, reason))
	st.available = false
	st.reason = reason
	st.prefix = prefix
	st.backend = nil
	st.tools = nil
	st.target = nil
	g.unavailable[name] = st
	changed := g.applyLocked(st, touched, true)
	if st.hasCatalog() || st.lostOther != nil {
		// Its catalog stays offered, as its last lists had it.
		changed = g.applyCatalogLocked() || changed
	}
	g.mu.Unlock()
	g.notifyCollisions(changed)
}

// Remove forgets a connection whose manifest is gone.
func (g *Gateway) Remove(name string) {
	g.mu.Lock()
	st := g.conns[name]
	if st == nil {
		g.mu.Unlock()
		return
	}
	st.end(fmt.Errorf("connection %s was removed", name))
	if st.backend != nil {
		st.backend.Listen(nil)
	}
	touched := g.releaseLocked(st, nil)
	delete(g.conns, name)
	_, wasDown := g.unavailable[name]
	delete(g.unavailable, name)
	st.available = false
	changed := g.applyLocked(st, touched, wasDown)
	if st.hasCatalog() || st.lostOther != nil {
		st.prompts, st.resources, st.templates = nil, nil, nil
		changed = g.applyCatalogLocked() || changed
	}
	g.mu.Unlock()
	g.dropSubscriptions(st)
	g.notifyCollisions(changed)
}

// Exposed returns how many tools the connection has on the gateway after
// filters and collisions; 0 for an unknown or unavailable connection.
func (g *Gateway) Exposed(name string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.conns[name]; st != nil {
		return st.exposedN
	}
	return 0
}

// Exposure is what the gateway serves of one connection: how many of its
// tools (after the filters), prompts, resources and resource templates it
// exposes, and the names it lost to other connections (as Collisions
// names them).
type Exposure struct {
	Tools, Prompts, Resources, ResourceTemplates int
	Collisions                                   []spec.ToolCollision
	// NameWarnings are what the gateway does not serve as the backend
	// offers it (names.go, catalog.go), sorted by name.
	NameWarnings []spec.NameWarning
}

// Exposure returns what the gateway serves of the connection, all of it
// read at one moment; zero for an unknown or unavailable connection.
func (g *Gateway) Exposure(name string) Exposure {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.conns[name]
	if st == nil {
		return Exposure{}
	}
	return Exposure{
		Tools: st.exposedN, Prompts: st.exposedCat.prompts,
		Resources: st.exposedCat.resources, ResourceTemplates: st.exposedCat.templates,
		Collisions: st.collisionsLocked(), NameWarnings: st.nameWarningsLocked(),
	}
}

// Collisions returns the exposed names this connection lost to another
// connection, sorted by name; nil when it lost none. Tools are named as
// exposed; prompts as "prompt:<exposed name>", resources as
// "resource:<uri>" and templates as "resourceTemplate:<template>".
func (g *Gateway) Collisions(name string) []spec.ToolCollision {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.conns[name]; st != nil {
		return st.collisionsLocked()
	}
	return nil
}

func (st *connState) nameWarningsLocked() []spec.NameWarning {
	if !st.available || len(st.toolWarnings)+len(st.catWarnings) == 0 {
		return nil
	}
	out := append(slices.Clone(st.toolWarnings), st.catWarnings...)
	slices.SortFunc(out, func(a, b spec.NameWarning) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

// warnNamesLocked logs the name warnings of a connection that are new: one
// line per change, with how many and the first few (a server can offer
// 100,000 names; the status file lists them, cut: docs/contract.md §5a).
func (g *Gateway) warnNamesLocked(conn string, old, cur []spec.NameWarning) {
	seen := make(map[spec.NameWarning]struct{}, len(old))
	for _, w := range old {
		seen[w] = struct{}{}
	}
	var first []string
	n := 0
	for _, w := range cur {
		if _, ok := seen[w]; ok {
			continue
		}
		if n++; len(first) < shownNameWarnings {
			first = append(first, w.Name+": "+w.Warning)
		}
	}
	if n > 0 {
		g.log.Warn("gateway does not serve names as the server offers them", "connection", conn, "count", n, "first", first)
	}
}

// shownNameWarnings is how many new name warnings a log line names.
const shownNameWarnings = 3

func (st *connState) collisionsLocked() []spec.ToolCollision {
	if len(st.lost)+len(st.lostOther) == 0 {
		return nil
	}
	out := append(slices.Clone(st.lost), st.lostOther...)
	slices.SortFunc(out, compareCollisions)
	return out
}

func compareCollisions(a, b spec.ToolCollision) int {
	if c := cmp.Compare(a.Tool, b.Tool); c != 0 {
		return c
	}
	if c := cmp.Compare(a.Connection, b.Connection); c != 0 {
		return c
	}
	// A template can be both: kept against a connection that offers it
	// too, and lost to an earlier, wider template of that connection.
	switch {
	case a.Kept == b.Kept:
		return 0
	case a.Kept:
		return -1
	}
	return 1
}

func (g *Gateway) notifyCollisions(changed bool) {
	if changed && g.opts.OnCollisionsChanged != nil {
		g.opts.OnCollisionsChanged()
	}
}

func (st *connState) end(cause error) {
	if st.endLife != nil {
		st.endLife(cause)
		st.endLife = nil
	}
}

// sameBackend reports whether a and b are the same session, without
// panicking on a non-comparable implementation (which then counts as new).
func sameBackend(a, b Backend) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	ta, tb := reflect.TypeOf(a), reflect.TypeOf(b)
	return ta == tb && ta.Comparable() && a == b
}

func cloneFilter(f *spec.ToolFilter) *spec.ToolFilter {
	if f == nil {
		return nil
	}
	return &spec.ToolFilter{Allow: slices.Clone(f.Allow), Deny: slices.Clone(f.Deny)}
}

// candidates lists the connection's tools that pass its filter, as they
// would be published, and the warnings of those whose exposed name must
// not reach agents (nameProblem), which are left out. A backend that lists
// one name twice gets it once.
func candidates(c Connection, tools []*mcp.Tool, maxNameLen int) ([]*exposedTool, []spec.NameWarning) {
	out := make([]*exposedTool, 0, len(tools))
	seen := make(map[string]bool, len(tools))
	var warnings []spec.NameWarning
	for _, t := range tools {
		if t == nil || seen[t.Name] || !c.Filter.Allows(t.Name) {
			continue
		}
		seen[t.Name] = true
		name := exposedName(c.Prefix, t.Name)
		if p := nameProblem(t.Name, name, maxNameLen); p != "" {
			warnings = append(warnings, nameWarning("tool:", name, p))
			continue
		}
		out = append(out, exposeTool(t, name))
	}
	return out, warnings
}

// ownedLocked lists the exposed names st currently owns.
func (g *Gateway) ownedLocked(st *connState) []string {
	var names []string
	for _, et := range st.claimed {
		if cl := g.claims[et.tool.Name]; len(cl) > 0 && cl[0].st == st {
			names = append(names, et.tool.Name)
		}
	}
	return names
}

// claimLocked registers st's candidates as its claims and appends their
// names to touched. A name st claimed before keeps its place; a new one
// goes after every claim made so far (once settled).
func (g *Gateway) claimLocked(st *connState, touched []string) []string {
	seqs := make(map[string]uint64, len(st.candidates))
	for _, et := range st.candidates {
		name := et.tool.Name
		seq, ok := st.seqs[name]
		if !ok {
			seq = g.nextSeqLocked()
		}
		seqs[name] = seq
		cl := g.claims[name]
		i, _ := slices.BinarySearchFunc(cl, claim{st: st, seq: seq}, func(c, x claim) int {
			return claimBefore(c.seq, c.st.name, x.seq, x.st.name)
		})
		g.claims[name] = slices.Insert(cl, i, claim{st: st, et: et, seq: seq})
		touched = append(touched, name)
	}
	st.claimed = st.candidates
	st.seqs = seqs
	return touched
}

// releaseLocked withdraws st's claims and appends their names to touched.
func (g *Gateway) releaseLocked(st *connState, touched []string) []string {
	for _, et := range st.claimed {
		name := et.tool.Name
		cl := slices.DeleteFunc(g.claims[name], func(c claim) bool { return c.st == st })
		if len(cl) == 0 {
			delete(g.claims, name)
		} else {
			g.claims[name] = cl
		}
		touched = append(touched, name)
	}
	st.claimed = nil
	return touched
}

// applyLocked brings the routing table and the server's tool list in line
// with the claims on the touched names, and recomputes the collisions of
// st and of every connection claiming one of those names. A name goes to
// the first claim (claimBefore): the connection that served it first keeps
// it, also while it is not available (the name then has no live route and
// is answered as down), and a loser takes over when the winner's claim
// ends (Remove, a prefix or filter change, its list without the name).
// downChanged says the set of unavailable connections changed, so the
// table's "not connected" answers are rebuilt. It reports whether any
// connection's collisions changed.
func (g *Gateway) applyLocked(st *connState, touched []string, downChanged bool) (collisionsChanged bool) {
	slices.Sort(touched)
	touched = slices.Compact(touched)

	cur := g.routes.Load()
	edit := editRoutes(cur)
	affected := []*connState{st}
	var remove []string
	var add []claim
	for _, name := range touched {
		cl := g.claims[name]
		// A name that was or becomes an unavailable owner's changes the
		// "not connected" answers.
		downChanged = downChanged || cur.down[name] != nil
		if len(cl) == 0 || !cl[0].st.available {
			// Nobody claims it, or its owner is away and keeps it: no
			// live route, not listed; a call is answered about the owner
			// (downLocked).
			edit.remove(name)
			if _, ok := g.exposed[name]; ok {
				remove = append(remove, name)
			}
			if len(cl) > 0 {
				downChanged = true
				for _, c := range cl {
					affected = append(affected, c.st)
				}
			}
			continue
		}
		owner := cl[0]
		edit.set(name, route{target: owner.st.target, tool: owner.et.orig, bindsHeaders: owner.et.bindsHeaders})
		if cur, ok := g.exposed[name]; !ok || cur.def != owner.et.def {
			add = append(add, owner)
		}
		for _, c := range cl {
			affected = append(affected, c.st)
		}
	}
	if downChanged {
		edit.next.down, edit.next.downPrefixes = g.downLocked()
	}

	slices.SortFunc(affected, func(a, b *connState) int { return cmp.Compare(a.name, b.name) })
	for _, c := range slices.Compact(affected) {
		var lost []spec.ToolCollision
		exposedN := 0
		for _, et := range c.claimed {
			if !c.available {
				break // it exposes nothing while away; its claims still count for the others
			}
			cl := g.claims[et.tool.Name]
			if owner := cl[0].st; owner == c {
				exposedN++
				for _, other := range cl[1:] {
					lost = append(lost, spec.ToolCollision{Tool: et.tool.Name, Connection: other.st.name, Kept: true})
				}
			} else {
				lost = append(lost, spec.ToolCollision{Tool: et.tool.Name, Connection: owner.name})
			}
		}
		slices.SortFunc(lost, compareCollisions)
		if !slices.Equal(lost, c.lost) {
			collisionsChanged = true
			for _, l := range lost {
				if !l.Kept && !slices.Contains(c.lost, l) {
					g.log.Warn("gateway tool name collision: tool not exposed", "connection", c.name, "tool", l.Tool, "exposedBy", l.Connection)
				}
			}
		}
		c.lost, c.exposedN = lost, exposedN
	}

	// Publish routes before touching the server: a client that sees a new
	// tool can already call it, and a call racing a removal finds no route
	// and answers a clear error instead of reaching a stale backend.
	g.routes.Store(edit.next)
	if len(remove)+len(add) == 0 {
		return collisionsChanged
	}
	removed := make([]*exposedTool, 0, len(remove)+len(add))
	for _, name := range remove {
		removed = append(removed, g.exposed[name])
		delete(g.exposed, name)
		g.toolChanges++
	}
	for _, c := range add {
		if cur, ok := g.exposed[c.et.tool.Name]; ok {
			removed = append(removed, cur) // replaced
		}
		g.exposed[c.et.tool.Name] = c.et
		g.toolChanges++
	}
	g.publishLocked(removed, add)
	g.log.Debug("gateway tool set changed", "added", len(add), "removed", len(remove), "exposed", len(g.exposed))
	return collisionsChanged
}

// downLocked builds the "not connected" answers of the routing table from
// the unavailable connections, in connection name order.
func (g *Gateway) downLocked() (map[string]*downTarget, []downPrefix) {
	var down map[string]*downTarget
	var prefixes []downPrefix
	names := make([]string, 0, len(g.unavailable))
	for n := range g.unavailable {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		st := g.unavailable[n]
		dt := &downTarget{name: st.name, reason: st.reason, timeout: st.timeout}
		for _, tn := range g.ownedLocked(st) {
			if down == nil {
				down = make(map[string]*downTarget)
			}
			down[tn] = dt
		}
		if st.prefix != "" {
			prefixes = append(prefixes, downPrefix{prefix: st.prefix + "_", target: dt})
		}
	}
	return down, prefixes
}

// addTool registers a tool that binds parameters to headers with the go-sdk
// server (see registry.go). The go-sdk validates the annotations; should it
// reject them (panic), the tool is published with a minimal definition rather
// than dropped, and the log says so.
func (g *Gateway) addTool(conn string, et *exposedTool) {
	err := tryAddTool(g.server, et.tool, g.callTool)
	if err == nil {
		return
	}
	g.log.Warn("gateway published a tool with a minimal definition: the SDK rejected the backend's",
		"connection", conn, "tool", et.tool.Name, "error", err)
	et.tool = minimalTool(et.tool)
	g.listed = nil
	if err := tryAddTool(g.server, et.tool, g.callTool); err != nil {
		g.log.Error("gateway could not publish a tool", "connection", conn, "tool", et.tool.Name, "error", err)
	}
}

func tryAddTool(s *mcp.Server, t *mcp.Tool, h mcp.ToolHandler) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s.AddTool(t, h)
	return nil
}

// minLevel drops records below min; used to keep the SDK's INFO chatter out.
type minLevel struct {
	h   slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.h.Enabled(ctx, l)
}
func (m minLevel) Handle(ctx context.Context, r slog.Record) error { return m.h.Handle(ctx, r) }
func (m minLevel) WithAttrs(as []slog.Attr) slog.Handler {
	return minLevel{h: m.h.WithAttrs(as), min: m.min}
}
func (m minLevel) WithGroup(n string) slog.Handler {
	return minLevel{h: m.h.WithGroup(n), min: m.min}
}
