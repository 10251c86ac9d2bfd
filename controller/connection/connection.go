package connection

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

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
	seen   liveness // when the server last sent anything

	// For streamable HTTP: the go-sdk transport's client (manifest headers,
	// liveness marks) and endpoint, for requests sent beside the go-sdk.
	httpClient *http.Client
	httpURL    string

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

	catalog  atomic.Pointer[catalog] // prompts, resources, templates (relay.go)
	listener listenerBox             // where resource updates and unrelated logs go
	flights  flights                 // requests in flight that carry a downstream client

	toolsMu  sync.Mutex
	tools    []*mcp.Tool       // replaced, never modified
	toolsSum [sha256.Size]byte // of the list's JSON: a real change or a repeated notification

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
}

// Connect opens one session and lists the server's tools. ctx bounds the
// whole attempt. On failure nothing is left running; the error is redacted,
// wraps its cause and, for stdio, carries the child's facts (see ProcessOf).
func Connect(ctx context.Context, req Request) (*Session, error) {
	sp := req.Spec
	if sp == nil {
		return nil, errors.New("connection: no spec")
	}
	if (sp.Stdio == nil) == (sp.HTTP == nil) {
		return nil, errors.New("connection: exactly one of stdio and http must be set")
	}
	environ := req.Environ
	if environ == nil {
		environ = os.Getenv
	}
	var envVals, headerVals []namedValue
	var err error
	src := valueSources{environ: environ, baseDir: req.ManifestDir, secrets: req.Secrets}
	if sp.Stdio != nil {
		envVals, err = resolveValues(ctx, "stdio.env", sp.Stdio.Env, src)
	} else {
		headerVals, err = resolveValues(ctx, "http.headers", sp.HTTP.Headers, src)
	}
	if err != nil {
		return nil, err // names entries and sources, never values
	}
	red := newRedactor(envVals, headerVals)
	if sp.HTTP != nil {
		// OAuth tokens, learnt as they come (oauth.go), and the session's
		// id: whoever holds it can use the session on the server, and the
		// go-sdk puts it in its errors ("session ID: …").
		red.live = &liveSecrets{}
	}
	lifetime, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	s := &Session{
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
	}
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
			s.toolsChangedUpstream()
		},
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			s.routeProgress(r.Params)
		},
	}
	// Capabilities, and the handlers that relay to the gateway's clients.
	s.clientHandlers(opts)
	s.client = mcp.NewClient(&mcp.Implementation{Name: "tether", Version: version}, opts)
	s.client.AddSendingMiddleware(s.captureSend)
	s.client.AddReceivingMiddleware(s.relayRoots)

	var transport mcp.Transport
	if sp.Stdio != nil {
		s.transport = "stdio"
		transport, err = s.startStdio(sp.Stdio, req.ManifestDir, envVals)
	} else {
		transport, s.transport, err = httpTransport(sp.HTTP, headerVals, lifetime, &s.seen)
		if err == nil && sp.HTTP.OAuth != nil {
			err = s.useOAuth(ctx, req, src, transport) // oauth.go
		}
		if st, ok := transport.(*mcp.StreamableClientTransport); ok {
			s.httpClient, s.httpURL = st.HTTPClient, st.Endpoint
		}
	}
	if err != nil {
		cancel(err)
		return nil, red.Err(err)
	}
	var sessOpts *mcp.ClientSessionOptions
	learned := func(string, bool) {}
	if sp.HTTP != nil {
		var v string
		v, learned = versions.versionFor(ctx, s.transport+" "+sp.HTTP.URL)
		if v != "" {
			sessOpts = &mcp.ClientSessionOptions{ProtocolVersion: v}
		}
	}
	// The handshake takes one of its endpoint's slots until the first
	// tools/list is answered (see handshakesPerEndpoint).
	release := func() {}
	if sp.HTTP != nil {
		if release, err = handshakes.acquire(ctx, s.transport+" "+sp.HTTP.URL, handshakesPerEndpoint); err != nil {
			// The server was not asked: what the endpoint's version memory
			// knows still holds (a learner leaves the learning to others).
			learned("", false)
			return nil, s.failConnect(s.ctxErr(ctx, err))
		}
		defer release() // also on a panic; released early below
	}
	cs, err := s.client.Connect(ctx, transport, sessOpts)
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
	_, err = s.refreshTools(ctx)
	release()
	if err == nil {
		_, err = s.refreshCatalog(ctx)
	}
	if err != nil {
		return nil, s.failConnect(err)
	}
	if !unbind() {
		return nil, s.failConnect(fmt.Errorf("connect: %w", context.Cause(ctx)))
	}
	s.wg.Add(1)
	if s.proc != nil {
		go s.watch()
	} else {
		go s.watchHTTP()
	}
	s.goLive()
	info := s.Server()
	s.log.Debug("session open", "transport", s.transport, "server", info.Name,
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
	dir := st.WorkingDir
	if dir != "" && !filepath.IsAbs(dir) {
		dir = filepath.Join(manifestDir, dir)
	}
	proc, err := startProcess(st.Command, path, st.Args, dir, env, newStderrTail(s.red), s.log)
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", st.Command, err)
	}
	s.proc = proc
	return &mcp.IOTransport{Reader: seenStream{ReadCloser: proc.stdout, l: &s.seen}, Writer: proc.stdin}, nil
}

