package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/spec"
)

// Result tells the worker what to do after a successful Reconcile: nothing,
// or look again after RequeueAfter. A Reconcile that returns an error is
// retried with the queue's rate limiter and its Result is ignored.
type Result struct {
	RequeueAfter time.Duration
}

// Defaults of the reconciler.
const (
	// DefaultConnectTimeout bounds one connect attempt (spawn + initialize +
	// tools/list). Attempts run beside the workers, so a slow server delays
	// nobody else.
	DefaultConnectTimeout = 60 * time.Second
	// stableAfter is how long a session must stay up before a drop starts
	// the backoff from the beginning again; a server that dies right after
	// connecting keeps backing off instead of restarting in a hot loop.
	stableAfter = 10 * time.Second
	// DefaultConnectingGrace is how long a new connection may stay
	// Connecting before its status file says so: a server that connects
	// within it goes straight to Connected, one status write instead of two
	// (at 1,000 connections, creating status files is what start-up spends
	// most on).
	DefaultConnectingGrace = 250 * time.Millisecond
	// closeBound bounds a graceful close (stdin, SIGTERM, SIGKILL).
	closeBound = 10 * time.Second
)

// ReconcilerOptions wires a Reconciler.
type ReconcilerOptions struct {
	Desired   *DesiredState
	Status    *StatusWriter
	Connector Connector
	Exposer   Exposer // may be nil (no gateway)
	Metrics   Metrics // may be nil
	Logger    *slog.Logger
	// Enqueue asks for name to be reconciled soon; the controller's queue.
	Enqueue        func(name string)
	ConnectTimeout time.Duration
	// ConnectingGrace: see DefaultConnectingGrace; negative disables it.
	ConnectingGrace time.Duration
	// TracerProvider records the reconcile, connect, backoff and health
	// spans (see controller/tracing); nil means the global provider, a no-op
	// unless tracing.Setup turned tracing on.
	TracerProvider trace.TracerProvider
	// Now and Jitter are for tests.
	Now    func() time.Time
	Jitter func() float64 // in [0,1); the delay is scaled by 1-0.2*Jitter()
}

// Reconciler drives each connection toward its desired state. Reconcile
// never blocks on the network: connect attempts, health probes and closes run
// in goroutines the Reconciler owns, which report back by enqueueing the
// connection's name. Its connection table has one lock.
type Reconciler struct {
	opts   ReconcilerOptions
	log    *slog.Logger
	tracer trace.Tracer

	ctx    context.Context // parent of every attempt and monitor; cancelled by Shutdown
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[string]*conn
}

// conn is the actual state of one connection. Guarded by Reconciler.mu.
type conn struct {
	name string
	log  *slog.Logger

	session     Session
	sessionHash string // ConnectHash of the spec the session was opened with
	sessionSpec *spec.McpConnection
	stopMonitor context.CancelFunc
	connectedAt time.Time

	attempting    bool
	attemptHash   string
	cancelAttempt context.CancelFunc
	result        *attemptResult // a finished attempt not yet taken in

	failures    int // failed attempts since the last success (status.attempt)
	backoffStep int // position in the backoff sequence; reset once stable
	nextRetry   time.Time
	lastError   string
	// backoffSpan is the open mcp.backoff_wait span: started when a failure
	// decides the delay, ended when the next attempt starts or the wait is
	// abandoned (stopLocked).
	backoffSpan trace.Span

	health healthState

	starts       int // stdio children started (restarts = starts-1)
	lastExitCode *int
	process      *spec.ProcessStatus // last known facts of the child

	addedAt    time.Time
	written    bool   // its status has been written once (ConnectingGrace is over)
	statusFile string // where this connection's status was last written
	prev       *spec.ConnectionStatus
	known      bool // metrics series created
}

type attemptResult struct {
	hash    string
	spec    *spec.McpConnection
	session Session
	err     error
	process *spec.ProcessStatus
	span    trace.SpanContext // the attempt's mcp.connect_attempt span
}

