package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/boundedfile"
)

// Path is where ServeListener mounts the MCP endpoint.
const Path = "/mcp"

// Handler returns the streamable HTTP handler of the shared server, stateful
// (sessions carry list_changed and cancellation) for the classic protocol and
// stateless for 2026-07-28 requests (era.go), with DNS-rebinding protection
// on for loopback and request bodies bounded, the fast path for
// tools/call in front (fastpath.go), and a classic request ended with its
// POST (watchPOSTs, endWithPOST). It does no authentication, and
// checks no Origin, admits no sessions, connections or bodies against
// their limits and closes no idle session (admit.go): ServeListener adds
// those.
func (g *Gateway) Handler() http.Handler { return g.handler }

// Listen binds addr for ServeListener, which serves the gateway at /mcp
// until ctx is done, then shuts down within Options.ShutdownTimeout. A
// non-loopback addr (which includes an empty host, i.e. every interface)
// is refused unless authTokenFile names a file holding a bearer token;
// with a token file, every request must carry "Authorization: Bearer
// <token>". A caller
// that binds first knows the gateway accepts before it starts anything
// else: tether run writes no status, and starts no server, before its
// gateway listens, and an address in use fails the run before either.
func Listen(ctx context.Context, addr, authTokenFile string) (net.Listener, error) {
	loopback, err := isLoopbackAddr(ctx, addr)
	if err != nil {
		return nil, err
	}
	if !loopback && authTokenFile == "" {
		return nil, fmt.Errorf("gateway: refusing to listen on non-loopback address %q without an auth token file", addr)
	}
	// Read the token before listening so that a bad file fails fast.
	if authTokenFile != "" {
		if _, err := readToken(authTokenFile); err != nil {
			return nil, err
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	return ln, nil
}

// ServeLocal serves the gateway at /mcp, with every check and limit Serve
// applies but the bearer token, on a local listener that only tether's
// user can reach (the owner's control socket, controller/owner: its file
// mode or ACL is its authentication), and routes beside it. It closes ln.
func (g *Gateway) ServeLocal(ctx context.Context, ln net.Listener, routes map[string]http.Handler) error {
	return g.serve(ctx, ln, nil, routes)
}

// ServeConn serves one MCP session framed as over stdio (newline-delimited
// JSON-RPC) on rwc, until the peer closes it or ctx is done: a bridge's
// session on the control socket, which carries its client's stdio bytes
// as they are, so that it is served as a direct --stdio client is.
func (g *Gateway) ServeConn(ctx context.Context, rwc io.ReadWriteCloser) error {
	return g.serveTransport(ctx, &mcp.IOTransport{Reader: rwc, Writer: rwc}, "bridge")
}

// ServeListener serves the gateway on ln (Listen's, or one the caller
// opened: tests, socket activation) until ctx is done. It closes ln. The
// loopback rule applies to the address ln is bound to.
func (g *Gateway) ServeListener(ctx context.Context, ln net.Listener, authTokenFile string) error {
	var token *bearerToken
	if authTokenFile != "" {
		var err error
		if token, err = loadBearerToken(authTokenFile, g.log); err != nil {
			ln.Close()
			return err
		}
	}
	return g.serve(ctx, ln, token, nil)
}

// serve serves the gateway on ln. routes, when not nil, marks ln as local
// (ServeLocal) and adds its handlers beside /mcp.
func (g *Gateway) serve(ctx context.Context, ln net.Listener, token *bearerToken, routes map[string]http.Handler) error {
	if routes == nil && !isLoopbackNetAddr(ln.Addr()) && token == nil {
		ln.Close()
		return fmt.Errorf("gateway: refusing to serve on non-loopback address %s without an auth token file", ln.Addr())
	}
	// The fast path cancels its own calls when their client goes away;
	// what reaches the go-sdk is named for endWithPOST (a session's POST)
	// or cleared of a client's name (every other request).
	h := g.withFastPath(g.watchPOSTs(g.endListens(ctx, byEra(g.sdk, g.modern))))
	h = g.withBodyBudget(g.admitSessions(clientOf(token), g.withStreamDeadline(g.opts.StreamWriteTimeout, h)))
	if token != nil {
		h = requireBearer(token, h)
		watched := make(chan struct{})
		defer func() { <-watched }()
		wctx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go func() { defer close(watched); token.watch(wctx, tokenResync) }()
	}
	// g.posts counts the requests in flight on every listener (tools/call
	// among them), so that shutdown lets their answers out before any
	// listener's shutdown ends the sessions, which are the server's, not
	// one listener's (the TCP gateway and the control socket share them).
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			g.posts.Add(1)
			defer g.posts.Add(-1)
		}
		inner.ServeHTTP(w, r)
	})
	// Outermost: a foreign Origin or Host is refused before anything else
	// runs, and every body is bounded in time whoever sends it.
	h = withBodyDeadline(g.opts.RequestReadTimeout, g.opts.AllowedOrigins.Handler(h))
	mux := http.NewServeMux()
	mux.Handle(Path, h)
	for p, rh := range routes {
		mux.Handle(p, rh)
	}
	sseStop, stopSSE := context.WithCancel(context.Background())
	defer stopSSE()
	if g.opts.SSE {
		mux.Handle(SSEPath, g.legacySSE(token, sseStop))
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// Idle keep-alive connections are closed; a streaming response is
		// not idle, so SSE streams are unaffected.
		IdleTimeout:    2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(g.log.Handler(), slog.LevelDebug),
	}
	// Subscriptions of clients that went away are dropped, and idle
	// sessions closed, by one sweeper of each for every listener; this
	// listener lets go of them when its shutdown begins.
	stopSweeps := sync.OnceFunc(g.sweeps.start(g))
	defer stopSweeps()
	defer context.AfterFunc(ctx, stopSweeps)()
	// At the bound, the connection stalled the longest makes room for a new
	// one; when all are serving, the new one is closed at once rather than
	// left to wait in the backlog (connlimit.go).
	lim := newConnLimiter(g.opts.MaxConnections)
	srv.ConnState = lim.connState
	srv.ConnContext = connContext
	ln = &limitListener{Listener: ln, l: lim, warn: func(shed, refused int64) {
		g.log.Warn("gateway at its connection bound: closed stalled connections to admit new ones, and new ones when none was stalled (--max-connections)",
			"shed", shed, "refused", refused, "max", lim.max)
	}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	g.log.Info("gateway listening", "addr", ln.Addr().String(), "path", Path, "auth", token != nil, "sse", g.opts.SSE)

	select {
	case err := <-served:
		return fmt.Errorf("gateway: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), g.opts.ShutdownTimeout)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- srv.Shutdown(sctx) }()
	// Calls in flight end on the same signal: the controller closes every
	// backend, and a call whose backend closes answers an MCP error. Give
	// those answers up to half the bound to reach their callers; ending the
	// sessions first would cut them off ("request terminated without
	// response").
	// An SSE session's requests are served after their POST was answered
	// 202, and answered on its stream: they count too.
	drainBy := time.Now().Add(g.opts.ShutdownTimeout / 2)
	for g.posts.Load()+g.sseInFlight.n.Load() > 0 && time.Now().Before(drainBy) {
		time.Sleep(10 * time.Millisecond)
	}
	// Shutdown waits for active connections, and a session's standalone SSE
	// stream stays active until its session ends: end the HTTP sessions so
	// that clients see the stream close and shutdown completes; the legacy
	// SSE streams too.
	stopSSE()
	g.closeHTTPSessions()
	err := <-shut
	if err != nil {
		srv.Close()
	}
	<-served // Serve returned ErrServerClosed once Shutdown began
	// A session initialized while the first close ran is closed now, and
	// the closes of sessions evicted for new ones finish; then the
	// goroutines that watch the sessions for the fast path end.
	g.closeHTTPSessions()
	g.evictions.wait()
	g.downs.wg.Wait()
	g.log.Info("gateway stopped", "addr", ln.Addr().String())
	if err != nil {
		return fmt.Errorf("gateway: shutdown: %w", err)
	}
	return nil
}

// Close waits for what the gateway runs on its own beside its listeners:
// the closes of sessions evicted for new ones, and the renewals of a
// reconnected backend's subscriptions (each bounded by its connection's
// callTimeout and the backend's life, which ends when the controller
// closes it). Nothing new of either starts once Close was called: an
// eviction then closes its sessions on the request's path, and a renewal
// is not made. Call it once the listeners were served and the backends
// closed.
func (g *Gateway) Close() {
	g.evictions.close()
	g.renewals.close()
}

// tasks owns goroutines that must end before their owner stops: wait
// waits for those running, close also refuses new ones. A WaitGroup
// cannot do the same: Add at zero may not race a Wait, and evictions (of
// any listener's requests) and renewals (of the controller's Set) start
// while a listener's shutdown waits.
type tasks struct {
	mu     sync.Mutex
	n      int
	max    int           // goroutines at once, 0 for no bound
	idle   chan struct{} // closed when n drops to 0; nil while n is 0
	closed bool
}

// goRun runs f in a goroutine of t's; false, and f not run, once t is
// closed or while max of them run.
func (t *tasks) goRun(f func()) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || (t.max > 0 && t.n >= t.max) {
		return false
	}
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	go func() {
		defer t.done()
		f()
	}()
	return true
}

func (t *tasks) done() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n--; t.n == 0 {
		close(t.idle)
		t.idle = nil
	}
}