// failConnect cleans up after a failed Connect and builds its error.
func (s *Session) failConnect(err error) error {
	s.cancel(err)
	if s.cs != nil {
		_ = s.cs.Close()
	}
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
	if last := s.proc.tail.Last(); last != "" {
		msg += "; stderr: " + last
	}
	return &processError{msg: msg, cause: err, status: st}
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

// ProcessOf returns the stdio child's facts (pid, exit code, stderr tail)
// that err carries, or nil.
func ProcessOf(err error) *spec.ProcessStatus {
	var pe interface{ ProcessStatus() *spec.ProcessStatus }
	if errors.As(err, &pe) {
		return pe.ProcessStatus()
	}
	return nil
}

// captureSend is a sending middleware: it keeps the go-sdk's own handler
// (below the client-side TTL cache of list results) for probes, and the
// _meta the go-sdk puts on tools/list.
func (s *Session) captureSend(next mcp.MethodHandler) mcp.MethodHandler {
	s.rawSend = next
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if (method == "server/discover" || method == "tools/list") && s.listMeta.Load() == nil {
			if p := req.GetParams(); p != nil {
				if m := p.GetMeta(); m[mcp.MetaKeyProtocolVersion] != nil {
					m := maps.Clone(mcp.Meta(m))
					s.listMeta.Store(&m)
				}
			}
		}
		return next(ctx, method, req)
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

// Tools returns the server's full tool list. The slice and the tools are
// shared: read them, never modify them.
func (s *Session) Tools() []*mcp.Tool {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	return s.tools
}

// RefreshTools lists the server's tools again (following cursors) and
// replaces the snapshot. It does not call OnToolsChanged. On 2026-07-28
// sessions the go-sdk may answer from its TTL cache, which a list_changed
// notification invalidates.
func (s *Session) RefreshTools(ctx context.Context) error {
	_, err := s.refreshTools(ctx)
	return err
}

func (s *Session) refreshTools(ctx context.Context) (changed bool, err error) {
	if err := s.Err(); err != nil {
		return false, err
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	tools, err := s.listToolsRaw(callCtx)
	if err != nil {
		return false, s.callErr("tools/list", ctx, err)
	}
	sum, bindsHeaders, err := digestTools(tools)
	if err != nil {
		return false, s.red.Err(fmt.Errorf("tools/list: %w", err))
	}
	if tools == nil || bindsHeaders {
		// Parameters bound to HTTP headers (2026-07-28): the go-sdk
		// validates them and keeps the list for CallTool, which sets the
		// headers from it. So list through the go-sdk.
		tools = tools[:0]
		for t, err := range s.cs.Tools(callCtx, nil) {
			if err != nil {
				return false, s.callErr("tools/list", ctx, err)
			}
			tools = append(tools, t)
		}
		if sum, _, err = digestTools(tools); err != nil {
			return false, s.red.Err(fmt.Errorf("tools/list: %w", err))
		}
	}
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	changed = sum != s.toolsSum
	s.tools, s.toolsSum = tools, sum
	return changed, nil
}

// digestTools replaces each tool by the definition already held for its
// JSON (see sharedTools), and returns the SHA-256 of the list (a real change
// or a repeated notification) and whether a tool binds parameters to headers.
func digestTools(tools []*mcp.Tool) (sum [sha256.Size]byte, bindsHeaders bool, err error) {
	h := sha256.New()
	for i, t := range tools {
		b, err := json.Marshal(t)
		if err != nil {
			return sum, false, err
		}
		ts := sha256.Sum256(b)
		h.Write(ts[:])
		tools[i] = sharedTools.intern(ts, t)
		bindsHeaders = bindsHeaders || bytes.Contains(b, []byte(`"x-mcp-header"`))
	}
	h.Sum(sum[:0])
	return sum, bindsHeaders, nil
}

// maxToolPages bounds the pages of one tools/list: a server whose cursors
// never end must not hold a connect or refresh forever.
const maxToolPages = 1000

// listToolsRaw lists every tool through the go-sdk's sending handler beneath
// its client: the go-sdk's ListTools re-decodes each tool's schema to
// validate x-mcp-header annotations (a fresh 32 KiB decode buffer per tool),
// which at 1,000 connections was a sixth of everything tether allocated
// while starting. refreshTools lists through the go-sdk when a tool has such
// annotations. It returns nil, nil when it cannot list this way (no request
// _meta captured yet on a 2026-07-28 session).
func (s *Session) listToolsRaw(ctx context.Context) ([]*mcp.Tool, error) {
	meta, ok := s.requestMeta()
	if !ok || s.rawSend == nil {
		return nil, nil
	}
	tools := []*mcp.Tool{}
	cursor := ""
	for range maxToolPages {
		p := &mcp.ListToolsParams{Cursor: cursor}
		if meta != nil {
			p.Meta = maps.Clone(meta)
		}
		res, err := s.rawSend(ctx, "tools/list", &mcp.ClientRequest[*mcp.ListToolsParams]{Session: s.cs, Params: p})
		if err != nil {
			return nil, err
		}
		lr, ok := res.(*mcp.ListToolsResult)
		if !ok || lr == nil {
			return nil, fmt.Errorf("unexpected result %T", res)
		}
		for _, t := range lr.Tools {
			if t != nil { // as the go-sdk does: a null entry is no tool
				tools = append(tools, t)
			}
		}
		if lr.NextCursor == "" {
			return tools, nil
		}
		cursor = lr.NextCursor
	}
	return nil, fmt.Errorf("more than %d pages", maxToolPages)
}

// requestMeta is the _meta of a request sent beneath the go-sdk's client:
// none on classic sessions; on 2026-07-28 ones the per-request triple
// (SEP-2575) the go-sdk put on its own first request, with the negotiated
// version. ok is false when no such request was seen yet.
func (s *Session) requestMeta() (meta mcp.Meta, ok bool) {
	if !s.newProtocol() {
		return nil, true
	}
	m := s.listMeta.Load()
	if m == nil {
		return nil, false
	}
	meta = maps.Clone(*m)
	meta[mcp.MetaKeyProtocolVersion] = s.cs.InitializeResult().ProtocolVersion
	return meta, true
}

// Probe sends one health probe: ping on classic sessions, tools/list on
// 2026-07-28 ones (no ping there), past the go-sdk's list cache. The caller
// bounds it with ctx; without a deadline, spec.DefaultHealthTimeout applies.
// An answer that refuses the request (method not found, invalid params or
// request) proves the server alive too and counts as success.
func (s *Session) Probe(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.DefaultHealthTimeout)
		defer cancel()
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	start := time.Now()
	method := "ping"
	var err error
	if s.newProtocol() {
		method = "tools/list"
		err = s.listToolsUncached(callCtx)
	} else if raw, rerr := s.pingRaw(callCtx); raw {
		err = rerr
	} else {
		err = s.cs.Ping(callCtx, nil)
	}
	if wire := serverRefused(err); wire != nil {
		s.log.Debug("probe answered with an error: server alive", "method", method, "code", wire.Code, "error", wire.Message)
		return nil
	}
	if err != nil && ctx.Err() != nil && s.Err() == nil && s.seen.since(start) {
		// Timed out, but the server sent other answers meanwhile: the probe
		// waited in line behind work, the server is alive.
		s.log.Debug("probe timed out behind other traffic: server alive", "method", method)
		return nil
	}
	if err != nil {
		return s.callErr("probe ("+method+")", ctx, err)
	}
	return nil
}

// serverRefused returns the server's JSON-RPC error if err is one that only
// a live server sends back (it read the request and refused it), else nil.
// Only the standard codes of a request the server read and refused count:
// an HTTP server that answers 400 with a JSON-RPC body is alive, but so is
// one whose proxy says 400, and a -32000 may be the server's own "I am
// broken".
func serverRefused(err error) *jsonrpc.Error {
	wire := findServerError(err)
	if wire == nil {
		return nil
	}
	switch wire.Code {
	case jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest:
		return wire
	}
	return nil
}

// listToolsUncached sends tools/list through the go-sdk's own handler,
// beneath its TTL cache, so that the request reaches the server.
func (s *Session) listToolsUncached(ctx context.Context) error {
	meta, ok := s.requestMeta()
	if !ok || s.rawSend == nil {
		_, err := s.cs.ListTools(ctx, nil)
		return err
	}
	params := &mcp.ListToolsParams{Meta: meta}
	_, err := s.rawSend(ctx, "tools/list", &mcp.ClientRequest[*mcp.ListToolsParams]{Session: s.cs, Params: params})
	return err
}

// CallTool calls a tool upstream. p.Name and p.Arguments are forwarded
// verbatim (as are the multi-round-trip fields); p.Meta is not: the
// downstream _meta may carry keys an older server rejects.
// The upstream _meta carries the trace context of ctx's span instead
// (traceparent, tracestate: the MCP trace-context convention), so that the
// backend's spans join the caller's trace; servers that do not trace ignore
// those keys.
//
// If progress is non-nil, the upstream call carries a progress token of the
// session's own, and the server's progress notifications for it reach
// progress in order, from a goroutine of this call, before CallTool returns,
// with ProgressToken set to nil and Message redacted: the caller sets its own
// downstream token before forwarding. progress must not block for long. The
// go-sdk may hand the server's last notifications over after the result, so
// a call whose progress did not reach its total waits up to 25 ms for them.
//
// Cancelling ctx cancels the upstream call (the go-sdk sends
// notifications/cancelled). Errors, and the text of results marked isError,
// are redacted.
func (s *Session) CallTool(ctx context.Context, p *mcp.CallToolParams, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	if p == nil {
		return nil, errors.New("tools/call: no params")
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	defer s.inFlight(callCtx)()
	meta := tracing.InjectMeta(ctx, nil)
	if m := s.levelMeta(ctx, meta); m != nil {
		meta = m
	}
	up := &mcp.CallToolParams{
		Meta:           meta,
		Name:           p.Name,
		Arguments:      p.Arguments,
		InputResponses: p.InputResponses,
		RequestState:   p.RequestState,
	}
	var answered bool
	if progress != nil {
		token, done := s.trackProgress(progress)
		defer func() { done(answered) }()
		up.SetProgressToken(token)
	}
	res, err := s.cs.CallTool(callCtx, up)
	answered = err == nil
	if err != nil {
		return nil, s.callErr(fmt.Sprintf("tools/call %q", p.Name), ctx, err)
	}
	if res.IsError {
		s.redactErrorResult(res)
	}
	return res, nil
}

// trackProgress gives one call a progress token of the session's own and
// routes the server's notifications for it to progress. done ends the
// route; answered says the call got its result, so that progress trailing
// it (the go-sdk may hand it over after the result, and a JSON-response
// server sends it on its standalone stream) is still delivered for a moment.
func (s *Session) trackProgress(progress func(*mcp.ProgressNotificationParams)) (token string, done func(answered bool)) {
	token = fmt.Sprintf("tether-%d", s.progressSeq.Add(1))
	route := newProgressRoute(progress)
	s.routes.Store(token, route)
	return token, func(answered bool) {
		if answered {
			route.linger(progressLinger)
		}
		s.routes.Delete(token)
		route.close() // delivers what is queued, then waits
	}
}

// redactErrorResult redacts what a tool error result says: its text, an
// embedded resource's text, and its structured content (redacted as JSON;
// dropped if redaction would leave it unreadable, since a tool error needs
// only its message).
func (s *Session) redactErrorResult(res *mcp.CallToolResult) {
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			c.Text = s.red.String(c.Text)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				c.Resource.Text = s.red.String(c.Resource.Text)
			}
		}
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		var v any
		if err == nil && json.Unmarshal([]byte(s.red.String(string(raw))), &v) == nil {
			res.StructuredContent = v
		} else {
			res.StructuredContent = nil
		}
	}
}