type healthState struct {
	failures int
	lastErr  string
	down     error // set once failures reached the threshold
}

// NewReconciler returns a reconciler. Call Shutdown to stop its goroutines.
func NewReconciler(opts ReconcilerOptions) *Reconciler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = noopMetrics{}
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.ConnectingGrace == 0 {
		opts.ConnectingGrace = DefaultConnectingGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.Enqueue == nil {
		opts.Enqueue = func(string) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Reconciler{opts: opts, log: opts.Logger, tracer: tracing.Tracer(opts.TracerProvider),
		ctx: ctx, cancel: cancel, conns: map[string]*conn{}}
}

// Reconcile brings the connection name one step toward its desired state and
// writes its status. It reads the desired and the actual state afresh every
// time, so it does not matter which event (or how many) led here.
func (r *Reconciler) Reconcile(ctx context.Context, name string) (res Result, err error) {
	ctx, span := r.tracer.Start(ctx, tracing.SpanReconcile, trace.WithAttributes(tracing.Server.String(name)))
	defer func() {
		if p := recover(); p != nil {
			span.SetStatus(codes.Error, fmt.Sprintf("panic: %v", p))
			span.End()
			panic(p) // the worker recovers it into an error
		}
		endReconcileSpan(span, res, err)
	}()
	entry, exists := r.opts.Desired.Get(name)
	if !exists {
		return Result{}, r.remove(name)
	}
	if entry.Conn != nil && span.IsRecording() {
		span.SetAttributes(tracing.Endpoint.String(tracing.EndpointOf(&entry.Conn.Spec)))
	}
	res, st, oldFile, firstSeen, hold := r.decide(ctx, name, &entry)
	span.SetAttributes(tracing.Phase.String(string(st.Phase)))

	if firstSeen {
		r.opts.Metrics.ConnectionAdded(name)
	}
	r.opts.Metrics.SetPhase(name, st.Phase)
	exposed := 0
	if st.Tools != nil {
		exposed = st.Tools.Exposed
	}
	r.opts.Metrics.SetTools(name, exposed)
	r.opts.Metrics.SetCollisions(name, len(st.Collisions))

	if oldFile != "" && oldFile != entry.File {
		if err := r.opts.Status.Delete(oldFile, r.opts.Desired.FileOrder(oldFile), name); err != nil {
			return Result{}, fmt.Errorf("connection %s: %w", name, err)
		}
	}
	if hold {
		return res, nil
	}
	doc := spec.StatusDocument{
		APIVersion: spec.APIVersion,
		Kind:       spec.Kind,
		Metadata:   spec.ObjectMeta{Name: name},
		Status:     st,
	}
	if err := r.opts.Status.Put(entry.File, r.opts.Desired.FileOrder(entry.File), doc); err != nil {
		return Result{}, fmt.Errorf("connection %s: %w", name, err)
	}
	// Only now is the status where entry.File says: a failed write above
	// leaves the old place to clean on the retry.
	r.mu.Lock()
	if c := r.conns[name]; c != nil {
		c.statusFile = entry.File
	}
	r.mu.Unlock()
	return res, nil
}

// endReconcileSpan records a reconcile's outcome with the result values of
// tether_reconcile_total.
func endReconcileSpan(span trace.Span, res Result, err error) {
	switch {
	case err != nil:
		span.SetAttributes(tracing.Result.String("error"))
		span.SetStatus(codes.Error, err.Error())
	case res.RequeueAfter > 0:
		span.SetAttributes(tracing.Result.String("requeue"), tracing.RequeueAfterMs.Int64(res.RequeueAfter.Milliseconds()))
	default:
		span.SetAttributes(tracing.Result.String("success"))
	}
	span.End()
}

// decide acts on the connection and computes its status, under the lock.
//
// hold is true while a new connection is within its Connecting grace: its
// status is not written yet, and res asks to look again when the grace ends.
func (r *Reconciler) decide(ctx context.Context, name string, entry *Entry) (res Result, st spec.ConnectionStatus, oldFile string, firstSeen, hold bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.conns[name]
	if c == nil {
		c = &conn{name: name, log: r.log.With("connection", name), addedAt: r.opts.Now()}
		r.conns[name] = c
		c.log.Info("connection added", "file", entry.File)
		if prev, ok := r.opts.Status.Previous(entry.File, name); ok {
			pst := prev.Status
			c.prev = &pst
			if pst.Process != nil {
				c.starts = pst.Process.Restarts
				c.lastExitCode = pst.Process.LastExitCode
			}
		}
	}
	res = r.step(ctx, c, entry)
	st = r.statusLocked(c, entry)
	oldFile = c.statusFile
	c.prev = &st
	firstSeen = !c.known
	c.known = true
	if !c.written && st.Phase == spec.PhaseConnecting && r.opts.ConnectingGrace > 0 {
		if wait := r.opts.ConnectingGrace - r.opts.Now().Sub(c.addedAt); wait > 0 {
			if res.RequeueAfter == 0 || wait < res.RequeueAfter {
				res.RequeueAfter = wait
			}
			return res, st, oldFile, firstSeen, true
		}
	}
	c.written = true
	return res, st, oldFile, firstSeen, false
}

// Seen reports whether name has been through Reconcile at least once (its
// metrics series and first decision exist).
func (r *Reconciler) Seen(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.conns[name]
	return ok && c.known
}

// remove tears down a connection whose manifest is gone and deletes its
// status and series.
func (r *Reconciler) remove(name string) error {
	r.mu.Lock()
	c := r.conns[name]
	if c != nil {
		delete(r.conns, name)
		r.stopLocked(c, "manifest removed")
	}
	r.mu.Unlock()
	if c == nil {
		return nil
	}
	c.log.Info("connection removed")
	if r.opts.Exposer != nil {
		r.opts.Exposer.Remove(name)
	}
	r.opts.Metrics.ConnectionRemoved(name)
	if c.statusFile == "" {
		return nil
	}
	return r.opts.Status.Delete(c.statusFile, r.opts.Desired.FileOrder(c.statusFile), name)
}

// step acts on one connection. Called with r.mu held; it never blocks. ctx
// carries the reconcile's span, the parent of the spans step starts.
func (r *Reconciler) step(ctx context.Context, c *conn, e *Entry) Result {
	if e.Conn == nil { // never valid
		r.stopLocked(c, "manifest invalid")
		return Result{}
	}
	want := e.Conn
	if r.ctx.Err() != nil { // shutting down: start nothing
		r.stopLocked(c, "tether is shutting down")
		return Result{}
	}
	if want.Spec.Suspend {
		if c.session != nil || c.attempting {
			c.log.InfoContext(ctx, "connection suspended")
		}
		r.stopLocked(c, "suspended")
		c.failures, c.backoffStep, c.nextRetry = 0, 0, time.Time{}
		return Result{}
	}
	// Relative commands and valueFrom.file paths resolve against the
	// manifest's directory: a manifest moved elsewhere reconnects.
	wantHash := want.Spec.ConnectHash() + "|" + filepath.Dir(e.File)
	now := r.opts.Now()

	// Take in a finished attempt.
	if res := c.result; res != nil {
		c.result = nil
		r.opts.Metrics.ObserveAttempt(c.name, res.err == nil)
		if res.process != nil {
			c.process = res.process
			if res.process.LastExitCode != nil {
				c.lastExitCode = res.process.LastExitCode
			}
		}
		switch {
		case res.err != nil:
			r.failedLocked(ctx, c, res.err.Error(), e, now, res.span)
		case res.hash != wantHash:
			// Connected with a spec that is no longer wanted.
			r.closeAsync(c.log, res.session)
		default:
			r.adoptLocked(trace.ContextWithSpanContext(ctx, res.span), c, res, now)
		}
	}

	// Watch the live session.
	if s := c.session; s != nil {
		var down error
		select {
		case <-s.Done():
			down = s.Err()
			if down == nil {
				down = errors.New("session closed")
			}
			if p := s.Process(); p != nil {
				c.process = p
				if p.LastExitCode != nil {
					c.lastExitCode = p.LastExitCode
				}
			}
			down = fmt.Errorf("connection lost: %w", down)
		default:
			if c.health.down != nil {
				down = c.health.down
			}
		}
		switch {
		case down != nil:
			c.log.WarnContext(ctx, "connection lost; reconnecting", "err", down)
			r.dropLocked(c, down.Error())
			if now.Sub(c.connectedAt) >= stableAfter {
				c.backoffStep = 0
			}
			r.failedLocked(ctx, c, down.Error(), e, now, trace.SpanContext{})
		case c.sessionHash != wantHash:
			c.log.InfoContext(ctx, "spec changed; reconnecting")
			r.dropLocked(c, "reconnecting after a spec change")
			c.nextRetry = time.Time{}
			c.backoffStep = 0 // a new spec starts its backoff afresh
		default:
			// Connected: prefix, filters and health settings apply in place.
			c.sessionSpec = want
			r.exposeLocked(c)
			return Result{}
		}
	}

	if c.attempting {
		if c.attemptHash != wantHash {
			c.cancelAttempt() // it reports back; the next pass starts afresh
		}
		return Result{}
	}
	if wait := c.nextRetry.Sub(now); wait > 0 {
		wctx := ctx
		if c.backoffSpan != nil {
			wctx = trace.ContextWithSpan(ctx, c.backoffSpan)
		}
		c.log.DebugContext(wctx, "waiting before the next attempt", "attempt", c.failures+1, "delay", wait.Round(time.Millisecond))
		return Result{RequeueAfter: wait}
	}
	r.startAttemptLocked(ctx, c, e, wantHash)
	return Result{}
}

// failedLocked takes in a failed attempt or a lost session (failed is the
// attempt's span context, invalid for a lost session) and starts the
// backoff wait, as a child of ctx's reconcile span.
func (r *Reconciler) failedLocked(ctx context.Context, c *conn, msg string, e *Entry, now time.Time, failed trace.SpanContext) {
	c.failures++
	delay := r.backoff(e.Conn, c.backoffStep)
	c.backoffStep++
	c.lastError = msg
	c.nextRetry = now.Add(delay)
	lctx := ctx
	if failed.IsValid() {
		lctx = trace.ContextWithSpanContext(ctx, failed) // the line is about that attempt
	}
	c.log.WarnContext(lctx, "connection attempt failed; will retry", "attempt", c.failures, "err", msg, "retryIn", delay.Round(time.Millisecond))

	c.endBackoff("superseded") // none is open here; never leak one
	opts := []trace.SpanStartOption{trace.WithAttributes(
		tracing.Server.String(c.name),
		tracing.Endpoint.String(tracing.EndpointOf(&e.Conn.Spec)),
		tracing.Attempt.Int(c.failures+1), // the attempt this wait precedes
		tracing.BackoffDelayMs.Int64(delay.Milliseconds()),
	)}
	if failed.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: failed}))
	}
	_, c.backoffSpan = r.tracer.Start(ctx, tracing.SpanBackoffWait, opts...)
}

