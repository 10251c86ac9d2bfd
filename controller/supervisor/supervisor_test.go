package supervisor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/spec"
)

// session is a Session whose end the test decides.
type session struct {
	gateway.Backend // not called here, but for the catalog lists below
	done            chan struct{}
	once            sync.Once
	closed          atomic.Bool
	onEnd           func()
	err             error // the cause of its end; EOF when nil
}

func newSession() *session { return &session{done: make(chan struct{})} }

func (s *session) Server() spec.ServerInfo     { return spec.ServerInfo{Name: "fake", Version: "1"} }
func (s *session) Tools() []*mcp.Tool          { return []*mcp.Tool{{Name: "echo"}} }
func (s *session) Probe(context.Context) error { return nil }
func (s *session) Done() <-chan struct{}       { return s.done }
func (s *session) Err() error {
	if s.err != nil {
		return s.err
	}
	return errors.New("EOF")
}
func (s *session) Process() *spec.ProcessStatus       { return nil }
func (s *session) Activity() (bool, time.Time)        { return false, time.Time{} }
func (s *session) Close() error                       { s.closed.Store(true); s.end(); return nil }
func (s *session) end()                               { s.once.Do(func() { close(s.done); s.onEnd() }) }
func (s *session) ProcessStatus() *spec.ProcessStatus { return nil }
func (s *session) Prompts() []*mcp.Prompt             { return nil }
func (s *session) Resources() []*mcp.Resource         { return nil }
func (s *session) ResourceTemplates() []*mcp.ResourceTemplate {
	return nil
}

// connector hands out one session per attempt, or an error once sessions
// run out.
type connector struct {
	mu       sync.Mutex
	sessions []*session
}

func (c *connector) Connect(_ context.Context, req ConnectRequest) (Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) == 0 {
		return nil, errors.New("refused")
	}
	s := c.sessions[0]
	c.sessions = c.sessions[1:]
	s.onEnd = req.OnEnd
	return s, nil
}

// reentrant records what the supervisor tells others, and reads the
// supervisor back while being told: a call made under the supervisor's
// lock would deadlock here.
type reentrant struct {
	sup      atomic.Pointer[Supervisor]
	mu       sync.Mutex
	attempts []bool
	drops    []string
}

func (r *reentrant) ObserveAttempt(_ string, ok bool) {
	r.sup.Load().Snapshot()
	r.mu.Lock()
	r.attempts = append(r.attempts, ok)
	r.mu.Unlock()
}

func (r *reentrant) ObserveHealthCheck(string, time.Duration) { r.sup.Load().Snapshot() }

// TestSupervisorCallsOutWithoutItsLock: metrics and OnDrop are told after
// the supervisor released its lock, and in order: a dropped session is
// hidden (OnDrop) before it is closed.
func TestSupervisorCallsOutWithoutItsLock(t *testing.T) {
	first := newSession()
	conn := &connector{sessions: []*session{first}}
	rec := &reentrant{}
	notified := make(chan struct{}, 100)
	sup := New(context.Background(), Options{
		Name:      "one",
		Connector: conn,
		Metrics:   rec,
		Notify:    func() { notified <- struct{}{} },
		OnDrop: func(running *spec.McpConnection, why string, _ bool) {
			rec.sup.Load().Snapshot()
			if first.closed.Load() {
				t.Error("the session was closed before OnDrop hid it")
			}
			rec.mu.Lock()
			rec.drops = append(rec.drops, running.Metadata.Name+": "+why)
			rec.mu.Unlock()
		},
		Jitter: func() float64 { return 0 },
	})
	rec.sup.Store(sup)
	conn1 := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}}}
	conn1.Default()
	want := Want{Conn: conn1, Dir: "/m"}

	waitNotified := func() {
		t.Helper()
		select {
		case <-notified:
		case <-time.After(5 * time.Second):
			t.Fatal("the supervisor did not ask for a reconcile")
		}
	}
	if d := sup.Step(context.Background(), want); d != 0 {
		t.Fatalf("first step waits %v", d)
	}
	if snap := sup.Snapshot(); !snap.Connecting || snap.Starts != 1 {
		t.Fatalf("after the first step: %+v", snap)
	}
	waitNotified()
	sup.Step(context.Background(), want)
	snap := sup.Snapshot()
	if snap.Session == nil || snap.Tools != 1 || snap.Running != conn1 {
		t.Fatalf("not connected: %+v", snap)
	}

	// A spec change with another command drops the session: hidden, then
	// closed; the next attempt fails and backs off 100ms.
	conn2 := conn1.DeepCopy()
	conn2.Spec.Stdio.Args = []string{"--new"}
	sup.Step(context.Background(), Want{Conn: conn2, Dir: "/m"})
	if !first.closed.Load() {
		// closeAsync runs in the background; Wait proves it ran.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		sup.Close("test over")
		if err := sup.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if !first.closed.Load() {
		t.Error("the dropped session was never closed")
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.drops) != 1 || rec.drops[0] != "one: reconnecting after a spec change" {
		t.Errorf("drops = %v", rec.drops)
	}
	if len(rec.attempts) != 1 || !rec.attempts[0] {
		t.Errorf("attempts observed = %v, want one success", rec.attempts)
	}
}

