package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/spec"
)

// Defaults of a supervisor.
const (
	// DefaultConnectTimeout bounds one connect attempt (spawn + initialize +
	// tools/list).
	DefaultConnectTimeout = 60 * time.Second
	// StableAfter is how long a session must stay up before a drop starts
	// the backoff from the beginning again; a server that dies right after
	// connecting keeps backing off instead of restarting in a hot loop.
	StableAfter = 10 * time.Second
	// closeBound bounds a graceful close (stdin, SIGTERM, SIGKILL).
	closeBound = 10 * time.Second
)

// Metrics is what a supervisor reports; it is called without the
// supervisor's lock held.
type Metrics interface {
	ObserveAttempt(name string, success bool)
	ObserveHealthCheck(name string, d time.Duration)
}

// Options wire a Supervisor.
type Options struct {
	Name      string
	Logger    *slog.Logger // lines carry connection=Name already
	Connector Connector
	Metrics   Metrics // may be nil
	Tracer    trace.Tracer
	// ConnectTimeout bounds one attempt (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// Notify asks for this connection to be reconciled soon. It must not
	// block.
	Notify func()
	// OnDrop is told, before a live session is closed, that it is going
	// and why, with the spec it ran: the reconciler hides its tools then,
	// so that a call meanwhile is answered with why, or, for an OnDemand
	// server stopped because it was idle (idle true), has the gateway
	// serve its catalog again. May be nil.
	OnDrop func(running *spec.McpConnection, why string, idle bool)
	// Starts and LastExitCode carry on the counters of a previous run
	// (from its status), so restarts keep counting across tether restarts.
	Starts       int
	LastExitCode *int
	// Now and Jitter are for tests. The backoff delay is scaled by
	// 1-0.2*Jitter(), Jitter in [0,1).
	Now    func() time.Time
	Jitter func() float64
}

// Want is what the reconciler wants of a connection: its spec, the
// directory relative paths of the spec resolve against, and the version of
// the Secrets it reads (desired.Entry.SecretsVersion).
type Want struct {
	Conn           *spec.McpConnection
	Dir            string
	SecretsVersion string
	// Dormant is set for an OnDemand connection whose catalog is known: it
	// is started only when Demand asks, and stopped again after its idle
	// timeout. An OnDemand connection never seen before is not dormant: it
	// is started once to learn its catalog.
	Dormant bool
}

// hash tells two wants apart where it matters for the session: a change of
// connect-relevant fields, of the directory (a manifest moved elsewhere
// resolves its relative command anew) or of a Secret the spec reads (a
// rotated token) needs a new session.
func (w Want) hash() string { return w.specHash() + "|" + w.SecretsVersion }

// specHash is hash without the Secrets' version.
func (w Want) specHash() string { return spec.SessionKey(&w.Conn.Spec, w.Dir) }

