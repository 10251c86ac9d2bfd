package connection

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/sandbox"
	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/spec"
)

// Request is everything needed to open one session.
type Request struct {
	Name        string     // connection name (logs, errors)
	Spec        *spec.Spec // validated and defaulted
	ManifestDir string     // directory of the manifest file (relative commands)
	Logger      *slog.Logger
	// OnToolsChanged is called, from a goroutine the session owns and never
	// from the session's reader, after the server sent a list_changed
	// notification (tools, prompts or resources), the session refreshed its
	// lists and one actually differs. Bursts are coalesced. It must not call
	// Close (Close waits for that goroutine): hand the news to a queue.
	OnToolsChanged func()
	// OnEnd is called once the session has ended, by itself or by Close,
	// after Done is closed. It runs on the goroutine that ended the session
	// (possibly Close's caller): it must not block or call Close.
	OnEnd func()
	// Environ reads valueFrom.env (default os.Getenv). The base environment
	// of a stdio child always comes from the process environment.
	Environ func(string) string
	// Secrets reads valueFrom.secretKeyRef; nil outside Kubernetes mode,
	// where a secretKeyRef is an error that says so.
	Secrets SecretReader
	// ClientVersion is sent as clientInfo.version (default "dev").
	ClientVersion string
	// OAuth serves spec.http.oauth (oauth.go).
	OAuth OAuth
	// MaxMessageBytes bounds one message the server sends: a stdio frame,
	// an HTTP response body, one server-sent event (limit.go). 0 means
	// DefaultMaxMessageBytes.
	MaxMessageBytes int64
}

// ErrClosed is the cause of a session ended by Close.
var ErrClosed = errors.New("session closed")

// Timeouts the session applies on its own.
const (
	// refreshTimeout bounds a tools/list refresh after list_changed.
	refreshTimeout = 30 * time.Second
	// refreshCoalesce absorbs a burst of list_changed notifications.
	refreshCoalesce = 50 * time.Millisecond
	// progressLinger is how long a call that got its result still accepts
	// progress sent before that result (see progressRoute.linger).
	progressLinger = 25 * time.Millisecond
	// exitWait is how long a broken stdio transport waits for the child's
	// exit status before reporting the break without it.
	exitWait = time.Second
	// stderrAfterExit is how long the description of a child that exited
	// waits for its stderr to reach EOF (a grandchild that holds it open
	// is not waited for longer).
	stderrAfterExit = 100 * time.Millisecond
)

// protocol2026 is the first protocol version without ping.
const protocol2026 = "2026-07-28"