// TestSupervisorBackoffAndRetryNow: failures back off 100ms, 200ms, …;
// RetryNow lets the next step start an attempt at once.
func TestSupervisorBackoffAndRetryNow(t *testing.T) {
	notified := make(chan struct{}, 100)
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	sup := New(context.Background(), Options{
		Name:      "one",
		Connector: &connector{},
		Notify:    func() { notified <- struct{}{} },
		Now:       func() time.Time { return now },
		Jitter:    func() float64 { return 0 },
	})
	t.Cleanup(func() { sup.Close("test over"); _ = sup.Wait(context.Background()) })
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}}}
	c.Default()
	want := Want{Conn: c}
	for i, delay := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		sup.Step(context.Background(), want) // starts attempt i+1
		select {
		case <-notified:
		case <-time.After(5 * time.Second):
			t.Fatal("attempt did not report back")
		}
		if got := sup.Step(context.Background(), want); got != delay {
			t.Fatalf("after failure %d: wait %v, want %v", i+1, got, delay)
		}
		if snap := sup.Snapshot(); snap.Failures != i+1 || snap.LastError != "refused" {
			t.Fatalf("after failure %d: %+v", i+1, snap)
		}
		sup.RetryNow()
	}
	sup.Suspend(context.Background())
	if snap := sup.Snapshot(); snap.Failures != 0 || !snap.NextRetry.IsZero() || snap.Connecting {
		t.Errorf("suspend kept the backoff: %+v", snap)
	}
}

// TestSupervisorDemand: a dormant connection starts only when demanded;
// concurrent demands share one attempt; a failed attempt fails every
// waiter and the connection stays dormant; a stop refuses the waiters.
func TestSupervisorDemand(t *testing.T) {
	conn := &connector{}
	notified := make(chan struct{}, 100)
	sup := New(context.Background(), Options{
		Name:      "lazy",
		Connector: conn,
		Notify:    func() { notified <- struct{}{} },
		Jitter:    func() float64 { return 0 },
	})
	t.Cleanup(func() { sup.Close("test over"); _ = sup.Wait(context.Background()) })
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "lazy"}, Spec: spec.Spec{
		Stdio: &spec.StdioSpec{Command: "server"}, Lifecycle: &spec.Lifecycle{Mode: spec.LifecycleOnDemand}}}
	c.Default()
	want := Want{Conn: c, Dormant: true}
	step := func() time.Duration { return sup.Step(context.Background(), want) }

	// Dormant: no attempt, phase Idle.
	step()
	if snap := sup.Snapshot(); !snap.Idle || snap.Starts != 0 {
		t.Fatalf("dormant: %+v", snap)
	}
	// A reconciler: steps whenever the supervisor asks, until stopped.
	ctx, cancel := context.WithCancel(context.Background())
	var loop sync.WaitGroup
	loop.Go(func() {
		for {
			select {
			case <-notified:
				step()
			case <-ctx.Done():
				return
			}
		}
	})
	t.Cleanup(func() { cancel(); loop.Wait() })

	// Three demands, no server: each gets an attempt's error.
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for range 3 {
		wg.Go(func() {
			dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer dcancel()
			_, err := sup.Demand(dctx)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Errorf("demand = %v, want the attempt's error", err)
		}
	}
	if snap := sup.Snapshot(); snap.Starts > 3 || !snap.Idle {
		t.Errorf("after the failed demands: %+v, want dormant again", snap)
	}

	// With a server: the demand gets the session.
	s := newSession()
	conn.mu.Lock()
	conn.sessions = append(conn.sessions, s)
	conn.mu.Unlock()
	dctx, dcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer dcancel()
	got, err := sup.Demand(dctx)
	if err != nil || got != Session(s) {
		t.Fatalf("demand = %v, %v; want the new session", got, err)
	}
	if snap := sup.Snapshot(); snap.Session == nil || snap.Idle {
		t.Errorf("after the demand: %+v", snap)
	}
}