// endBackoff ends the open backoff_wait span, saying how the wait ended, and
// returns its span context (invalid when none was open).
func (c *conn) endBackoff(outcome string) trace.SpanContext {
	if c.backoffSpan == nil {
		return trace.SpanContext{}
	}
	sc := c.backoffSpan.SpanContext()
	c.backoffSpan.SetAttributes(tracing.BackoffOutcome.String(outcome))
	c.backoffSpan.End()
	c.backoffSpan = nil
	return sc
}

// backoff is initial·2^step, capped at max, jittered down by up to 20% so
// that connections failing together spread out without exceeding the cap.
func (r *Reconciler) backoff(want *spec.McpConnection, step int) time.Duration {
	initial, maxDelay := want.Spec.BackoffInitial(), want.Spec.BackoffMax()
	d := initial
	for i := 0; i < step && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	return time.Duration(float64(d) * (1 - 0.2*r.opts.Jitter()))
}

// adoptLocked takes in a new session; ctx carries the attempt's span context.
func (r *Reconciler) adoptLocked(ctx context.Context, c *conn, res *attemptResult, now time.Time) {
	c.session = res.session
	c.sessionHash = res.hash
	c.sessionSpec = res.spec
	c.connectedAt = now
	c.failures = 0
	c.nextRetry = time.Time{}
	c.lastError = ""
	c.health = healthState{}
	if p := res.session.Process(); p != nil {
		c.process = p
	}
	info := res.session.Server()
	c.log.InfoContext(ctx, "connection established", "server", info.Name, "version", info.Version,
		"protocol", info.ProtocolVersion, "tools", len(res.session.Tools()))
	c.stopMonitor = r.startMonitor(c, res.session)
	r.exposeLocked(c)
}