// Supervisor keeps one connection. All methods are safe for concurrent use.
type Supervisor struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context // parent of every attempt and probe; ended by Close
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu sync.Mutex
	// Everything below is guarded by mu.
	state State // moved only by to, along Transitions
	// illegalMoves counts the moves outside Transitions that to took
	// (bugs); strictMoves makes to panic on one instead (tests).
	illegalMoves int
	strictMoves  bool

	session     Session
	sessionHash string
	// sessionSpecHash is sessionHash without the Secrets' version: it
	// tells a rotated Secret from a changed spec in the log.
	sessionSpecHash string
	sessionSpec     *spec.McpConnection
	stopMonitor     context.CancelFunc
	connectedAt     time.Time

	attempt *attempt       // the attempt running: in Connecting, or winding down after a stop
	result  *attemptResult // Reported: the finished attempt's outcome

	failures    int // failed attempts since the last success (status.attempt)
	backoffStep int // position in the backoff sequence; reset once stable
	nextRetry   time.Time
	lastError   string
	// auth is set while the last failure said that no valid OAuth token
	// can be had; a login-kind one stops the retries until RetryNow (new
	// tokens) or a new spec.
	auth *authState
	// unsupported is the message of the last failure when it was a
	// sandbox the kernel cannot enforce (SandboxUnsupported): retrying
	// will not help until the manifest or the kernel changes.
	unsupported string
	// refusal is set while tether refuses the server's confinement policy
	// (Refused): no attempt starts until the spec changes.
	refusal *refusal
	// backoffSpan is the open mcp.backoff_wait span: started when a failure
	// decides the delay, ended when the next attempt starts or the wait is
	// abandoned (stopLocked).
	backoffSpan trace.Span

	health healthState

	// The callers waiting in Demand, which are not the connection's
	// state: demanded says one waits for a session, so the next step
	// starts an attempt at once, whatever the backoff or dormancy says.
	demanded bool
	// Signals, each closed and replaced (signal) when it happens: tookIn
	// when Step takes in an attempt's outcome; stopped when a stop ends
	// the demands pending (stoppedBy says why); changed when either
	// happens or the session goes, which is what Demand waits on. A
	// Demand keeps the tookIn and stopped it found when it came: closed
	// since, they say what it waited for happened.
	tookIn    chan struct{}
	stopped   chan struct{}
	stoppedBy string
	changed   chan struct{}
	// waiters counts the Demands waiting now.
	waiters int

	starts       int // stdio children started (restarts = starts-1)
	lastExitCode *int
	process      *spec.ProcessStatus // last known facts of the child

	out effects // what to tell others once mu is released
}

// attempt is a connect attempt in flight.
type attempt struct {
	hash   string // the want it runs
	cancel context.CancelFunc
}

type attemptResult struct {
	hash     string
	specHash string // hash without the Secrets' version
	spec     *spec.McpConnection
	session  Session
	err      error
	process  *spec.ProcessStatus
	span     trace.SpanContext // the attempt's mcp.connect_attempt span
}

// authState is an authorization failure: phase AuthRequired.
type authState struct {
	msg      string // what to do, from the error (`run tether login NAME`)
	login    bool   // only new tokens help: wait for them
	hash     string // the want it failed with
	released bool   // RetryNow let the next attempt start
}

// refusal is a confinement policy tether refused: phase Refused.
type refusal struct {
	msg      string // the refusal, naming the manifest field and the path
	specHash string // the spec it was refused for (Want.specHash)
}

// authRequired finds, in err's chain, the error that says no valid OAuth
// token can be had (controller/oauth's AuthRequiredError, found by its
// method so that this package need not import it): its message, and
// whether only a person's login helps.
func authRequired(err error) (msg string, login, ok bool) {
	var ae interface {
		error
		AuthRequired() bool
	}
	if errors.As(err, &ae) {
		return ae.Error(), ae.AuthRequired(), true
	}
	return "", false, false
}

// sandboxUnsupported finds, in err's chain, the error that says the
// kernel cannot enforce the server's sandbox (controller/sandbox's
// UnsupportedError, found by its method).
func sandboxUnsupported(err error) (msg string, ok bool) {
	var se interface {
		error
		SandboxUnsupported() bool
	}
	if errors.As(err, &se) && se.SandboxUnsupported() {
		return se.Error(), true
	}
	return "", false
}

// policyRefused finds, in err's chain, the error that says tether refuses
// the server's confinement policy itself (controller/sandbox's
// RefusedError, found by its method): retrying cannot change it.
func policyRefused(err error) (msg string, ok bool) {
	var re interface {
		error
		PolicyRefused() bool
	}
	if errors.As(err, &re) && re.PolicyRefused() {
		return re.Error(), true
	}
	return "", false
}

// capSteps is a backoff step past any cap: the retries of refused client
// credentials wait the longest delay from the start.
const capSteps = 64

type healthState struct {
	failures int
	lastErr  string
	down     error // set once failures reached the threshold
}

// effects are calls into other components decided under mu and made after
// it is released, in order: attempts observed, dropped sessions hidden,
// then closed.
type effects struct {
	attempts []bool
	drops    []drop
	closes   []Session
}

type drop struct {
	session Session
	spec    *spec.McpConnection
	why     string
	idle    bool // stopped for idleness: the gateway keeps serving its catalog
}