// TestSupervisorReconnectsOnSecretsVersion: the same spec with another
// SecretsVersion (a rotated Secret) drops the session and connects again;
// the same version keeps it.
func TestSupervisorReconnectsOnSecretsVersion(t *testing.T) {
	first, second := newSession(), newSession()
	conn := &connector{sessions: []*session{first, second}}
	notified := make(chan struct{}, 100)
	var drops []string
	var mu sync.Mutex
	sup := New(context.Background(), Options{
		Name:      "one",
		Connector: conn,
		Notify:    func() { notified <- struct{}{} },
		OnDrop: func(_ *spec.McpConnection, why string, _ bool) {
			mu.Lock()
			drops = append(drops, why)
			mu.Unlock()
		},
		Jitter: func() float64 { return 0 },
	})
	defer func() {
		sup.Close("test over")
		_ = sup.Wait(context.Background())
	}()
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}}}
	c.Default()
	// connect steps whenever the supervisor asks (an attempt's report, or
	// the end of a session it closed, in whatever order) until s is live.
	connect := func(want Want, s *session) {
		t.Helper()
		deadline := time.After(5 * time.Second)
		for {
			sup.Step(context.Background(), want)
			if snap := sup.Snapshot(); snap.Session == Session(s) {
				return
			}
			select {
			case <-notified:
			case <-deadline:
				t.Fatalf("not connected with the expected session: %+v", sup.Snapshot())
			}
		}
	}
	v1 := Want{Conn: c, SecretsVersion: "v1"}
	connect(v1, first)
	sup.Step(context.Background(), v1)
	if first.closed.Load() {
		t.Fatal("an unchanged want dropped the session")
	}
	connect(Want{Conn: c, SecretsVersion: "v2"}, second)
	mu.Lock()
	defer mu.Unlock()
	if len(drops) != 1 || drops[0] != "reconnecting after a referenced Secret change" {
		t.Errorf("drops = %v", drops)
	}
}

// authErr is an error like controller/oauth's AuthRequiredError.
type authErr struct{ login bool }

func (e authErr) Error() string      { return "no token: run `tether login one`" }
func (e authErr) AuthRequired() bool { return e.login }

// authConnector fails with errs in turn (wrapped, as a transport wraps
// them), then hands out a session; it counts its attempts.
type authConnector struct {
	mu       sync.Mutex
	errs     []error
	attempts int
}

func (c *authConnector) Connect(_ context.Context, req ConnectRequest) (Session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.attempts++
	if len(c.errs) > 0 {
		err := c.errs[0]
		c.errs = c.errs[1:]
		return nil, fmt.Errorf("initialize: sending: %w", err)
	}
	s := newSession()
	s.onEnd = req.OnEnd
	return s, nil
}

func (c *authConnector) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts
}

