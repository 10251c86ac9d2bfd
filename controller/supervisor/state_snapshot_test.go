package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// TestSnapshotOfEachState: what a Snapshot says in each state (the flags
// ComputeStatus reads).
func TestSnapshotOfEachState(t *testing.T) {
	for _, tc := range []struct {
		st                           State
		connecting, attempting, idle bool
		session                      bool
	}{
		{st: Idle},
		{st: Connecting, connecting: true, attempting: true},
		{st: Reported, connecting: true},
		{st: Connected, session: true},
		{st: Backoff},
		{st: AuthRequired},
		{st: Dormant, idle: true},
		{st: Stopped},
		{st: Suspended},
	} {
		t.Run(tc.st.String(), func(t *testing.T) {
			m := newMachine(t)
			reach[tc.st](m)
			sn := m.sup.Snapshot()
			if sn.State != tc.st || sn.Connecting != tc.connecting || sn.Attempting != tc.attempting ||
				sn.Idle != tc.idle || (sn.Session != nil) != tc.session {
				t.Errorf("snapshot: state %s connecting %v attempting %v idle %v session %v",
					sn.State, sn.Connecting, sn.Attempting, sn.Idle, sn.Session != nil)
			}
		})
	}
}

// TestStopEndsTheLiveSession: a Stop of a connected supervisor hides and
// closes its session.
func TestStopEndsTheLiveSession(t *testing.T) {
	m := newMachine(t)
	reach[Connected](m)
	ss := m.sup.Snapshot().Session.(*session)
	m.sup.Stop("test")
	if sn := m.sup.Snapshot(); sn.Session != nil {
		t.Error("the session outlived the Stop")
	}
	deadline := time.After(10 * time.Second)
	for !ss.closed.Load() {
		select {
		case <-deadline:
			t.Fatal("the stopped session was not closed")
		case <-time.After(time.Millisecond):
		}
	}
}

// TestStableSessionRestartsBackoff: a session lost StableAfter or more after
// it connected starts the backoff from its first delay; one lost sooner
// goes on where the last failure left it.
func TestStableSessionRestartsBackoff(t *testing.T) {
	for _, tc := range []struct {
		up   time.Duration
		want time.Duration
	}{
		{StableAfter - time.Millisecond, 200 * time.Millisecond},
		{StableAfter, 100 * time.Millisecond},
	} {
		m := newMachine(t)
		m.report(refused)
		m.step() // backoff step 1 is next
		m.sup.RetryNow()
		m.report(connected())
		m.step()
		m.advance(tc.up)
		m.sup.Snapshot().Session.(*session).end()
		if got := m.sup.Step(context.Background(), m.want); got != tc.want {
			t.Errorf("lost after %v: wait %v, want %v", tc.up, got, tc.want)
		}
	}
}

// TestBackoffJitter: the delay is scaled down by up to a fifth.
func TestBackoffJitter(t *testing.T) {
	sup := New(context.Background(), Options{Name: "j", Jitter: func() float64 { return 0.5 }})
	c := lazyConn()
	if got, want := sup.backoff(c, 0), 90*time.Millisecond; got != want {
		t.Errorf("jittered by half: %v, want %v", got, want)
	}
}

// TestBackoffSequence: each step doubles the delay until the cap, to the
// nanosecond (a cap that is no power of two of initial is reached by
// capping, the step before it by doubling), and a step past any cap
// (capSteps) waits the cap.
func TestBackoffSequence(t *testing.T) {
	sup := New(context.Background(), Options{Name: "b", Jitter: func() float64 { return 0 }})
	c := lazyConn()
	c.Spec.Backoff = &spec.Backoff{Initial: &spec.Duration{Duration: 250 * time.Millisecond},
		Max: &spec.Duration{Duration: time.Second + 1}}
	for step, want := range []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second,
		time.Second + 1, time.Second + 1} {
		if got := sup.backoff(c, step); got != want {
			t.Errorf("step %d: %v, want %v", step, got, want)
		}
	}
	for _, step := range []int{62, 63, capSteps, capSteps + 1} {
		if got := sup.backoff(c, step); got != time.Second+1 {
			t.Errorf("step %d: %v, want the cap", step, got)
		}
	}
}

// TestConnectTimeoutSaysSo: an attempt that ran out of its connect timeout
// says so in the error.
func TestConnectTimeoutSaysSo(t *testing.T) {
	notified := make(chan struct{}, 10)
	sup := New(context.Background(), Options{Name: "slow", Connector: &blockingConnector{started: make(chan struct{}, 1)},
		ConnectTimeout: 20 * time.Millisecond, Notify: func() { notified <- struct{}{} }})
	t.Cleanup(func() { sup.Close("over"); _ = sup.Wait(context.Background()) })
	want := Want{Conn: lazyConn()}
	sup.Step(context.Background(), want)
	for sup.Snapshot().State != Reported {
		<-notified
	}
	sup.Step(context.Background(), want)
	if msg := sup.Snapshot().LastError; !strings.Contains(msg, "connect timed out after 20ms") {
		t.Errorf("LastError = %q", msg)
	}
}