// New returns a supervisor for one connection; it does nothing until Step.
func New(parent context.Context, opts Options) *Supervisor {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Jitter == nil {
		opts.Jitter = rand.Float64
	}
	if opts.Notify == nil {
		opts.Notify = func() {}
	}
	if opts.Tracer == nil {
		opts.Tracer = tracing.Tracer(nil)
	}
	ctx, cancel := context.WithCancel(parent)
	return &Supervisor{
		opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		starts: opts.Starts, lastExitCode: opts.LastExitCode,
		tookIn: make(chan struct{}), stopped: make(chan struct{}), changed: make(chan struct{}),
	}
}

// lock takes mu; unlock releases it and then makes the calls decided under
// it. Every public method that changes state uses the pair.
func (s *Supervisor) lock() { s.mu.Lock() }

func (s *Supervisor) unlock() {
	out := s.out
	s.out = effects{}
	s.mu.Unlock()
	for _, ok := range out.attempts {
		if s.opts.Metrics != nil {
			s.opts.Metrics.ObserveAttempt(s.opts.Name, ok)
		}
	}
	for _, d := range out.drops {
		if s.opts.OnDrop != nil && d.spec != nil {
			s.opts.OnDrop(d.spec, d.why, d.idle)
		}
		s.closeAsync(d.session)
	}
	for _, c := range out.closes {
		s.closeAsync(c)
	}
}

// Step brings the connection one step toward want, as an ordered list of
// named sub-steps (each a move of the machine in state.go): take in a
// finished attempt, watch the live session (a session that ended or failed
// its health checks is dropped; a spec change lets it go; an idle OnDemand
// server stops), wait for the attempt in flight, then decide whether an
// attempt starts now. It returns how long to wait before the next look when
// a backoff delay is running, or when an OnDemand server may turn idle (0
// otherwise: the supervisor asks for the next look itself). ctx carries the
// reconcile's span, the parent of the spans Step starts.
func (s *Supervisor) Step(ctx context.Context, want Want) (retryIn time.Duration) {
	s.lock()
	defer s.unlock()
	if s.state == Closed {
		return 0
	}
	st := step{ctx: ctx, want: want, hash: want.hash(), now: s.opts.Now()}
	s.takeInOutcome(st)
	if wait, done := s.watchSession(st); done {
		return wait
	}
	if s.attempt != nil {
		s.cancelStaleAttempt(st)
		return 0
	}
	s.forgetAuthForNewSpec(st)
	s.forgetRefusalForNewSpec(st)
	if s.awaitingLogin() {
		s.to(AuthRequired, EvAwaitLogin)
		return 0 // waits for new tokens (RetryNow), not for a timer
	}
	if s.refusal != nil {
		s.to(Refused, EvAwaitSpec)
		return 0 // waits for a new spec, not for a timer
	}
	if want.Dormant && !s.demanded {
		s.to(Dormant, EvSleep)
		return 0 // started by the next Demand
	}
	if wait := s.backoffLeft(st); wait > 0 {
		return s.waitBackoff(st, wait)
	}
	s.startAttemptLocked(ctx, want, st.hash)
	return 0
}

// step is what one Step works from.
type step struct {
	ctx  context.Context
	want Want
	hash string // want.hash()
	now  time.Time
}

// takeInOutcome takes in a finished attempt (Reported): the new session is
// adopted, a failure starts the backoff, a session made for a spec no longer
// wanted is closed.
func (s *Supervisor) takeInOutcome(st step) {
	res := s.result
	if s.state != Reported {
		return
	}
	s.result = nil
	s.out.attempts = append(s.out.attempts, res.err == nil)
	if res.process != nil {
		s.process = res.process
		if res.process.LastExitCode != nil {
			s.lastExitCode = res.process.LastExitCode
		}
	}
	switch {
	case res.err != nil:
		s.failedLocked(st.ctx, res.err, st.want.Conn, res.hash, res.specHash, st.now, res.span)
	case res.hash != st.hash:
		s.out.closes = append(s.out.closes, res.session)
		s.to(Idle, EvStale)
	default:
		s.adoptLocked(trace.ContextWithSpanContext(st.ctx, res.span), res, st.now)
	}
	signal(&s.tookIn)
	s.broadcastLocked()
}