// Session is one live MCP client session. All methods are safe for
// concurrent use. Always Close a session, also after Done: Close waits for
// the goroutines the session owns.
type Session struct {
	conn           *Connector // what it shares with the other sessions
	name           string
	log            *slog.Logger
	red            *redactor
	transport      string // "stdio", "streamable" or "sse"
	endpoint       string // for traces: URL or command, redacted (tracing.EndpointOf)
	onToolsChanged func()
	onEnd          func()

	client *mcp.Client
	cs     *mcp.ClientSession
	proc   *process // nil for HTTP
	seen   liveness // when the server last answered a request, and sent progress for one
	limit  *messageLimit
	// forgotten: the server answered a request of this session that it
	// does not know the session (HTTP; see notSent).
	forgotten atomic.Bool

	// For streamable HTTP: the go-sdk transport's client (manifest headers,
	// the message limit) and endpoint, for requests sent beside the go-sdk.
	httpClient *http.Client
	httpURL    string
	// ownConn: the session runs on tether's own transport (streamable.go),
	// whose Close tells connClosed; connGone, that it closed (under
	// refreshMu), with connCause.
	ownConn   bool
	connGone  bool
	connCause error

	// ctx is the session's lifetime: every upstream call derives from it and
	// end cancels it, so that Close never waits on a call (the go-sdk's Close
	// waits for in-flight calls).
	ctx    context.Context
	cancel context.CancelCauseFunc

	// rawSend is the go-sdk's sending handler beneath its client-side list
	// cache; listMeta is the _meta of the first server/discover or
	// tools/list the go-sdk sent (the 2026-07-28 request triple), reused by
	// probes and tool lists sent beneath it.
	rawSend  mcp.MethodHandler
	listMeta atomic.Pointer[mcp.Meta]
	// answeredInitialize, for HTTP, tells the endpoint's version memory
	// the version the server answered initialize with (Connect).
	answeredInitialize func(version string)

	catalog  atomic.Pointer[catalog] // prompts, resources, templates (relay.go)
	listener listenerBox             // where resource updates and unrelated logs go
	flights  flights                 // requests in flight that carry a downstream client
	order    *order                  // keeps a request's log messages ahead of its answer (order.go)
	logs     logQueues               // log messages on their way to each downstream client (logqueue.go)

	toolsMu  sync.Mutex
	tools    []*mcp.Tool       // replaced, never modified
	toolsSum [sha256.Size]byte // of the list's JSON: a real change or a repeated notification
	sdkTools sdkTools          // what the go-sdk's client holds of them (lists.go)
	// sdkToolsCleared counts the tools/list_changed the go-sdk saw;
	// sdkToolsSent the tools/list its client sent (captureSend), not
	// those it answered from its store.
	sdkToolsCleared atomic.Uint64
	sdkToolsSent    atomic.Uint64
	// sdkToolsClearing counts them as they reach the go-sdk, before it
	// clears its pages; sdkToolsWake (toolsMu) wakes the calls that wait
	// for the tools to be listed again (awaitToolHeaders).
	sdkToolsClearing atomic.Uint64
	sdkToolsWake     chan struct{}

	// A tools/list refresh runs on a goroutine started on demand: an idle
	// session holds none. refreshing means one runs (or is due once the
	// session is live); again, that a list_changed came in since it began.
	refreshMu               sync.Mutex
	live, ended             bool
	refreshing, refreshMore bool
	ending                  bool // transportDied started end

	fatal chan error // stdio: a call saw the transport die, capacity 1

	progressSeq atomic.Uint64
	routes      sync.Map // upstream progress token (string) -> *progressRoute

	endOnce  sync.Once
	done     chan struct{}
	errMu    sync.Mutex
	err      error // why the session ended, redacted; nil while alive
	closeErr error
	wg       sync.WaitGroup
	// deletes are the DELETEs of connections closed during the handshake,
	// sent after it (streamableTransport.deletes): the session's end
	// waits for them.
	deletes sync.WaitGroup
	// pacedAt is when the last WARN said that the server asked to resume
	// an event stream sooner than tether does (streamsPaced), in Unix
	// nanoseconds.
	pacedAt atomic.Int64
}