// TestAbandonWithoutWaitersDemandsNothing: an attempt abandoned for a new
// spec with no Demand waiting leaves nothing demanded: a dormant want
// sleeps.
func TestAbandonWithoutWaitersDemandsNothing(t *testing.T) {
	m := newMachine(t)
	// A Demand that gave up waits no more.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.sup.Demand(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Demand with its ctx ended: %v", err)
	}
	reach[Connecting](m)
	fire[Transition{Connecting, EvAbandon, Idle}](m)
	m.dormant(true)
	m.step()
	if got := m.state(); got != Dormant {
		t.Errorf("state %s, want Dormant", got)
	}
}

// TestDemandWhileACancelledAttemptWindsDown: a Demand that arrives while an
// attempt Suspend cancelled is still winding down is not lost: once that
// attempt returns, the next step starts one for the Demand, dormant or not.
func TestDemandWhileACancelledAttemptWindsDown(t *testing.T) {
	m := newMachine(t)
	release := make(chan struct{})
	m.conn.lingers = release
	m.start()
	m.sup.Suspend(context.Background())
	m.dormant(true)
	m.step() // the cancelled attempt still runs: nothing starts beside it
	res := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := m.sup.Demand(ctx)
		res <- err
	}()
	m.until("the Demand waits", func(s *Supervisor) bool { return s.waiters == 1 })
	close(release)
	m.until("the cancelled attempt returned", func(s *Supervisor) bool { return s.attempt == nil })
	m.step()
	if got := m.state(); got != Connecting {
		t.Fatalf("state %s: no attempt started for the waiting Demand", got)
	}
	<-m.conn.started
	m.conn.outcomes <- connected()
	m.await(Reported)
	m.step()
	if err := <-res; err != nil {
		t.Errorf("Demand: %v", err)
	}
}

// closeFails is a session whose Close reports err.
type closeFails struct {
	*session
	err error
}

func (c closeFails) Close() error { _ = c.session.Close(); return c.err }

type oneSession struct{ ss closeFails }

func (c oneSession) Connect(_ context.Context, req ConnectRequest) (Session, error) {
	c.ss.onEnd = req.OnEnd
	return c.ss, nil
}

// TestCloseErrorIsLogged: a session that fails to close says why at
// DEBUG; one that closes cleanly says nothing.
func TestCloseErrorIsLogged(t *testing.T) {
	for _, closeErr := range []error{nil, errors.New("broken pipe")} {
		var logs lockedBuffer
		notified := make(chan struct{}, 100)
		sup := New(context.Background(), Options{Name: "c", Connector: oneSession{closeFails{newSession(), closeErr}},
			Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			Notify: func() { notified <- struct{}{} }})
		want := Want{Conn: lazyConn()}
		for sup.Step(context.Background(), want); sup.Snapshot().State != Connected; sup.Step(context.Background(), want) {
			<-notified
		}
		sup.Close("test over")
		if err := sup.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
		n, logged := logs.count("close"), strings.Contains(logs.String(), `err="broken pipe"`)
		if closeErr == nil && n != 0 || closeErr != nil && (n != 1 || !logged) {
			t.Errorf("close error %v: %d close lines, error logged %v:\n%s", closeErr, n, logged, logs.String())
		}
	}
}

// TestSuspendSaysSoWhenItEndsSomething: a Suspend that ends a session or
// an attempt says so; one that ends nothing is silent.
func TestSuspendSaysSoWhenItEndsSomething(t *testing.T) {
	for _, tc := range []struct {
		st    State
		lines int
	}{{Idle, 0}, {Backoff, 0}, {Connecting, 1}, {Connected, 1}} {
		m := newMachine(t)
		reach[tc.st](m)
		m.sup.Suspend(context.Background())
		if n := len(m.moves.logged("connection suspended")); n != tc.lines {
			t.Errorf("suspended in %s: %d lines, want %d", tc.st, n, tc.lines)
		}
	}
}