// wait returns once no goroutine of t's runs.
func (t *tasks) wait() {
	for {
		t.mu.Lock()
		idle := t.idle
		t.mu.Unlock()
		if idle == nil {
			return
		}
		<-idle
	}
}

// close refuses new goroutines, then waits for those running.
func (t *tasks) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
	t.wait()
}

// sweeps runs the gateway's sweepers, one of each, while at least one
// listener serves: the session table and the subscriptions are the
// gateway's, not one listener's, and serving TCP and the control socket
// ran two of each over them.
type sweeps struct {
	mu      sync.Mutex
	users   int
	stop    context.CancelFunc
	stopped chan struct{}
	running atomic.Int32 // sweepers running (tests)
}

// start runs the sweepers if no listener runs them yet, and returns what
// the listener calls when it stops: the last one stops them and waits.
func (s *sweeps) start(g *Gateway) (release func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users++; s.users == 1 {
		ctx, stop := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		s.stop, s.stopped = stop, stopped
		// Counted before they start: whoever sees a listener serve sees
		// its sweepers counted.
		s.running.Add(1)
		if g.sessions.idle > 0 {
			s.running.Add(1)
		}
		go s.run(ctx, g, stopped)
	}
	return func() {
		s.mu.Lock()
		s.users--
		last := s.users == 0
		stop, stopped := s.stop, s.stopped
		s.mu.Unlock()
		if last {
			stop()
			<-stopped
		}
	}
}