// watchSession looks at the live session (Connected): one that ended or
// failed its health checks is dropped and counted as a failure; one whose
// spec or Secrets changed is let go (the attempt for the new spec follows
// in this step); an OnDemand server nobody used for idleTimeout stops. A
// session that stays says how long until the next look (done true).
func (s *Supervisor) watchSession(st step) (wait time.Duration, done bool) {
	ss := s.session
	if s.state != Connected {
		return 0, false
	}
	if down := s.sessionDown(ss); down != nil {
		s.log.WarnContext(st.ctx, "connection lost; reconnecting", "err", down)
		ran, ranSpec := s.sessionHash, s.sessionSpecHash
		s.dropLocked(down.Error())
		if st.now.Sub(s.connectedAt) >= StableAfter {
			s.backoffStep = 0
		}
		s.failedLocked(st.ctx, down, st.want.Conn, ran, ranSpec, st.now, trace.SpanContext{})
		return 0, false
	}
	if s.sessionHash != st.hash {
		what := "spec"
		if s.sessionSpecHash == st.want.specHash() {
			what = "referenced Secret"
		}
		s.log.InfoContext(st.ctx, what+" changed; reconnecting")
		s.dropLocked("reconnecting after a " + what + " change")
		s.nextRetry = time.Time{}
		s.backoffStep = 0 // a new spec starts its backoff afresh
		s.to(Idle, EvRespec)
		return 0, false
	}
	// Prefix, filters and health settings apply in place.
	s.sessionSpec = st.want.Conn
	if !st.want.Conn.Spec.OnDemand() {
		return 0, true
	}
	// An OnDemand server that nobody used for idleTimeout stops.
	idleFor, busy := idleness(ss, s.connectedAt, st.now)
	left := st.want.Conn.Spec.IdleTimeout() - idleFor
	switch {
	case busy || s.demanded:
		// Serving: look again at most idleTimeout (30 s at the most) from
		// now; its last activity sets the deadline then.
		return min(st.want.Conn.Spec.IdleTimeout(), 30*time.Second), true
	case left > 0:
		return left, true // look again when it may be idle
	}
	s.log.InfoContext(st.ctx, "stopping an idle server; it starts again at the next call", "idleFor", idleFor.Round(time.Second))
	s.dropIdleLocked(fmt.Sprintf("idle for %s", idleFor.Round(time.Second)))
	s.to(Dormant, EvIdle)
	return 0, true
}

// sessionDown says why the live session is down: it ended, or failed
// failureThreshold probes in a row; nil while it serves.
func (s *Supervisor) sessionDown(ss Session) error {
	select {
	case <-ss.Done():
	default:
		return s.health.down
	}
	down := ss.Err()
	if down == nil {
		down = errors.New("session closed")
	}
	if p := ss.Process(); p != nil {
		s.process = p
		if p.LastExitCode != nil {
			s.lastExitCode = p.LastExitCode
		}
	}
	return fmt.Errorf("connection lost: %w", down)
}

// cancelStaleAttempt cancels the attempt in flight when it runs a spec no
// longer wanted; it reports back, and the next step starts afresh.
func (s *Supervisor) cancelStaleAttempt(st step) {
	if s.attempt.hash != st.hash {
		s.attempt.cancel()
	}
}

// forgetAuthForNewSpec forgets an authorization failure of another spec:
// a new spec (another client, other scopes, another server) may well be
// what was needed, so it is tried now.
func (s *Supervisor) forgetAuthForNewSpec(st step) {
	if a := s.auth; a != nil && a.hash != st.hash {
		s.auth, s.nextRetry, s.backoffStep = nil, time.Time{}, 0
	}
}