// connectedAndQuiet returns a supervisor connected through ss whose
// goroutines are all done (its attempt reported; its first probe is the
// default interval away), and the count of its requests for a reconcile.
func connectedAndQuiet(t *testing.T, ss Session) (*Supervisor, *atomic.Int32) {
	t.Helper()
	notifies := &atomic.Int32{}
	sup := New(context.Background(), Options{Name: "q", Connector: fixedConnector{ss},
		Notify: func() { notifies.Add(1) }})
	t.Cleanup(func() { sup.Close("test over"); _ = sup.Wait(context.Background()) })
	want := Want{Conn: lazyConn()}
	for sup.Step(context.Background(), want); sup.Snapshot().State != Connected; sup.Step(context.Background(), want) {
		if err := sup.Wait(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if err := sup.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sup, notifies
}

// fixedConnector connects to its one session, whatever the request.
type fixedConnector struct{ ss Session }

func (c fixedConnector) Connect(_ context.Context, req ConnectRequest) (Session, error) {
	switch ss := c.ss.(type) {
	case *session:
		ss.onEnd = req.OnEnd
	case *probingSession:
		ss.onEnd = req.OnEnd
	}
	return c.ss, nil
}

// TestSessionEndAsksForAReconcile: a session that ends by itself asks for
// a reconcile at once; one that ends because the supervisor closed does
// not.
func TestSessionEndAsksForAReconcile(t *testing.T) {
	ss := newSession()
	_, notifies := connectedAndQuiet(t, ss)
	n := notifies.Load()
	ss.end()
	if got := notifies.Load() - n; got != 1 {
		t.Errorf("a session that ended asked for %d reconciles, want 1", got)
	}

	ss = newSession()
	sup, notifies := connectedAndQuiet(t, ss)
	n = notifies.Load()
	sup.Close("removed")
	if err := sup.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !ss.closed.Load() {
		t.Fatal("the closed supervisor's session was not closed")
	}
	if got := notifies.Load() - n; got != 0 {
		t.Errorf("a session the supervisor closed asked for %d reconciles, want 0", got)
	}
}

// TestStoppedKeepsTheLastProcess: once its session is stopped, the
// snapshot still shows the child's last known facts.
func TestStoppedKeepsTheLastProcess(t *testing.T) {
	ss := &probingSession{session: newSession()}
	ss.proc.Store(&spec.ProcessStatus{PID: 42, StderrTail: []string{"bye"}})
	sup, _ := connectedAndQuiet(t, ss)
	sup.Stop("test")
	if p := sup.Snapshot().Process; p == nil || p.PID != 42 || len(p.StderrTail) != 1 || p.StderrTail[0] != "bye" {
		t.Errorf("process after the stop: %+v", p)
	}
}

// childErr is a failed attempt whose child exited with code.
type childErr struct{ code int }

func (e childErr) Error() string { return fmt.Sprintf("child exited with %d", e.code) }
func (e childErr) ProcessStatus() *spec.ProcessStatus {
	return &spec.ProcessStatus{PID: 7, LastExitCode: &e.code}
}

// TestChildExitsAreReported: the exit code and facts of a child whose
// attempt failed, and of one whose session was lost, reach the snapshot.
func TestChildExitsAreReported(t *testing.T) {
	m := newMachine(t)
	m.report(outcome{err: childErr{3}})
	m.step()
	if sn := m.sup.Snapshot(); sn.LastExitCode == nil || *sn.LastExitCode != 3 || sn.Process == nil || sn.Process.PID != 7 {
		t.Errorf("after a failed attempt: exit code %v, process %+v", sn.LastExitCode, sn.Process)
	}

	ss := &probingSession{session: newSession()}
	sup, _ := connectedAndQuiet(t, ss)
	code := 2
	ss.proc.Store(&spec.ProcessStatus{PID: 8, LastExitCode: &code})
	ss.end()
	sup.Step(context.Background(), Want{Conn: lazyConn()})
	if sn := sup.Snapshot(); sn.LastExitCode == nil || *sn.LastExitCode != 2 || sn.Process == nil || sn.Process.PID != 8 {
		t.Errorf("after a lost session: exit code %v, process %+v", sn.LastExitCode, sn.Process)
	}
}

// TestOnDemandLooksAgainWhenItMayTurnIdle: a busy OnDemand server is
// looked at again within 30 s at most; an unused one when its idle timeout
// runs out, and then it stops.
func TestOnDemandLooksAgainWhenItMayTurnIdle(t *testing.T) {
	var mu sync.Mutex
	now := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	ss := &probingSession{session: newSession()}
	notified := make(chan struct{}, 100)
	sup := New(context.Background(), Options{Name: "idle", Connector: fixedConnector{ss},
		Notify: func() { notified <- struct{}{} },
		Now:    func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	t.Cleanup(func() { sup.Close("test over"); _ = sup.Wait(context.Background()) })
	c := lazyConn()
	c.Spec.Lifecycle.IdleTimeout = &spec.Duration{Duration: time.Minute}
	want := Want{Conn: c}
	for sup.Step(context.Background(), want); sup.Snapshot().State != Connected; sup.Step(context.Background(), want) {
		<-notified
	}
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }

	advance(20 * time.Second)
	if got := sup.Step(context.Background(), want); got != 40*time.Second {
		t.Errorf("unused for 20s: next look in %v, want 40s", got)
	}
	advance(40 * time.Second)
	ss.busy.Store(true)
	if got := sup.Step(context.Background(), want); got != 30*time.Second || sup.Snapshot().State != Connected {
		t.Errorf("busy: next look in %v, state %s; want 30s, Connected", got, sup.Snapshot().State)
	}
	ss.busy.Store(false)
	if got := sup.Step(context.Background(), want); got != 0 || sup.Snapshot().State != Dormant {
		t.Errorf("unused for its idle timeout: next look in %v, state %s; want 0, Dormant", got, sup.Snapshot().State)
	}
}
