package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/supervisor"
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
	DefaultConnectTimeout = supervisor.DefaultConnectTimeout
	// DefaultConnectingGrace is how long a new connection may stay
	// Connecting before its status says so: a server that connects within
	// it goes straight to Connected, one status write instead of two (at
	// 1,000 connections, creating status files is what start-up spends most
	// on).
	DefaultConnectingGrace = 250 * time.Millisecond
	// DefaultConnectingGraceBusy is how much longer a new connection's
	// Connecting status is put off when, at the end of its grace, more
	// names wait in the queue than there are workers (ReconcilerOptions.
	// Busy): many connections starting at once. Each status file a
	// Connecting write creates is a new file, and creating files in one
	// directory is serialised by the kernel (0.3-1 ms each on a busy
	// machine): at 1,000 connections the Connecting writes held every
	// worker while attempts that had finished waited in the queue to be
	// taken in. Put off, most of them are never written: the connection is
	// Connected by then, one write.
	DefaultConnectingGraceBusy = 2 * time.Second
)

// ReconcilerOptions wires a Reconciler.
type ReconcilerOptions struct {
	Desired   *desired.Store
	Status    StatusSink
	Connector supervisor.Connector
	Exposer   Exposer // may be nil (no gateway)
	Metrics   Metrics // may be nil
	Logger    *slog.Logger
	// Enqueue asks for name to be reconciled soon; the controller's queue.
	Enqueue        func(name string)
	ConnectTimeout time.Duration
	// ConnectingGrace: see DefaultConnectingGrace; negative disables it.
	ConnectingGrace time.Duration
	// Busy reports whether more names wait in the queue than the workers
	// can take at once; nil: never. While it does, a Connecting status at
	// the end of its grace is put off once more, by
	// DefaultConnectingGraceBusy.
	Busy func() bool
	// TracerProvider records the reconcile, connect, backoff and health
	// spans (see controller/tracing); nil means the global provider, a no-op
	// unless tracing.Setup turned tracing on.
	TracerProvider trace.TracerProvider
	// Catalogs keeps what each server publishes between runs; nil: kept in
	// memory only, so an OnDemand server is started once at start-up to
	// learn it.
	Catalogs CatalogStore
	// Now and Jitter are for tests.
	Now    func() time.Time
	Jitter func() float64 // in [0,1); the delay is scaled by 1-0.2*Jitter()
}

// Reconciler drives each connection toward its desired state. Reconcile is
// thin: it reads the desired entry and the connection's supervisor snapshot,
// tells the supervisor what is wanted, hands the live session to the
// gateway, computes the status (a pure function, ComputeStatus) and hands it
// to the StatusSink. It never blocks on the network and holds no lock while
// it calls another component: its own lock guards only its table.
type Reconciler struct {
	opts   ReconcilerOptions
	log    *slog.Logger
	tracer trace.Tracer

	ctx      context.Context // parent of every supervisor; cancelled by Shutdown
	cancel   context.CancelFunc
	stopping atomic.Bool

	mu    sync.Mutex
	conns map[string]*record
	// outcomes is poked when a connection reaches its first outcome
	// (firstoutcome.go).
	outcomes chan struct{}
	// retiring counts removed connections whose supervisor still winds down.
	retiring sync.WaitGroup
}

// record is the reconciler's own bookkeeping of one connection. The
// workqueue never hands one name to two workers at once, so only sup,
// known and outcome are read outside that connection's Reconcile (under
// r.mu, or atomically).
type record struct {
	sup     *supervisor.Supervisor
	log     *slog.Logger
	addedAt time.Time
	prev    *spec.ConnectionStatus // the status computed last (or found on disk)
	written bool                   // its status has been handed to the sink once
	known   atomic.Bool            // metrics series created
	// outcome is set once the connection has reached its first outcome
	// (firstoutcome.go).
	outcome atomic.Bool
	catalog catalogState
	// exposed is what the gateway serves for the connection now (nil:
	// nothing), for Wake to wait on.
	exposed exposureSignal
	// onDemand is what the gateway serves for an OnDemand connection, for
	// its whole life (set on first sight, never replaced).
	onDemand atomic.Pointer[onDemandBackend]
	// held is what the gateway was last told of the connection while it
	// is not served (nil while it is): its names stay its own as far as
	// this prefix and filter expose them.
	held atomic.Pointer[heldSpec]
}