// TestSupervisorAuthRequired: a failure that needs a login starts no
// attempt, whatever time passes, until RetryNow (new tokens) or a new spec;
// refused client credentials retry at the backoff's cap at once.
func TestSupervisorAuthRequired(t *testing.T) {
	conn := &authConnector{errs: []error{authErr{login: true}, authErr{login: true}, authErr{login: false}}}
	h := newClockedSupervisor(t, conn, spec.Spec{HTTP: &spec.HTTPSpec{URL: "http://h/mcp"}})

	h.step()
	h.waitNotified()
	if d := h.step(); d != 0 {
		t.Fatalf("waiting for a login asks to be looked at again in %v", d)
	}
	snap := h.sup.Snapshot()
	if snap.AuthRequired != "no token: run `tether login one`" || !snap.AwaitingLogin || !snap.NextRetry.IsZero() || snap.Connecting {
		t.Fatalf("after a failure that needs a login: %+v", snap)
	}
	h.now = h.now.Add(time.Hour)
	for range 3 {
		if d := h.step(); d != 0 || h.sup.Snapshot().Connecting {
			t.Fatalf("an hour later, a step started an attempt or a wait (%v)", d)
		}
	}
	if n := conn.count(); n != 1 {
		t.Fatalf("%d attempts while waiting for a login, want 1", n)
	}

	// New tokens: one attempt, which needs a login again.
	h.sup.RetryNow()
	if snap := h.sup.Snapshot(); snap.AwaitingLogin || snap.AuthRequired == "" {
		t.Errorf("after RetryNow: %+v", snap)
	}
	h.step()
	h.waitNotified()
	h.step()
	if n := conn.count(); n != 2 || !h.sup.Snapshot().AwaitingLogin {
		t.Fatalf("after RetryNow: %d attempts, %+v", n, h.sup.Snapshot())
	}

	// A new spec is tried at once; its refused client credentials wait
	// the cap (3s), not 100ms.
	c2 := h.c.DeepCopy()
	c2.Spec.HTTP.URL = "http://h/other"
	h.want = Want{Conn: c2}
	h.step()
	h.waitNotified()
	if d := h.step(); d != 3*time.Second {
		t.Fatalf("refused client credentials wait %v, want the cap 3s", d)
	}
	if snap := h.sup.Snapshot(); snap.AwaitingLogin || snap.AuthRequired == "" {
		t.Errorf("refused client credentials: %+v", snap)
	}
	h.now = h.now.Add(3 * time.Second)
	h.step()
	h.waitNotified()
	h.step()
	if snap := h.sup.Snapshot(); snap.Session == nil || snap.AuthRequired != "" || snap.Failures != 0 {
		t.Errorf("after a success: %+v", snap)
	}
}

// clockedSupervisor is a supervisor of one connection ("one", of spec sp)
// that conn connects, on a clock the test moves (now), without jitter.
type clockedSupervisor struct {
	t        *testing.T
	sup      *Supervisor
	c        *spec.McpConnection
	want     Want
	now      time.Time
	notified chan struct{}
}

func newClockedSupervisor(t *testing.T, conn Connector, sp spec.Spec) *clockedSupervisor {
	t.Helper()
	h := &clockedSupervisor{t: t, now: time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), notified: make(chan struct{}, 100)}
	h.sup = New(context.Background(), Options{
		Name:      "one",
		Connector: conn,
		Notify:    func() { h.notified <- struct{}{} },
		Now:       func() time.Time { return h.now },
		Jitter:    func() float64 { return 0 },
	})
	t.Cleanup(func() { h.sup.Close("test over"); _ = h.sup.Wait(context.Background()) })
	h.c = &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: sp}
	h.c.Default()
	h.want = Want{Conn: h.c}
	return h
}

// step steps the supervisor toward h.want.
func (h *clockedSupervisor) step() time.Duration { return h.sup.Step(context.Background(), h.want) }

// waitNotified waits for an attempt to report back.
func (h *clockedSupervisor) waitNotified() {
	h.t.Helper()
	select {
	case <-h.notified:
	case <-time.After(5 * time.Second):
		h.t.Fatal("attempt did not report back")
	}
}