// callContext derives a call's ctx from the caller's and the session's.
func (s *Session) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	callCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	return callCtx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// ctxErr prefers the reason a ctx ended over the go-sdk's echo of it.
func (s *Session) ctxErr(callerCtx context.Context, err error) error {
	if callerCtx.Err() == nil && s.ctx.Err() != nil {
		if cause := context.Cause(s.ctx); cause != nil && !errors.Is(err, cause) {
			return fmt.Errorf("%w (%w)", cause, err)
		}
	}
	return err
}

// callErr wraps the error of an upstream call: redacted, naming the
// operation, and ending the session when the transport is gone for good.
func (s *Session) callErr(op string, callerCtx context.Context, err error) error {
	switch {
	case callerCtx.Err() != nil:
		if dl, ok := callerCtx.Deadline(); ok && errors.Is(callerCtx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer in time (deadline %s ago): %w", time.Since(dl).Round(time.Millisecond), err)
		}
	case s.ctx.Err() != nil:
		if e := s.Err(); e != nil {
			err = fmt.Errorf("%w (%w)", e, err)
		} else {
			err = s.ctxErr(callerCtx, err)
		}
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing):
		s.transportDied(err)
	}
	return s.red.Err(fmt.Errorf("%s: %w", op, err))
}

// Done is closed when the session ended, by itself (child exited, transport
// broke) or by Close, and everything it ran has stopped.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended (redacted); nil while it is alive. For a
// stdio child that exited, ProcessOf(Err()) describes it.
func (s *Session) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Process describes the stdio child (pid, exit code once it exited, the
// redacted stderr tail); nil for HTTP. Restarts is the caller's to count.
func (s *Session) Process() *spec.ProcessStatus {
	if s.proc == nil {
		return nil
	}
	return s.proc.status()
}

// Endpoint describes where the session goes, for traces: the URL without
// credentials or query values, or the stdio command without its arguments,
// redacted like everything else the session shows.
func (s *Session) Endpoint() string { return s.endpoint }

// Redact replaces every resolved secret value in str.
func (s *Session) Redact(str string) string { return s.red.String(str) }

// Close ends the session gracefully: in-flight calls are cancelled first,
// then the transport is closed and a stdio child stopped (stdin, SIGTERM,
// SIGKILL to its group), bounded by StopTimeout. Idempotent; safe
// concurrently with every other method.
func (s *Session) Close() error {
	s.end(ErrClosed)
	s.wg.Wait()
	return s.closeErr
}

// end ends the session once, for cause.
func (s *Session) end(cause error) {
	s.endOnce.Do(func() {
		s.errMu.Lock()
		s.err = s.red.Err(cause)
		s.errMu.Unlock()
		s.cancel(cause)
		err := s.cs.Close()
		if s.proc != nil {
			wait := stdinGrace
			if code, _ := s.proc.exit(); code != nil {
				// The server is gone; what is left of its group (a
				// wrapper's grandchild) gets no stdin grace.
				wait = 0
			}
			s.proc.stop(wait, termGrace)
		}
		if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(cause, ErrClosed) {
			s.log.Debug("closing transport", "error", err)
		}
		if err != nil && errors.Is(cause, ErrClosed) && !errors.Is(err, mcp.ErrConnectionClosed) {
			s.closeErr = s.red.Err(fmt.Errorf("close: %w", err))
		}
		if errors.Is(cause, ErrClosed) {
			s.log.Debug("session closed")
		} else {
			// The reconciler reports this (WARN, with the attempt); keep
			// the detail for debugging only.
			s.log.Debug("session ended", "reason", cause)
		}
		s.refreshMu.Lock()
		s.ended = true
		s.refreshMu.Unlock()
		close(s.done)
		if s.onEnd != nil {
			s.onEnd()
		}
	})
}

// watch ends the session when the child exits, the transport breaks or a
// call saw it die.
func (s *Session) watch() {
	defer s.wg.Done()
	connDone := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		connDone <- s.cs.Wait() // returns once end closed the session, at the latest
	}()
	var exited <-chan struct{}
	if s.proc != nil {
		exited = s.proc.exited
	}
	var cause error
	select {
	case <-s.ctx.Done():
		return // Close is ending it
	case <-exited:
		cause = s.exitErr()
		// A child that wrote junk on stdout exits once the session drops
		// it (its stdin closes): the junk is the news, not the exit. The
		// session's end follows the exit at once (stdout is at EOF), so a
		// short wait tells which it was.
		select {
		case err := <-connDone:
			if junk := explainStdout(err); junk != err {
				cause = s.processErr(junk, true)
			}
		case <-time.After(100 * time.Millisecond):
		}
	case err := <-connDone:
		if s.proc != nil {
			// stdout closed (or unreadable): the child is most likely exiting.
			select {
			case <-s.proc.exited:
				cause = s.exitErr()
				if junk := explainStdout(err); junk != err {
					cause = s.processErr(junk, true)
				}
			case <-time.After(exitWait):
				cause = s.processErr(fmt.Errorf("server closed stdout: %w", transportErr(err)), false)
			case <-s.ctx.Done():
				return
			}
		} else {
			cause = fmt.Errorf("transport closed: %w", transportErr(err))
		}
	case err := <-s.fatal:
		cause = fmt.Errorf("transport unusable: %w", err)
		if s.proc != nil {
			cause = s.processErr(cause, false)
		}
	}
	s.end(cause)
}