// run sweeps until ctx is done: subscriptions of clients that went away
// without unsubscribing are dropped now and then (pruneSubscriptions), and
// sessions idle for the session timeout closed (closeIdleSessions).
func (s *sweeps) run(ctx context.Context, g *Gateway, stopped chan struct{}) {
	defer close(stopped)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		defer s.running.Add(-1)
		tick := time.NewTicker(subscriptionPrune)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				sweepSDK(ctx, g.server, g.pruneSubscriptions(ctx), g.log)
			}
		}
	})
	if g.sessions.idle > 0 {
		wg.Go(func() {
			defer s.running.Add(-1)
			g.closeIdleSessions(ctx)
		})
	}
}

// closeHTTPSessions ends the server's streamable HTTP sessions; a stdio
// session has no ID and is left to ServeStdio.
func (g *Gateway) closeHTTPSessions() {
	for ss := range g.server.Sessions() {
		if ss.ID() != "" {
			ss.Close()
		}
	}
}

// ServeStdio serves one session on os.Stdin/os.Stdout until the client
// closes stdin or ctx is done. Nothing else may write to stdout meanwhile:
// logs belong on stderr.
func (g *Gateway) ServeStdio(ctx context.Context) error {
	return g.serveTransport(ctx, &mcp.StdioTransport{}, "stdio")
}

func (g *Gateway) serveTransport(ctx context.Context, t mcp.Transport, what string) error {
	ss, err := g.server.Connect(ctx, t, nil)
	if err != nil {
		return fmt.Errorf("gateway: %w", err)
	}
	g.log.Info("gateway serving on " + what)
	done := make(chan error, 1)
	go func() { done <- ss.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		ss.Close()
		err = <-done
	}
	g.log.Info("gateway " + what + " session ended")
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, mcp.ErrConnectionClosed) && ctx.Err() == nil {
		return fmt.Errorf("gateway: %s session: %w", what, err)
	}
	return nil
}

// subscriptionPrune is how often the subscriptions of clients that went
// away are looked for.
const subscriptionPrune = 30 * time.Second

// tokenResync is how often the auth token file is read again even without
// an event.
const tokenResync = 30 * time.Second

// maxTokenFileSize bounds the auth token file (docs/contract.md, Limits
// on files): a token is a line; a FIFO or /dev/zero must not hold start-up.
const maxTokenFileSize = 64 << 10

// readToken reads a bearer token file. Errors name the file, never its content.
func readToken(file string) ([]byte, error) {
	b, _, err := boundedfile.Read(file, maxTokenFileSize)
	if err != nil {
		return nil, fmt.Errorf("gateway: auth token file: %w", err)
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, fmt.Errorf("gateway: auth token file %s is empty", file)
	}
	return b, nil
}

// isLoopbackAddr reports whether every address host:port can bind to is a
// loopback one. An empty or unspecified host means every interface.
func isLoopbackAddr(ctx context.Context, addr string) (bool, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false, fmt.Errorf("gateway: listen address %q: %w", addr, err)
	}
	if host == "" {
		return false, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		return ip.IsLoopback(), nil
	}
	ips, err := net.DefaultResolver.LookupIPAddr(ctx, host)
	if err != nil {
		return false, fmt.Errorf("gateway: listen address %q: %w", addr, err)
	}
	for _, ip := range ips {
		if !ip.IP.IsLoopback() {
			return false, nil
		}
	}
	return len(ips) > 0, nil
}

func isLoopbackNetAddr(a net.Addr) bool {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.IsLoopback()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