// forgetRefusalForNewSpec forgets a refused policy once the spec (or the
// directory it resolves against) changed: the new one is tried at once. A
// new version of a Secret it reads changes no policy.
func (s *Supervisor) forgetRefusalForNewSpec(st step) {
	if r := s.refusal; r != nil && r.specHash != st.want.specHash() {
		s.refusal, s.nextRetry, s.backoffStep = nil, time.Time{}, 0
	}
}

// awaitingLogin reports whether only new tokens let an attempt start.
func (s *Supervisor) awaitingLogin() bool {
	a := s.auth
	return a != nil && a.login && !a.released
}

// backoffLeft is what is left of the backoff delay; a Demand skips it.
func (s *Supervisor) backoffLeft(st step) time.Duration {
	if s.demanded {
		s.nextRetry = time.Time{} // a call waits: no backoff delay
	}
	return s.nextRetry.Sub(st.now)
}

// waitBackoff waits out the backoff delay (Backoff): the next look comes
// when it is over.
func (s *Supervisor) waitBackoff(st step, wait time.Duration) time.Duration {
	wctx := st.ctx
	if s.backoffSpan != nil {
		wctx = trace.ContextWithSpan(st.ctx, s.backoffSpan)
	}
	s.log.DebugContext(wctx, "waiting before the next attempt", "attempt", s.failures+1, "delay", wait.Round(time.Millisecond))
	s.to(Backoff, EvWait)
	return wait
}

// Suspend ends the session and any attempt, and forgets the backoff: a
// suspended connection starts afresh when it is resumed.
func (s *Supervisor) Suspend(ctx context.Context) {
	s.lock()
	defer s.unlock()
	if s.state == Closed {
		return
	}
	if s.session != nil || s.attempt != nil {
		s.log.InfoContext(ctx, "connection suspended")
	}
	s.stopLocked("suspended")
	s.failures, s.backoffStep, s.nextRetry, s.auth, s.refusal = 0, 0, time.Time{}, nil, nil
	s.to(Suspended, EvSuspend)
}

// Stop ends the session and any attempt, saying why (a manifest that is
// invalid, tether shutting down). A later Step starts again.
func (s *Supervisor) Stop(why string) {
	s.lock()
	defer s.unlock()
	if s.state == Closed {
		return
	}
	s.stopLocked(why)
	s.to(Stopped, EvStop)
}

// Close stops for good (the connection was removed): what is running is
// stopped, attempts that report back later are discarded, and no new work
// starts. Wait waits for its goroutines.
func (s *Supervisor) Close(why string) {
	s.lock()
	defer s.unlock()
	s.stopLocked(why)
	s.to(Closed, EvClose)
	s.cancel()
	s.broadcastLocked()
}