func (r *Reconciler) exposeLocked(c *conn) {
	if r.opts.Exposer == nil || c.session == nil {
		return
	}
	want := c.sessionSpec
	r.opts.Exposer.Set(Exposed{
		Name:        c.name,
		Prefix:      want.ToolPrefix(),
		Filter:      want.Spec.Tools,
		CallTimeout: want.Spec.CallTimeoutDuration(),
		Tools:       c.session.Tools(),
		Session:     c.session,
	})
}

// dropLocked ends the live session (asynchronously) and hides its tools;
// a call to one of them meanwhile is answered with why.
func (r *Reconciler) dropLocked(c *conn, why string) {
	if c.session == nil {
		return
	}
	if c.stopMonitor != nil {
		c.stopMonitor()
		c.stopMonitor = nil
	}
	if r.opts.Exposer != nil && c.sessionSpec != nil {
		r.opts.Exposer.SetUnavailable(c.name, c.sessionSpec.ToolPrefix(), why)
	}
	r.closeAsync(c.log, c.session)
	c.session, c.sessionHash, c.sessionSpec = nil, "", nil
	c.health = healthState{}
}

// stopLocked ends the session and any attempt: suspend, invalid, removal.
func (r *Reconciler) stopLocked(c *conn, why string) {
	c.endBackoff(why)
	if c.attempting {
		c.cancelAttempt()
	}
	if c.session != nil {
		c.log.Info("disconnecting", "reason", why)
		r.dropLocked(c, why)
	}
	if c.result != nil && c.result.session != nil {
		r.closeAsync(c.log, c.result.session)
	}
	c.result = nil
}