// Connect opens one session and lists the server's tools, prompts,
// resources and templates (sent together). ctx bounds the
// whole attempt. On failure nothing is left running; the error is redacted,
// wraps its cause and, for stdio, carries the child's facts (see spec.ProcessOf).
func (c *Connector) Connect(ctx context.Context, req Request) (*Session, error) {
	sp := req.Spec
	if sp == nil {
		return nil, errors.New("connection: no spec")
	}
	if n := btoi(sp.Stdio != nil) + btoi(sp.HTTP != nil) + btoi(sp.Container != nil); n != 1 {
		return nil, errors.New("connection: exactly one of stdio, http and container must be set")
	}
	environ := req.Environ
	if environ == nil {
		environ = os.Getenv
	}
	var envVals, headerVals, fileVals []namedValue
	var err error
	src := valueSources{environ: environ, baseDir: req.ManifestDir, secrets: req.Secrets}
	switch {
	case sp.Stdio != nil:
		envVals, err = resolveValues(ctx, "stdio.env", sp.Stdio.Env, src)
	case sp.Container != nil:
		envVals, err = resolveValues(ctx, "container.env", sp.Container.Env, src)
		if err == nil {
			fileVals, err = resolveValues(ctx, "container.secretFiles", sp.Container.SecretFiles, src)
		}
	default:
		headerVals, err = resolveValues(ctx, "http.headers", sp.HTTP.Headers, src)
	}
	if err != nil {
		return nil, err // names entries and sources, never values
	}
	red := newRedactor(append(slices.Clip(envVals), fileVals...), headerVals)
	if sp.HTTP != nil || (sp.Container != nil && sp.Container.Port != 0) {
		// OAuth tokens, learnt as they come (oauth.go), and the session's
		// ids, from the first answer that carries one (http.go): whoever
		// holds one can use the session on the server, and the go-sdk puts
		// it in its errors ("session ID: …").
		red.live = &liveSecrets{}
	}
	lifetime, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	s := &Session{
		conn:           c,
		name:           req.Name,
		endpoint:       red.String(tracing.EndpointOf(sp)),
		log:            newRedactingLogger(req.Logger, red),
		red:            red,
		onToolsChanged: req.OnToolsChanged,
		onEnd:          req.OnEnd,
		ctx:            lifetime,
		cancel:         cancel,
		fatal:          make(chan error, 1),
		done:           make(chan struct{}),
		order:          newOrder(),
	}
	s.logs.log = s.log
	s.order.logs = &s.logs
	maxMessage := req.MaxMessageBytes
	if maxMessage <= 0 {
		maxMessage = DefaultMaxMessageBytes
	}
	// Progress proves life only while an answer is this recent (liveness).
	s.seen.window = sp.CallTimeoutDuration()
	stdioFrames := sp.Stdio != nil || (sp.Container != nil && sp.Container.Port == 0)
	s.limit = &messageLimit{conn: req.Name, max: maxMessage, stdio: stdioFrames, onHit: s.limitHit}
	// Until Connect returns, the caller's ctx bounds what runs on the
	// lifetime ctx too (the SSE stream, the child's handshake).
	unbind := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer unbind()

	version := req.ClientVersion
	if version == "" {
		version = "dev"
	}
	opts := &mcp.ClientOptions{
		Logger: s.log,
		// Both handlers run on the session's reader: never block there.
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			s.sdkToolsCleared.Add(1) // the go-sdk cleared its tool pages first (sdkTools)
			s.toolsChangedUpstream()
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			s.routeProgress(r.Params)
		},
	}
	// Capabilities, and the handlers that relay to the gateway's clients.
	s.clientHandlers(opts)
	s.client = mcp.NewClient(&mcp.Implementation{Name: "tether", Version: version}, opts)
	// markAnswers beneath captureSend: probes sent through rawSend count
	// answers too.
	s.client.AddSendingMiddleware(s.captureSend, s.markAnswers)
	s.client.AddReceivingMiddleware(s.relayRoots, s.swallowMarks, s.countToolsClearing)

	var transport mcp.Transport
	switch {
	case sp.Stdio != nil:
		s.transport = "stdio"
		transport, err = s.startStdio(sp.Stdio, req.ManifestDir, envVals)
	case sp.Container != nil:
		s.transport = spec.TransportContainer
		transport, err = s.startContainer(ctx, sp.Container, req.ManifestDir, envVals, fileVals)
	default:
		transport, s.transport, err = httpTransport(c.httpBase, sp.HTTP, headerVals, lifetime, s.limit, &s.forgotten, red.live, s.newResumeGate())
		if err == nil && sp.HTTP.OAuth != nil {
			err = s.useOAuth(ctx, req, src, transport) // oauth.go
		}
		if err == nil && s.transport == spec.TransportSSE {
			// A legacy SSE server answers on its one event stream, which
			// no request's context reads: the marker goes before the
			// answer, as on stdio (order.go).
			transport = &orderedTransport{Transport: transport}
		}
		if st, ok := transport.(*mcp.StreamableClientTransport); ok {
			s.httpClient, s.httpURL = st.HTTPClient, st.Endpoint
		}
	}
	if err != nil {
		if s.proc != nil {
			// A container whose server never came up: stop the runtime's
			// command (which removes the container) and say how it ended.
			return nil, s.failConnect(err)
		}
		cancel(err)
		return nil, red.Err(err)
	}
	var sessOpts *mcp.ClientSessionOptions
	learned := func(string, bool) {}
	// sdk is the go-sdk's transport while tether's own carries the
	// session (own): a server that turns out to speak 2026-07-28 is
	// connected again on it.
	var sdk mcp.Transport
	var own *streamableTransport
	if sp.HTTP != nil {
		var v string
		v, learned = c.versions.versionFor(ctx, s.transport+" "+sp.HTTP.URL)
		if v != "" && v < protocol2026 {
			sessOpts = &mcp.ClientSessionOptions{ProtocolVersion: v}
		}
		// Tether frames a classic session itself (streamable.go), from the
		// first connect to an endpoint on: the go-sdk asks server/discover
		// there, a classic server refuses it and the go-sdk falls back to
		// initialize on the same connection. A server known to speak
		// 2026-07-28 keeps the go-sdk's transport, and so do an OAuth
		// session (the go-sdk's transport runs the authorization flow on a
		// 401 or 403 and adds the token to each request) and an SSE one
		// (another protocol).
		if st, ok := transport.(*mcp.StreamableClientTransport); ok && st.OAuthHandler == nil && v < protocol2026 {
			sdk = transport
			own = &streamableTransport{client: st.HTTPClient, url: st.Endpoint, onClose: s.connClosed, deletes: &s.deletes, wait: s.waitToResume}
			transport = own
			s.ownConn = true
		}
		// The server agreed to a version once it answered initialize: the
		// connects that wait to learn it go on then, not after the rest of
		// this handshake (initialized, the go-sdk's standalone stream,
		// which it opens before Connect returns, and the lists): two or
		// three round trips each, while up to a hundred connects to the
		// endpoint wait (at 1,000 connections to 10 servers on a busy
		// machine, learners took 0.7-3.6 s, past versionLearnWait).
		s.answeredInitialize = func(version string) { learned(version, false) }
	}
	// The handshake takes one of its endpoint's slots until the first
	// lists are answered (see DefaultHandshakesPerEndpoint).
	release := func() {}
	if sp.HTTP != nil {
		if release, err = c.handshakes.acquire(ctx, s.transport+" "+sp.HTTP.URL, c.perEndpoint); err != nil {
			// The server was not asked: what the endpoint's version memory
			// knows still holds (a learner leaves the learning to others).
			learned("", false)
			return nil, s.failConnect(s.ctxErr(ctx, err))
		}
		defer release() // also on a panic; released early below
	}
	if own != nil {
		// A connection the go-sdk closes inside its Connect sends its
		// DELETE after it, not in the handshake slot.
		own.handshaking.Store(true)
	}
	cs, err := s.client.Connect(ctx, transport, sessOpts)
	if own != nil {
		own.handshaking.Store(false)
	}
	if err != nil && own.modernServer() {
		// The server accepted server/discover: a 2026-07-28 server, whose
		// session tether's transport does not carry. Connect again on the
		// go-sdk's transport at once, in the same handshake slot: one more
		// round trip for a first connect to such an endpoint. The memory
		// learns it now, so that connects waiting for it go straight there
		// (a learner's first word counts; a failure or a classic session
		// below still drops it: settle).
		learned(protocol2026, false)
		s.ownConn = false
		// A session id the server gave with its discover answer was ended
		// by the first connection's DELETE; its 404 is no word on the
		// session that follows (notSent).
		s.forgotten.Store(false)
		cs, err = s.client.Connect(ctx, sdk, nil)
	}
	if err != nil {
		release()
		learned("", true)
		return nil, s.failConnect(fmt.Errorf("initialize: %w", s.ctxErr(ctx, err)))
	}
	s.cs = cs
	if id := cs.ID(); id != "" && s.red.live != nil {
		s.red.live.keep(id)
	}
	learned(s.Server().ProtocolVersion, false)
	// The first lists go out together: a connect takes one round trip
	// after initialize, not one per list.
	err = together(ctx,
		func(ctx context.Context) error { _, err := s.refreshTools(ctx); return err },
		func(ctx context.Context) error { _, err := s.refreshCatalog(ctx); return err })
	release()
	if err != nil {
		return nil, s.failConnect(err)
	}
	if !unbind() {
		return nil, s.failConnect(fmt.Errorf("connect: %w", context.Cause(ctx)))
	}
	switch {
	case s.proc != nil:
		s.wg.Add(1)
		go s.watch()
	case !s.ownConn:
		s.wg.Add(1)
		go s.watchHTTP()
	}
	s.goLive()
	info := s.Server()
	s.log.Debug("session open", "transport", s.transport, "ownTransport", s.ownConn, "server", info.Name,
		"serverVersion", info.Version, "protocol", info.ProtocolVersion, "tools", len(s.Tools()))
	return s, nil
}