// Demand returns the live session, starting one when there is none: an
// OnDemand server that is idle, or a connection that waits to retry (its
// backoff delay is skipped). However many calls demand at once, one attempt
// runs; each waits for it within its own ctx. It fails with the attempt's
// error when the attempt fails, and with ctx's when ctx ends first.
func (s *Supervisor) Demand(ctx context.Context) (Session, error) {
	s.lock()
	if ss, done, err := s.demandAnswerLocked(); done {
		s.unlock()
		return ss, err
	}
	tookIn, stopped := s.tookIn, s.stopped
	s.waiters++
	// An attempt already running is the one this demand waits for. A
	// session that ended is dropped by the next step, which then starts an
	// attempt at once.
	if s.attempt == nil && s.state != Reported {
		s.demanded = true
	}
	s.unlock()
	defer func() {
		s.mu.Lock()
		s.waiters--
		s.mu.Unlock()
	}()
	s.opts.Notify() // the next step starts the attempt
	for {
		s.mu.Lock()
		if ss, done, err := s.demandAnswerLocked(); done {
			s.mu.Unlock()
			return ss, err
		}
		switch {
		case signalled(stopped):
			why := s.stoppedBy
			s.mu.Unlock()
			return nil, fmt.Errorf("the connection was stopped: %s", why)
		case signalled(tookIn) && s.attempt == nil && !s.demanded:
			// The attempt this demand waited for failed.
			msg := s.lastError
			s.mu.Unlock()
			return nil, fmt.Errorf("could not connect: %s", msg)
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// demandAnswerLocked answers a Demand at once when it can: the live
// session, or why there will be none (removed, or waiting for a login).
func (s *Supervisor) demandAnswerLocked() (ss Session, done bool, err error) {
	switch {
	case s.state == Closed:
		return nil, true, errors.New("the connection was removed")
	case s.session != nil && !ended(s.session):
		return s.session, true, nil
	case s.awaitingLogin():
		return nil, true, errors.New(s.auth.msg)
	case s.refusal != nil:
		return nil, true, errors.New(s.refusal.msg)
	}
	return nil, false, nil
}

// ended reports whether a session is over (the reconciler has not taken
// it in yet).
func ended(ss Session) bool {
	select {
	case <-ss.Done():
		return true
	default:
		return false
	}
}

// idleness is how long the session has served nothing, and whether it is
// busy now (a call in flight, a subscription open).
func idleness(ss Session, connectedAt, now time.Time) (idleFor time.Duration, busy bool) {
	busy, last := ss.Activity()
	if last.Before(connectedAt) {
		last = connectedAt
	}
	return now.Sub(last), busy
}

// Wait waits for every goroutine the supervisor started, or until ctx ends.
func (s *Supervisor) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RetryNow lets the next Step start an attempt at once, skipping what is
// left of the backoff wait, or ending the wait for new OAuth tokens (tether
// run calls it when `tether login` stored some).
func (s *Supervisor) RetryNow() {
	s.lock()
	defer s.unlock()
	s.nextRetry = time.Time{}
	if s.auth != nil {
		s.auth.released = true
	}
}

// failedLocked takes in a failed attempt or a lost session (failed is the
// attempt's span context, invalid for a lost session; hash the want it ran
// with, specHash the same without the Secrets' version) and starts the
// backoff wait (Backoff), as a child of ctx's reconcile span. A failure that
// needs a login waits for new tokens instead (AuthRequired), a confinement
// policy tether refuses waits for a new spec (Refused); refused client
// credentials and a sandbox the kernel cannot enforce wait the backoff's
// longest delay.
func (s *Supervisor) failedLocked(ctx context.Context, cause error, want *spec.McpConnection, hash, specHash string, now time.Time, failed trace.SpanContext) {
	msg := cause.Error()
	s.failures++
	s.lastError = msg
	s.auth = nil
	s.unsupported = ""
	s.refusal = nil
	lctx := ctx
	if failed.IsValid() {
		lctx = trace.ContextWithSpanContext(ctx, failed) // the line is about that attempt
	}
	if amsg, login, ok := authRequired(cause); ok {
		s.auth = &authState{msg: amsg, login: login, hash: hash}
		if login {
			s.nextRetry = time.Time{}
			s.endBackoff("superseded")
			s.log.WarnContext(lctx, "connection needs a login; waiting for new tokens", "attempt", s.failures, "err", msg)
			s.to(AuthRequired, EvFail)
			return
		}
		s.backoffStep = capSteps
	}
	if rmsg, ok := policyRefused(cause); ok {
		s.refusal = &refusal{msg: rmsg, specHash: specHash}
		s.nextRetry = time.Time{}
		s.endBackoff("superseded")
		s.log.WarnContext(lctx, "tether refuses the server's confinement policy; waiting for a new spec", "attempt", s.failures, "err", msg)
		s.to(Refused, EvFail)
		return
	}
	if smsg, ok := sandboxUnsupported(cause); ok {
		s.unsupported = smsg
		s.backoffStep = capSteps // the kernel will not change soon: the longest wait
	}
	delay := s.backoff(want, s.backoffStep)
	s.backoffStep++
	s.nextRetry = now.Add(delay)
	s.to(Backoff, EvFail)
	s.log.WarnContext(lctx, "connection attempt failed; will retry", "attempt", s.failures, "err", msg, "retryIn", delay.Round(time.Millisecond))

	s.endBackoff("superseded") // none is open here; never leak one
	opts := []trace.SpanStartOption{trace.WithAttributes(
		tracing.Server.String(s.opts.Name),
		tracing.Endpoint.String(tracing.EndpointOf(&want.Spec)),
		tracing.Attempt.Int(s.failures+1), // the attempt this wait precedes
		tracing.BackoffDelayMs.Int64(delay.Milliseconds()),
	)}
	if failed.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: failed}))
	}
	_, s.backoffSpan = s.opts.Tracer.Start(ctx, tracing.SpanBackoffWait, opts...)
}