// heldSpec is the prefix and filter a connection that is not served holds
// its names with, and why it is not served.
type heldSpec struct {
	prefix string
	filter *spec.ToolFilter
	reason string
	// refused: reason is the refusal of the connection's confinement
	// policy (notServing), which lasts until the spec changes.
	refused bool
}

// NewReconciler returns a reconciler. Call Shutdown to stop its goroutines.
func NewReconciler(opts ReconcilerOptions) *Reconciler {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = noopMetrics{}
	}
	if opts.ConnectingGrace == 0 {
		opts.ConnectingGrace = DefaultConnectingGrace
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Enqueue == nil {
		opts.Enqueue = func(string) {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Reconciler{opts: opts, log: opts.Logger, tracer: tracing.Tracer(opts.TracerProvider),
		ctx: ctx, cancel: cancel, conns: map[string]*record{}, outcomes: make(chan struct{}, 1)}
}

// Reconcile brings the connection name one step toward its desired state and
// hands its status to the sink. It reads the desired and the actual state
// afresh every time, so it does not matter which event (or how many) led
// here.
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
	rec := r.record(name, entry)

	// Act.
	switch {
	case entry.Conn == nil: // never valid
		rec.sup.Stop("manifest invalid")
	case r.stopping.Load():
		rec.sup.Stop("tether is shutting down")
	case entry.Conn.Spec.Suspend:
		rec.sup.Suspend(ctx)
	default:
		res.RequeueAfter = rec.sup.Step(ctx, supervisor.Want{
			Conn:           entry.Conn,
			Dir:            entry.Dir,
			SecretsVersion: entry.SecretsVersion,
			// An OnDemand server runs only for the calls that need it,
			// once tether knows what it offers meanwhile.
			Dormant: entry.Conn.Spec.OnDemand() && rec.catalog.cur != nil,
		})
	}
	snap := rec.sup.Snapshot()
	if snap.Session != nil {
		r.observeCatalog(ctx, rec, name, snap.Session, entry.Conn != nil && entry.Conn.Spec.OnDemand())
	}
	exposure := r.expose(name, entry, rec, snap)

	// Compute and report.
	st := ComputeStatus(StatusInput{
		Entry:    entry,
		Snapshot: snap,
		Exposure: exposure,
		Catalog:  rec.catalog.status,
		Previous: rec.prev,
		Stopped:  r.stopping.Load(),
		Now:      r.opts.Now(),
	})
	span.SetAttributes(tracing.Phase.String(string(st.Phase)))
	rec.prev = &st
	r.noteOutcome(rec, st.Phase)
	if !rec.known.Swap(true) {
		r.opts.Metrics.ConnectionAdded(name)
	}
	r.opts.Metrics.SetPhase(name, st.Phase)
	r.opts.Metrics.SetTools(name, exposure.Tools)
	r.opts.Metrics.SetCollisions(name, lostNames(st.Collisions))

	// A new connection within its Connecting grace: no status yet, look
	// again when the grace ends.
	if !rec.written && st.Phase == spec.PhaseConnecting && r.opts.ConnectingGrace > 0 {
		since := r.opts.Now().Sub(rec.addedAt)
		wait := r.opts.ConnectingGrace - since
		if wait <= 0 && r.opts.Busy != nil && r.opts.Busy() {
			// Once per connection: at the end of this wait it is written,
			// busy or not.
			wait = r.opts.ConnectingGrace + DefaultConnectingGraceBusy - since
		}
		if wait > 0 {
			if res.RequeueAfter == 0 || wait < res.RequeueAfter {
				res.RequeueAfter = wait
			}
			return res, nil
		}
	}
	rec.written = true
	if err := r.opts.Status.Put(entry, st); err != nil {
		return Result{}, fmt.Errorf("connection %s: %w", name, err)
	}
	return res, nil
}

// record returns name's record, making it (and its supervisor) on first
// sight.
func (r *Reconciler) record(name string, entry desired.Entry) *record {
	r.mu.Lock()
	rec := r.conns[name]
	r.mu.Unlock()
	if rec != nil {
		return rec
	}
	rec = &record{log: r.log.With("connection", name), addedAt: r.opts.Now()}
	rec.log.Info("connection added", "origin", entry.Origin)
	opts := supervisor.Options{
		Name:           name,
		Logger:         rec.log,
		Connector:      r.opts.Connector,
		Metrics:        r.opts.Metrics,
		Tracer:         r.tracer,
		ConnectTimeout: r.opts.ConnectTimeout,
		Notify:         func() { r.opts.Enqueue(name) },
		Now:            r.opts.Now,
		Jitter:         r.opts.Jitter,
	}
	opts.OnDrop = func(running *spec.McpConnection, why string, idle bool) {
		if od := rec.onDemand.Load(); od != nil {
			od.setLive(nil)
		}
		// An OnDemand server stopped for idleness stays in the gateway:
		// its backend serves the catalog and starts it again.
		if r.opts.Exposer != nil && !idle {
			r.opts.Exposer.SetUnavailable(name, running.ToolPrefix(), running.Spec.Tools, why)
			rec.held.Store(&heldSpec{prefix: running.ToolPrefix(), filter: running.Spec.Tools, reason: why})
			rec.exposed.set(nil)
		}
	}
	// A restarted tether keeps transition times and counters.
	if prev, ok := r.opts.Status.Previous(entry); ok {
		rec.prev = &prev
		if prev.Process != nil {
			opts.Starts = prev.Process.Restarts
			opts.LastExitCode = prev.Process.LastExitCode
		}
	}
	if r.opts.Catalogs != nil {
		switch saved, err := r.opts.Catalogs.LoadCatalog(name); {
		case err != nil:
			rec.log.Warn("the saved catalog cannot be used; the server is started to learn it again", "err", err)
		case saved != nil:
			rec.catalog.load(saved, rec.log)
		}
	}
	if rec.prev != nil {
		rec.catalog.resume(rec.prev.Catalog)
	}
	rec.sup = supervisor.New(r.ctx, opts)

	r.mu.Lock()
	r.conns[name] = rec
	r.mu.Unlock()
	return rec
}

// expose hands the connection to the gateway while it can serve: a live
// session (with the prefix, filters and timeout of the running spec), or
// for an OnDemand connection its backend, which serves the catalog while the
// server is stopped. It returns what the gateway serves of it.
func (r *Reconciler) expose(name string, entry desired.Entry, rec *record, snap supervisor.Snapshot) gateway.Exposure {
	running := snap.Running
	var backend gateway.Backend
	switch {
	case entry.Conn != nil && entry.Conn.Spec.OnDemand() && !entry.Conn.Spec.Suspend && !r.stopping.Load() &&
		(snap.Session != nil || rec.catalog.cur != nil):
		// Served for as long as it is wanted and tether knows what it
		// offers: stopped, starting, or running.
		od := rec.onDemand.Load()
		if od == nil {
			od = newOnDemandBackend(rec.sup, tracing.EndpointOf(&entry.Conn.Spec))
			rec.onDemand.Store(od)
		}
		od.setLive(snap.Session)
		od.setCatalog(rec.catalog.cur)
		if running == nil {
			running = entry.Conn
		}
		backend = od
	case snap.Session != nil:
		backend = snap.Session
	default:
		// Nothing to serve. A session that went was hidden by OnDrop; an
		// OnDemand connection stopped while idle (suspended, invalid, tether
		// stopping) has no session to drop: hide it here.
		if r.opts.Exposer == nil {
			return gateway.Exposure{}
		}
		held := &heldSpec{prefix: exposedPrefix(entry, running)}
		held.reason, held.refused = notServing(entry, snap, r.stopping.Load())
		if entry.Conn != nil {
			held.filter = entry.Conn.Spec.Tools
		}
		switch h := rec.held.Load(); {
		case rec.exposed.current() != nil:
			r.opts.Exposer.SetUnavailable(name, held.prefix, held.filter, held.reason)
			rec.held.Store(held)
			rec.exposed.set(nil)
		case h != nil && entry.Conn != nil && (h.prefix != held.prefix || !reflect.DeepEqual(h.filter, held.filter) ||
			h.refused != held.refused || held.refused && h.reason != held.reason):
			// The spec's prefix or filter changed while the connection is
			// away: the names it would no longer expose are given up now,
			// not when (if ever) it comes back (docs/contract.md §5). Or
			// its policy was refused (or no longer is): the calls that
			// wake it are told so, not how its session last ended, which
			// no retry will change.
			if !held.refused && !h.refused {
				held.reason = h.reason
			}
			r.opts.Exposer.SetUnavailable(name, held.prefix, held.filter, held.reason)
			rec.held.Store(held)
		}
		return gateway.Exposure{}
	}
	if r.opts.Exposer == nil {
		n := 0
		for _, t := range backend.Tools() {
			if running.Spec.Tools.Allows(t.Name) {
				n++
			}
		}
		return gateway.Exposure{Tools: n, Prompts: len(backend.Prompts()), Resources: len(backend.Resources()),
			ResourceTemplates: len(backend.ResourceTemplates())}
	}
	r.opts.Exposer.Set(Exposed{
		Name:        name,
		Prefix:      running.ToolPrefix(),
		Filter:      running.Spec.Tools,
		CallTimeout: running.Spec.CallTimeoutDuration(),
		Backend:     backend,
	})
	rec.exposed.set(backend)
	rec.held.Store(nil)
	return r.opts.Exposer.Exposure(name)
}

// observeCatalog follows what the live server publishes: a change is logged,
// counted and kept in the state directory, so that an upgrade that drops a
// tool shows, and an OnDemand server's catalog is there for the next time it
// is stopped.
func (r *Reconciler) observeCatalog(ctx context.Context, rec *record, name string, ss supervisor.Session, onDemand bool) {
	moved, added, removed := rec.catalog.observe(ss, r.opts.Now())
	if moved {
		rec.log.InfoContext(ctx, "the server's catalog changed", "added", added, "removed", removed)
		r.opts.Metrics.ObserveCatalogChange(name, len(added), len(removed))
	}
	// Kept for OnDemand servers, which need it to be served while stopped;
	// the others' drift is followed in memory and across restarts by hash.
	if r.opts.Catalogs != nil && onDemand && !rec.catalog.saved && rec.catalog.cur != nil {
		err := r.opts.Catalogs.SaveCatalog(name, rec.catalog.cur)
		if err != nil {
			rec.log.Warn("cannot save the server's catalog", "err", err)
		}
		// One too large can never be saved: no retry (nor another WARN)
		// until the catalog changes.
		var tooLarge *catalog.TooLargeError
		rec.catalog.saved = err == nil || errors.As(err, &tooLarge)
	}
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

// Wake brings name back for a call that needs it (reconnect on use): it
// demands a session of the supervisor, which starts an attempt at once (one
// however many calls wait; the backoff delay is skipped), and returns once
// the gateway serves the connection again, or ctx ends, or the attempt
// failed.
func (r *Reconciler) Wake(ctx context.Context, name string) error {
	r.mu.Lock()
	rec := r.conns[name]
	r.mu.Unlock()
	if rec == nil {
		return fmt.Errorf("connection %s is not known", name)
	}
	ss, err := rec.sup.Demand(ctx)
	if err != nil {
		return err
	}
	// Served again: the gateway has this session, itself or behind the
	// connection's OnDemand backend (whichever expose chose last).
	return rec.exposed.waitFor(ctx, func(b gateway.Backend) bool {
		if b == gateway.Backend(ss) {
			return true
		}
		od, ok := b.(*onDemandBackend)
		return ok && od.serves(ss)
	})
}

// exposedPrefix is the tool prefix the gateway knows the connection by.
func exposedPrefix(entry desired.Entry, running *spec.McpConnection) string {
	switch {
	case running != nil:
		return running.ToolPrefix()
	case entry.Conn != nil:
		return entry.Conn.ToolPrefix()
	}
	return entry.Name
}

// notServing says why a connection serves nothing, for the gateway's
// answer to a call; refused when that is the refusal of its confinement
// policy (phase Refused).
func notServing(entry desired.Entry, snap supervisor.Snapshot, stopping bool) (reason string, refused bool) {
	switch {
	case stopping:
		return "tether is shutting down", false
	case entry.Conn == nil:
		return "manifest invalid", false
	case entry.Conn.Spec.Suspend:
		return "suspended", false
	case snap.PolicyRefused != "":
		return "tether refuses its confinement policy until the manifest changes: " + snap.PolicyRefused, true
	}
	return "not connected", false
}

// exposureSignal tells Wake when the gateway serves a given backend.
type exposureSignal struct {
	mu  sync.Mutex
	cur gateway.Backend
	ch  chan struct{}
}

// set records what the gateway serves now and wakes the waiters (also for
// the same backend: an OnDemand backend's live session may have changed).
func (e *exposureSignal) set(b gateway.Backend) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cur = b
	if e.ch != nil {
		close(e.ch)
	}
	e.ch = make(chan struct{})
}

func (e *exposureSignal) current() gateway.Backend {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.cur
}

// waitFor waits until the backend the gateway serves satisfies ok.
func (e *exposureSignal) waitFor(ctx context.Context, ok func(gateway.Backend) bool) error {
	for {
		e.mu.Lock()
		if e.cur != nil && ok(e.cur) {
			e.mu.Unlock()
			return nil
		}
		if e.ch == nil {
			e.ch = make(chan struct{})
		}
		ch := e.ch
		e.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// RetryNow lets name's next attempt start without waiting (see
// supervisor.RetryNow). It reports false, and does nothing, for a
// connection not seen yet.
func (r *Reconciler) RetryNow(name string) bool {
	r.mu.Lock()
	rec := r.conns[name]
	r.mu.Unlock()
	if rec == nil {
		return false
	}
	rec.sup.RetryNow()
	return true
}

// Seen reports whether name has been through Reconcile at least once (its
// metrics series and first decision exist).
func (r *Reconciler) Seen(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.conns[name]
	return ok && rec.known.Load()
}

// remove tears down a connection whose desired entry is gone and deletes its
// status and series.
func (r *Reconciler) remove(name string) error {
	r.mu.Lock()
	rec := r.conns[name]
	delete(r.conns, name)
	r.mu.Unlock()
	if rec == nil {
		// Gone already; a status that could not be deleted then is
		// deleted now (the retry of a failed reconcile lands here).
		return r.opts.Status.Delete(name)
	}
	rec.sup.Close("manifest removed")
	rec.log.Info("connection removed")
	if r.opts.Catalogs != nil {
		if err := r.opts.Catalogs.DeleteCatalog(name); err != nil {
			rec.log.Warn("cannot forget the server's catalog", "err", err)
		}
	}
	if r.opts.Exposer != nil {
		r.opts.Exposer.Remove(name)
	}
	r.opts.Metrics.ConnectionRemoved(name)
	// Its session closes in the background; Shutdown waits for that too.
	r.retiring.Add(1)
	go func() {
		defer r.retiring.Done()
		_ = rec.sup.Wait(context.Background()) // bounded: attempts are cancelled, closes bounded
	}()
	return r.opts.Status.Delete(name)
}

// Shutdown closes every connection gracefully and waits for every goroutine
// the supervisors started, or until ctx is done.
func (r *Reconciler) Shutdown(ctx context.Context) error {
	r.stopping.Store(true)
	r.mu.Lock()
	sups := make([]*supervisor.Supervisor, 0, len(r.conns))
	for _, rec := range r.conns {
		sups = append(sups, rec.sup)
	}
	r.mu.Unlock()
	for _, s := range sups {
		s.Stop("tether is shutting down")
	}
	r.cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, s := range sups {
			_ = s.Wait(context.Background())
		}
		r.retiring.Wait()
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// FinalStatus hands every connection's status, as it is after Shutdown, to
// the sink.
func (r *Reconciler) FinalStatus() {
	for _, name := range r.opts.Desired.Names() {
		if _, err := r.Reconcile(context.Background(), name); err != nil {
			r.log.Warn("writing final status", "connection", name, "err", err)
		}
	}
}

// lostNames counts the collisions a connection lost (the names it does not
// serve); those it kept against another are in its status, not in
// tether_gateway_tool_collisions.
func lostNames(cs []spec.ToolCollision) int {
	n := 0
	for _, c := range cs {
		if !c.Kept {
			n++
		}
	}
	return n
}