// startStdio resolves the command and starts the child; the returned
// transport speaks to it over its stdin/stdout.
func (s *Session) startStdio(st *spec.StdioSpec, manifestDir string, envVals []namedValue) (mcp.Transport, error) {
	env := childEnv(os.Getenv, envVals)
	path, err := resolveCommand(st.Command, envValue(env, "PATH"), manifestDir)
	if err != nil {
		return nil, err
	}
	if err := checkArgs(path, st.Args); err != nil {
		return nil, err
	}
	dir := st.WorkingDir
	if dir != "" && !filepath.IsAbs(dir) {
		dir = filepath.Join(manifestDir, dir)
	}
	var conf *confinement
	policy, origin := st.Sandbox, ""
	if policy == nil {
		policy, origin = s.conn.defaultSandbox, s.conn.defaultSandboxOrigin
	}
	if policy != nil {
		if conf, env, err = confine(s.name, policy, origin, s.conn.sandboxTemp, s.conn.stateDir, path, st.Command, st.Args, dir, manifestDir, s.conn.manifestTree(), env); err != nil {
			return nil, err
		}
	}
	tail := newStderrTail(s.red)
	proc, err := startProcess(st.Command, path, st.Args, dir, env, tail, s.log, s.conn.ledger, conf)
	if err != nil && conf != nil && conf.plan.Namespace && namespaceRefused(err) {
		if !conf.plan.BestEffort {
			conf.cleanup()
			return nil, &sandbox.UnsupportedError{Missing: []string{"a network namespace of its own: the kernel refused an unprivileged user namespace (" + err.Error() + ")"}}
		}
		if err = conf.withoutNamespace(sandbox.DetectKernel().ABI); err == nil {
			proc, err = startProcess(st.Command, path, st.Args, dir, env, tail, s.log, s.conn.ledger, conf)
		}
	}
	if err != nil {
		conf.cleanup()
		return nil, fmt.Errorf("starting %s: %w", st.Command, err)
	}
	s.proc = proc
	// The go-sdk bounds a frame itself; its error is read as the limit's
	// (messageLimit.explain).
	return &orderedTransport{Transport: &mcp.IOTransport{Reader: proc.stdout, Writer: proc.stdin, MaxLineLength: int(s.limit.max)}}, nil
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// failConnect cleans up after a failed Connect and builds its error.
func (s *Session) failConnect(err error) error {
	err = s.limit.explain(err)
	s.cancel(err)
	if s.cs != nil {
		_ = s.cs.Close()
	}
	// A DELETE the handshake left to send after it (bounded by
	// closeDeleteTimeout) ends before the failed connect does: no session
	// is left to wait for it.
	s.deletes.Wait()
	if s.proc != nil {
		err = explainStdout(err)
	}
	if s.proc != nil {
		// A child that crashed is usually reaped a moment after its stdout
		// closed; give it that moment so that the error says how it ended.
		selfExited := false
		select {
		case <-s.proc.exited:
			selfExited = true
		case <-time.After(100 * time.Millisecond):
		}
		s.proc.stop(failedConnectGrace, failedConnectGrace)
		err = s.processErr(err, selfExited)
	}
	s.log.Debug("connect failed", "error", err)
	return s.red.Err(err)
}

// processErr attaches the child's facts to err.
func (s *Session) processErr(err error, selfExited bool) error {
	st := s.proc.status()
	msg := err.Error()
	if _, desc := s.proc.exit(); selfExited && desc != "" {
		msg += "; process " + desc
	}
	if last := s.lastWords(); last != "" {
		msg += "; stderr: " + last
	}
	return &processError{msg: msg, cause: err, status: st}
}

// lastWords is the child's last line on stderr (tail.Last), or for the
// runtime's command of a container server, the line before its "Run
// 'docker run --help' for more information" trailer: the one that says
// what was wrong with the container.
func (s *Session) lastWords() string {
	last := s.proc.tail.Last()
	if s.proc.container == "" || !strings.HasPrefix(last, "Run '") || !strings.HasSuffix(last, "--help' for more information") {
		return last
	}
	lines := s.proc.tail.Lines()
	seen := false
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		switch {
		case l == "":
		case !seen:
			seen = true // the trailer itself
		default:
			return l
		}
	}
	return last
}