// endBackoff ends the open backoff_wait span, saying how the wait ended, and
// returns its span context (invalid when none was open).
func (s *Supervisor) endBackoff(outcome string) trace.SpanContext {
	if s.backoffSpan == nil {
		return trace.SpanContext{}
	}
	sc := s.backoffSpan.SpanContext()
	s.backoffSpan.SetAttributes(tracing.BackoffOutcome.String(outcome))
	s.backoffSpan.End()
	s.backoffSpan = nil
	return sc
}

// backoff is initial·2^step, capped at max, jittered down by up to 20% so
// that connections failing together spread out without exceeding the cap.
// initial·2^step is compared as initial against max/2^step, which cannot
// overflow however large step is (capSteps; a shift by 64 or more is 0).
func (s *Supervisor) backoff(want *spec.McpConnection, step int) time.Duration {
	initial, maxDelay := want.Spec.BackoffInitial(), want.Spec.BackoffMax()
	d := maxDelay
	if initial <= maxDelay>>step {
		d = initial << step
	}
	return time.Duration(float64(d) * (1 - 0.2*s.opts.Jitter()))
}

// adoptLocked takes in a new session; ctx carries the attempt's span context.
func (s *Supervisor) adoptLocked(ctx context.Context, res *attemptResult, now time.Time) {
	s.demanded = false // whatever was demanded, this session serves it
	s.session = res.session
	s.sessionHash = res.hash
	s.sessionSpecHash = res.specHash
	s.sessionSpec = res.spec
	s.connectedAt = now
	s.failures = 0
	s.nextRetry = time.Time{}
	s.lastError = ""
	s.auth = nil
	s.unsupported = ""
	s.refusal = nil
	s.health = healthState{}
	s.to(Connected, EvAdopt)
	if p := res.session.Process(); p != nil {
		s.process = p
	}
	info := res.session.Server()
	s.log.InfoContext(ctx, "connection established", "server", info.Name, "version", info.Version,
		"protocol", info.ProtocolVersion, "tools", len(res.session.Tools()))
	s.stopMonitor = s.startMonitor(res.session)
}

// dropLocked ends the live session: once mu is released, OnDrop hides it
// and it is closed in the background.
func (s *Supervisor) dropLocked(why string) {
	if s.session == nil {
		return
	}
	s.stopMonitor() // adoptLocked started one with the session
	s.stopMonitor = nil
	s.out.drops = append(s.out.drops, drop{session: s.session, spec: s.sessionSpec, why: why})
	s.session, s.sessionHash, s.sessionSpecHash, s.sessionSpec = nil, "", "", nil
	s.health = healthState{}
	s.broadcastLocked()
}

// dropIdleLocked is dropLocked for an OnDemand server stopped because it
// was idle: no failure, and the gateway keeps serving its catalog.
func (s *Supervisor) dropIdleLocked(why string) {
	s.dropLocked(why)
	s.out.drops[len(s.out.drops)-1].idle = true
}

// broadcastLocked wakes every Demand waiting for a change.
func (s *Supervisor) broadcastLocked() { signal(&s.changed) }

// signal closes *ch, which tells whoever holds it, and replaces it for
// those who come later.
func signal(ch *chan struct{}) {
	close(*ch)
	*ch = make(chan struct{})
}