func (r *Reconciler) closeAsync(log *slog.Logger, s Session) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := s.Close(); err != nil {
				log.Debug("close", "err", err)
			}
		}()
		select {
		case <-done:
		case <-time.After(closeBound):
			log.Warn("session did not close in time", "bound", closeBound)
		}
	}()
}

// startAttemptLocked starts a connect attempt in a goroutine. Its span is a
// child of the reconcile in rctx and outlives it; the attempt itself runs on
// the reconciler's lifetime, not on rctx.
func (r *Reconciler) startAttemptLocked(rctx context.Context, c *conn, e *Entry, hash string) {
	want := e.Conn
	attempt := c.failures + 1
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			tracing.Server.String(c.name),
			tracing.Endpoint.String(tracing.EndpointOf(&want.Spec)),
			tracing.Transport.String(want.Spec.TransportName()),
			tracing.Attempt.Int(attempt),
		),
	}
	if waited := c.endBackoff("retry"); waited.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: waited}))
	}
	_, span := r.tracer.Start(rctx, tracing.SpanConnectAttempt, opts...)
	ctx, cancel := context.WithTimeout(r.ctx, r.opts.ConnectTimeout)
	ctx = trace.ContextWithSpan(ctx, span)
	c.attempting, c.attemptHash, c.cancelAttempt = true, hash, cancel
	if want.Spec.Stdio != nil {
		c.starts++
	}
	c.log.InfoContext(ctx, "connecting", "attempt", attempt, "transport", want.Spec.TransportName())
	req := ConnectRequest{
		Name:        c.name,
		Conn:        want,
		ManifestDir: filepath.Dir(e.File),
		Logger:      c.log,
		OnToolsChanged: func() {
			r.toolsChanged(c)
		},
		// A session that ends by itself needs a reconcile; one we closed
		// gets a spare one, which finds nothing to do.
		OnEnd: func() {
			if r.ctx.Err() == nil {
				r.opts.Enqueue(c.name)
			}
		},
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer cancel()
		s, err := r.opts.Connector.Connect(ctx, req)
		res := &attemptResult{hash: hash, spec: want, session: s, err: err, span: span.SpanContext()}
		if err != nil {
			res.session = nil
			res.process = ProcessOf(err)
			if ctx.Err() != nil && r.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				res.err = fmt.Errorf("connect timed out after %s: %w", r.opts.ConnectTimeout, err)
			}
		}
		r.mu.Lock()
		stale := r.conns[c.name] != c
		// An attempt we cancelled (suspend, spec change, removal) is no
		// failure of the server's: drop its outcome.
		cancelled := errors.Is(ctx.Err(), context.Canceled)
		c.attempting, c.cancelAttempt = false, nil
		if !stale && !cancelled {
			c.result = res
		}
		r.mu.Unlock()
		endAttemptSpan(span, res.err, stale || cancelled)
		if (stale || cancelled) && s != nil {
			r.closeAsync(c.log, s)
		}
		if !stale && r.ctx.Err() == nil {
			r.opts.Enqueue(c.name)
		}
	}()
}