// processError is an error that carries a stdio child's facts.
type processError struct {
	msg    string
	cause  error
	status *spec.ProcessStatus
}

func (e *processError) Error() string { return e.msg }

func (e *processError) Unwrap() error { return e.cause }

// ProcessStatus returns a copy of the child's facts.
func (e *processError) ProcessStatus() *spec.ProcessStatus {
	st := *e.status
	st.StderrTail = append([]string(nil), e.status.StderrTail...)
	if e.status.LastExitCode != nil {
		c := *e.status.LastExitCode
		st.LastExitCode = &c
	}
	return &st
}

// captureSend is a sending middleware: it keeps the go-sdk's own handler
// (below the client-side TTL cache of list results) for probes, and the
// _meta the go-sdk puts on tools/list; and it tells answeredInitialize.
func (s *Session) captureSend(next mcp.MethodHandler) mcp.MethodHandler {
	s.rawSend = next
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "tools/list" {
			s.sdkToolsSent.Add(1)
		}
		if (method == "server/discover" || method == "tools/list") && s.listMeta.Load() == nil {
			if p := req.GetParams(); p != nil {
				if m := p.GetMeta(); m[mcp.MetaKeyProtocolVersion] != nil {
					m := maps.Clone(mcp.Meta(m))
					s.listMeta.Store(&m)
				}
			}
		}
		res, err := next(ctx, method, req)
		if method == "initialize" && err == nil && s.answeredInitialize != nil {
			if ir, ok := res.(*mcp.InitializeResult); ok && ir != nil && ir.ProtocolVersion != "" {
				s.answeredInitialize(ir.ProtocolVersion)
			}
		}
		return res, err
	}
}

// Server is what the server said about itself, with the negotiated protocol.
func (s *Session) Server() spec.ServerInfo {
	res := s.cs.InitializeResult()
	if res == nil {
		return spec.ServerInfo{}
	}
	info := spec.ServerInfo{ProtocolVersion: res.ProtocolVersion}
	if res.ServerInfo != nil {
		info.Name = res.ServerInfo.Name
		info.Version = res.ServerInfo.Version
	}
	return info
}

func (s *Session) newProtocol() bool {
	res := s.cs.InitializeResult()
	return res != nil && res.ProtocolVersion >= protocol2026
}