// signalled reports whether ch was signalled.
func signalled(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stopLocked ends the session and any attempt, and the demands waiting;
// the caller moves the machine to Stopped, Suspended or Closed. A cancelled
// attempt winds down in its goroutine; its outcome is discarded.
func (s *Supervisor) stopLocked(why string) {
	// The demands waiting are told why; one that comes later waits on
	// the next signal.
	s.demanded = false
	s.stoppedBy = why
	signal(&s.stopped)
	s.broadcastLocked()
	s.endBackoff(why)
	if s.attempt != nil {
		s.attempt.cancel()
	}
	if s.session != nil {
		s.log.Info("disconnecting", "reason", why)
		s.dropLocked(why)
	}
	if s.result != nil && s.result.session != nil {
		s.out.closes = append(s.out.closes, s.result.session)
	}
	s.result = nil
}

// closeAsync closes a session in the background, bounded by closeBound.
func (s *Supervisor) closeAsync(ss Session) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		done := make(chan struct{})
		go func() {
			defer close(done)
			if err := ss.Close(); err != nil {
				s.log.Debug("close", "err", err)
			}
		}()
		t := time.NewTimer(closeBound)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
			s.log.Warn("session did not close in time", "bound", closeBound)
		}
	}()
}

// startAttemptLocked starts a connect attempt in a goroutine. Its span is a
// child of the reconcile in rctx and outlives it; the attempt itself runs on
// the supervisor's lifetime, not on rctx.
func (s *Supervisor) startAttemptLocked(rctx context.Context, want Want, hash string) {
	n := s.failures + 1
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			tracing.Server.String(s.opts.Name),
			tracing.Endpoint.String(tracing.EndpointOf(&want.Conn.Spec)),
			tracing.Transport.String(want.Conn.Spec.TransportName()),
			tracing.Attempt.Int(n),
		),
	}
	if waited := s.endBackoff("retry"); waited.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: waited}))
	}
	_, span := s.opts.Tracer.Start(rctx, tracing.SpanConnectAttempt, opts...)
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.ConnectTimeout)
	ctx = trace.ContextWithSpan(ctx, span)
	s.attempt = &attempt{hash: hash, cancel: cancel}
	s.to(Connecting, EvStart)
	s.demanded = false // this is the attempt that was asked for
	if want.Conn.Spec.RunsProcess() {
		s.starts++
	}
	s.log.InfoContext(ctx, "connecting", "attempt", n, "transport", want.Conn.Spec.TransportName())
	req := ConnectRequest{
		Name:        s.opts.Name,
		Conn:        want.Conn,
		ManifestDir: want.Dir,
		Logger:      s.log,
		// The reconcile that follows re-exposes the new tool list.
		OnToolsChanged: s.opts.Notify,
		// A session that ends by itself needs a reconcile; one we closed
		// gets a spare one, which finds nothing to do.
		OnEnd: func() {
			if s.ctx.Err() == nil {
				s.opts.Notify()
			}
		},
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cancel()
		ss, err := s.opts.Connector.Connect(ctx, req)
		res := &attemptResult{hash: hash, specHash: want.specHash(),
			spec: want.Conn, session: ss, err: err, span: span.SpanContext()}
		if err != nil {
			res.session = nil
			res.process = spec.ProcessOf(err)
			if ctx.Err() != nil && s.ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				res.err = fmt.Errorf("connect timed out after %s: %w", s.opts.ConnectTimeout, err)
			}
		}
		s.mu.Lock()
		s.attempt = nil
		// An attempt we cancelled (suspend, spec change, removal) is no
		// failure of the server's: drop its outcome. A stop moved the
		// machine on already.
		abandoned := s.state != Connecting || errors.Is(ctx.Err(), context.Canceled)
		switch {
		case !abandoned:
			s.result = res
			s.to(Reported, EvReport)
		case s.state == Connecting:
			// Cancelled for a new spec: the next step starts afresh.
			s.to(Idle, EvAbandon)
		}
		// The demands still waiting (those that came after a Stop or
		// Suspend, while this attempt wound down, or that wait through a
		// new spec) are for the next attempt, whatever the state: the
		// next step starts it at once.
		if abandoned && s.waiters > 0 && s.state != Closed {
			s.demanded = true
			s.broadcastLocked()
		}
		s.mu.Unlock()
		endAttemptSpan(span, res.err, abandoned)
		if abandoned && ss != nil {
			s.closeAsync(ss)
		}
		if s.ctx.Err() == nil {
			s.opts.Notify()
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