// endAttemptSpan records an attempt's outcome: success, failure (the
// redacted error as status), or canceled when tether itself abandoned it.
func endAttemptSpan(span trace.Span, err error, abandoned bool) {
	switch {
	case abandoned:
		span.SetAttributes(tracing.Result.String("canceled"))
	case err != nil:
		span.SetAttributes(tracing.Result.String(tracing.ResultFailure))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	default:
		span.SetAttributes(tracing.Result.String(tracing.ResultSuccess))
	}
	span.End()
}

// toolsChanged re-exposes a connection whose server changed its tools.
func (r *Reconciler) toolsChanged(c *conn) {
	r.mu.Lock()
	r.exposeLocked(c)
	r.mu.Unlock()
	r.opts.Enqueue(c.name) // tool counts in status
}

// monitor probes one live session at its health interval. It runs from a
// timer, not a goroutine of its own: between probes an idle connection
// holds no goroutine (1,000 connections, 1,000 fewer stacks). The session's
// end reaches the reconciler through ConnectRequest.OnEnd.
type monitor struct {
	r     *Reconciler
	c     *conn
	s     Session
	ctx   context.Context // ends when the reconciler drops the session
	timer *time.Timer

	lastTail string // only the tick touches it; ticks never overlap
}

// startMonitor schedules the first probe of s and returns what stops them.
// Called with r.mu held.
func (r *Reconciler) startMonitor(c *conn, s Session) context.CancelFunc {
	ctx, cancel := context.WithCancel(r.ctx)
	m := &monitor{r: r, c: c, s: s, ctx: ctx}
	interval, _, _, _ := m.settingsLocked()
	m.timer = time.AfterFunc(interval, m.tick)
	return func() {
		cancel()
		m.timer.Stop()
	}
}

// settingsLocked reads the health settings of the session's spec, so that
// edits apply in place at the next tick. Called with r.mu held.
func (m *monitor) settingsLocked() (interval, timeout time.Duration, threshold int, endpoint string) {
	threshold = 1
	if sp := m.c.sessionSpec; sp != nil {
		interval = sp.Spec.HealthInterval()
		timeout = sp.Spec.HealthTimeout()
		threshold = sp.Spec.FailureThreshold()
		endpoint = tracing.EndpointOf(&sp.Spec)
	}
	if interval <= 0 {
		interval = spec.DefaultHealthInterval
		timeout = spec.DefaultHealthTimeout
	}
	return interval, timeout, threshold, endpoint
}