// transportDied ends the session after a call saw its transport die: a
// stdio session's watch does it; an HTTP session's watcher waits in the
// go-sdk, so a goroutine of the session's ends it.
func (s *Session) transportDied(err error) {
	if s.proc != nil {
		select {
		case s.fatal <- err:
		default:
		}
		return
	}
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if s.ended || s.ending {
		return
	}
	s.ending = true
	s.wg.Add(1) // under refreshMu, as in startRefreshLocked
	go func() {
		defer s.wg.Done()
		s.end(fmt.Errorf("transport unusable: %w", err))
	}()
}

// watchHTTP ends an HTTP session when its transport breaks or a call saw it
// die. It is watch without a child, on one goroutine: the go-sdk's Wait
// returns when the connection fails or end closes it, and a call that saw
// the transport die closes it through end on a goroutine of its own.
func (s *Session) watchHTTP() {
	defer s.wg.Done()
	err := s.cs.Wait()
	if s.ctx.Err() != nil {
		return // end is under way (Close, or a call saw the transport die)
	}
	s.end(fmt.Errorf("transport closed: %w", transportErr(err)))
}

// explainStdout says what a stdio session's decode error means: any line on
// the child's stdout that is not JSON-RPC ends the session. Other errors are
// returned as they are.
func explainStdout(err error) error {
	if err == nil || !strings.Contains(err.Error(), "invalid character") {
		return err
	}
	return fmt.Errorf("%w (the server wrote something other than JSON-RPC to stdout; logs belong on stderr)", err)
}