// tick sends one probe, records its outcome, and schedules the next one
// unless the session is down, ended or dropped.
//
// A stdio child's stderr tail reaches the status file at the same pace: a
// chatty server costs at most one status write per health interval.
func (m *monitor) tick() {
	r, c, s := m.r, m.c, m.s
	r.mu.Lock()
	// Checked under r.mu, which stopLocked and Shutdown hold while they
	// cancel m.ctx: a tick either sees the cancel or is counted in r.wg
	// before Shutdown waits.
	if m.ctx.Err() != nil {
		r.mu.Unlock()
		return
	}
	r.wg.Add(1)
	_, timeout, threshold, endpoint := m.settingsLocked()
	r.mu.Unlock()
	defer r.wg.Done()
	select {
	case <-s.Done():
		return // OnEnd enqueued it
	default:
	}

	ctx := m.ctx
	pctx, cancel := context.WithTimeout(ctx, timeout)
	pctx, span := r.tracer.Start(pctx, tracing.SpanHealthCheck, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			tracing.Server.String(c.name),
			tracing.Endpoint.String(endpoint),
			tracing.HealthThreshold.Int(threshold),
		))
	start := time.Now()
	err := s.Probe(pctx)
	cancel()
	if ctx.Err() != nil {
		span.SetAttributes(tracing.Result.String("canceled"))
		span.End()
		return
	}
	r.mu.Lock()
	if ctx.Err() != nil || c.session != s {
		// Dropped (and maybe replaced) while probing: this result is
		// about a session that is gone.
		r.mu.Unlock()
		span.SetAttributes(tracing.Result.String("canceled"))
		span.End()
		return
	}
	r.opts.Metrics.ObserveHealthCheck(c.name, time.Since(start))
	before := c.health
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("health check timed out after %s", timeout)
		}
		c.health.failures++
		c.health.lastErr = err.Error()
		c.log.WarnContext(pctx, "health check failed", "failures", c.health.failures, "threshold", threshold, "err", err)
		if c.health.failures >= threshold {
			c.health.down = fmt.Errorf("%d health checks in a row failed: %w", c.health.failures, err)
		}
	} else {
		if c.health.failures > 0 {
			c.log.Info("health check passed again")
		}
		c.health.failures, c.health.lastErr = 0, ""
	}
	changed := before.failures != c.health.failures || (before.down == nil) != (c.health.down == nil)
	if p := s.Process(); p != nil && len(p.StderrTail) > 0 {
		if tail := p.StderrTail[len(p.StderrTail)-1]; tail != m.lastTail {
			m.lastTail, changed = tail, true
		}
	}
	down := c.health.down != nil
	failures := c.health.failures
	next, _, _, _ := m.settingsLocked()
	if !down {
		// Under r.mu: a stop that comes later stops this new schedule.
		m.timer.Reset(next)
	}
	r.mu.Unlock()
	span.SetAttributes(tracing.HealthFailures.Int(failures))
	if err != nil {
		span.SetAttributes(tracing.Result.String(tracing.ResultFailure))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(tracing.Result.String(tracing.ResultSuccess))
	}
	span.End()
	if changed {
		r.opts.Enqueue(c.name)
	}
}

// Shutdown closes every connection gracefully and waits for every goroutine
// the reconciler started, or until ctx is done.
func (r *Reconciler) Shutdown(ctx context.Context) error {
	r.mu.Lock()
	for _, c := range r.conns {
		r.stopLocked(c, "tether is shutting down")
	}
	r.mu.Unlock()
	r.cancel()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FinalStatus writes every connection's status as it is after Shutdown.
func (r *Reconciler) FinalStatus() {
	for _, name := range r.opts.Desired.Names() {
		if _, err := r.Reconcile(context.Background(), name); err != nil {
			r.log.Warn("writing final status", "connection", name, "err", err)
		}
	}
}