func transportErr(err error) error {
	if err == nil {
		return mcp.ErrConnectionClosed
	}
	return err
}

// exitErr describes a child that exited by itself. Its last words (often a
// line without a newline, written as it died) may still be in the pipe
// when it is reaped: the stderr drain gets a moment to reach EOF first.
func (s *Session) exitErr() error {
	s.proc.awaitStderr(stderrAfterExit)
	_, desc := s.proc.exit()
	return s.processErr(fmt.Errorf("server process exited: %s", desc), false)
}

// toolsChangedUpstream is the list_changed handler. It runs on the
// session's reader, so it only starts (or marks for another round) the
// goroutine that refreshes the list.
func (s *Session) toolsChangedUpstream() {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if s.refreshing {
		s.refreshMore = true
		return
	}
	s.refreshing = true
	s.startRefreshLocked()
}

// goLive lets refreshes start, one at once if a list_changed came in while
// Connect listed the tools itself.
func (s *Session) goLive() {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	s.live = true
	s.startRefreshLocked()
}

// startRefreshLocked starts the refresh goroutine when one is due and the
// session is live and not ended. The wait group is added to under
// refreshMu, which end takes before Close waits: no Add races that Wait.
func (s *Session) startRefreshLocked() {
	if !s.refreshing || !s.live || s.ended {
		return
	}
	s.wg.Add(1)
	go s.refreshAfterListChanged()
}

// refreshAfterListChanged refreshes the tool list after list_changed, coalescing
// bursts, and tells OnToolsChanged when the list really changed. It runs
// again while notifications keep coming, then exits.
func (s *Session) refreshAfterListChanged() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(refreshCoalesce):
		}
		s.refreshMu.Lock()
		s.refreshMore = false
		s.refreshMu.Unlock()

		ctx, cancel := context.WithTimeout(s.ctx, refreshTimeout)
		changed, err := s.refreshTools(ctx)
		if err == nil {
			var more bool
			more, err = s.refreshCatalog(ctx)
			changed = changed || more
		}
		cancel()
		switch {
		case err != nil:
			if s.ctx.Err() == nil {
				s.log.Warn("refreshing tools after list_changed", "error", err)
			}
		default:
			s.log.Debug("tools refreshed after list_changed", "tools", len(s.Tools()), "changed", changed)
			if changed && s.onToolsChanged != nil {
				s.onToolsChanged()
			}
		}

		s.refreshMu.Lock()
		if !s.refreshMore || s.ended {
			s.refreshing = false
			s.refreshMu.Unlock()
			return
		}
		s.refreshMu.Unlock()
	}
}

// routeProgress hands a progress notification to the call that owns its
// token. It runs on the session's reader and never blocks.
func (s *Session) routeProgress(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := s.routes.Load(token)
	if !ok {
		return // the call has returned; late progress is dropped
	}
	out := *p
	out.ProgressToken = nil
	out.Meta = nil
	out.Message = s.red.String(p.Message)
	v.(*progressRoute).deliver(&out)
}

// progressRoute delivers one call's progress notifications, in order, from a
// goroutine the call owns. When its queue is full, notifications are
// dropped: progress is advisory, the reader must not wait.
type progressRoute struct {
	mu       sync.Mutex
	closed   bool
	ch       chan *mcp.ProgressNotificationParams
	done     chan struct{}
	complete chan struct{} // closed when progress reached its total
}

func newProgressRoute(fn func(*mcp.ProgressNotificationParams)) *progressRoute {
	r := &progressRoute{
		ch:       make(chan *mcp.ProgressNotificationParams, 64),
		done:     make(chan struct{}),
		complete: make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		for p := range r.ch {
			fn(p)
		}
	}()
	return r
}

func (r *progressRoute) deliver(p *mcp.ProgressNotificationParams) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.ch <- p:
	default:
	}
	if p.Total > 0 && p.Progress >= p.Total {
		select {
		case <-r.complete:
		default:
			close(r.complete)
		}
	}
}

// linger waits up to d for late progress, unless progress already reached
// its total. The go-sdk retires a call in its reader as soon as the response
// arrives, but hands notifications to a separate goroutine: one the server
// sent just before its response may be handled after the call returned.
func (r *progressRoute) linger(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.complete:
	case <-t.C:
	}
}

// close stops accepting, lets the goroutine deliver what is queued and
// waits for it.
func (r *progressRoute) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.ch)
	}
	r.mu.Unlock()
	<-r.done
}
