package supervisor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// scripted blocks every Connect until the test hands it an outcome, or
// until the attempt is cancelled. With lingers set, a cancelled attempt
// returns only once lingers is closed, like a server slow to give up.
type scripted struct {
	started  chan struct{}
	outcomes chan outcome
	lingers  chan struct{}
}

type outcome struct {
	ss  *session
	err error
}

func (c *scripted) Connect(ctx context.Context, req ConnectRequest) (Session, error) {
	c.started <- struct{}{}
	select {
	case o := <-c.outcomes:
		if o.ss == nil {
			return nil, o.err
		}
		o.ss.onEnd = req.OnEnd
		return o.ss, nil
	case <-ctx.Done():
		if c.lingers != nil {
			<-c.lingers
		}
		return nil, ctx.Err()
	}
}

// moves records the machine's moves from its DEBUG lines, and every line
// with its attributes and the span of its context.
type moves struct {
	mu    sync.Mutex
	taken []Transition
	lines []logLine
}

type logLine struct {
	msg   string
	attrs map[string]slog.Value
	span  trace.SpanContext
}

// logged returns the lines with message msg.
func (h *moves) logged(msg string) []logLine {
	h.mu.Lock()
	defer h.mu.Unlock()
	var got []logLine
	for _, l := range h.lines {
		if l.msg == msg {
			got = append(got, l)
		}
	}
	return got
}

func (h *moves) Enabled(context.Context, slog.Level) bool { return true }
func (h *moves) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *moves) WithGroup(string) slog.Handler            { return h }
func (h *moves) Handle(ctx context.Context, r slog.Record) error {
	l := logLine{msg: r.Message, attrs: map[string]slog.Value{}, span: trace.SpanContextFromContext(ctx)}
	r.Attrs(func(a slog.Attr) bool { l.attrs[a.Key] = a.Value; return true })
	h.mu.Lock()
	h.lines = append(h.lines, l)
	h.mu.Unlock()
	if r.Message != "state" {
		return nil
	}
	var t Transition
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "from":
			t.From = a.Value.Any().(State)
		case "on":
			t.On = a.Value.Any().(Event)
		case "to":
			t.To = a.Value.Any().(State)
		}
		return true
	})
	h.mu.Lock()
	h.taken = append(h.taken, t)
	h.mu.Unlock()
	return nil
}

func (h *moves) reset() []Transition {
	h.mu.Lock()
	defer h.mu.Unlock()
	taken := h.taken
	h.taken = nil
	return taken
}

// machine is a supervisor driven move by move: its clock stands still
// unless the test moves it, and each attempt waits for its outcome.
type machine struct {
	t        *testing.T
	sup      *Supervisor
	conn     *scripted
	moves    *moves
	notified chan struct{}
	mu       sync.Mutex
	now      time.Time
	want     Want
}

func newMachine(t *testing.T) *machine {
	m := &machine{t: t, conn: &scripted{started: make(chan struct{}, 10), outcomes: make(chan outcome, 1)},
		moves: &moves{}, notified: make(chan struct{}, 100),
		now: time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)}
	c := lazyConn() // OnDemand, so that idleness applies; Dormant says whether it sleeps
	m.want = Want{Conn: c}
	m.sup = New(context.Background(), Options{Name: "m", Connector: m.conn, Logger: slog.New(m.moves),
		Notify: func() { m.notified <- struct{}{} },
		Now:    func() time.Time { m.mu.Lock(); defer m.mu.Unlock(); return m.now },
		Jitter: func() float64 { return 0 }})
	m.sup.strictMoves = true // a move outside the table fails the test
	t.Cleanup(func() { m.sup.Close("test over"); _ = m.sup.Wait(context.Background()) })
	return m
}

func (m *machine) state() State {
	m.sup.mu.Lock()
	defer m.sup.mu.Unlock()
	return m.sup.state
}

func (m *machine) step()                   { m.sup.Step(context.Background(), m.want) }
func (m *machine) dormant(d bool)          { m.want.Dormant = d }
func (m *machine) advance(d time.Duration) { m.mu.Lock(); m.now = m.now.Add(d); m.mu.Unlock() }

// respec changes the want to one that needs a new session.
func (m *machine) respec() {
	c := lazyConn()
	c.Spec.Stdio.Args = []string{"--other"}
	m.want.Conn = c
}

// await waits until the machine is in st; each report and session end
// asks for a reconcile, which is when to look again.
func (m *machine) await(st State) {
	m.t.Helper()
	deadline := time.After(10 * time.Second)
	for m.state() != st {
		select {
		case <-m.notified:
		case <-deadline:
			m.t.Fatalf("state %s, waited for %s", m.state(), st)
		}
	}
}

// until waits until ok holds of the supervisor (under its lock); each
// report asks for a reconcile, which is when to look again.
func (m *machine) until(what string, ok func(*Supervisor) bool) {
	m.t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		m.sup.mu.Lock()
		done := ok(m.sup)
		m.sup.mu.Unlock()
		if done {
			return
		}
		select {
		case <-m.notified:
		case <-time.After(time.Millisecond):
		case <-deadline:
			m.t.Fatalf("timed out waiting until %s", what)
		}
	}
}

// start steps into Connecting and waits for the attempt to be running.
func (m *machine) start() {
	m.t.Helper()
	m.step()
	<-m.conn.started
	if got := m.state(); got != Connecting {
		m.t.Fatalf("state %s after the step that starts an attempt", got)
	}
}

// report starts an attempt and hands it o.
func (m *machine) report(o outcome) {
	m.t.Helper()
	m.start()
	m.conn.outcomes <- o
	m.await(Reported)
}

var (
	refused   = outcome{err: errors.New("refused")}
	needLogin = outcome{err: authErr{login: true}}
	noPolicy  = outcome{err: refusedErr{refused: true}}
)

func connected() outcome { return outcome{ss: newSession()} }

// reach drives a new machine into st through the public methods only.
var reach = map[State]func(m *machine){
	Idle:         func(*machine) {},
	Connecting:   (*machine).start,
	Reported:     func(m *machine) { m.report(refused) },
	Connected:    func(m *machine) { m.report(connected()); m.step() },
	Backoff:      func(m *machine) { m.report(refused); m.step() },
	AuthRequired: func(m *machine) { m.report(needLogin); m.step() },
	Refused:      func(m *machine) { m.report(noPolicy); m.step() },
	Dormant:      func(m *machine) { m.dormant(true); m.step() },
	Stopped:      func(m *machine) { m.sup.Stop("test") },
	Suspended:    func(m *machine) { m.sup.Suspend(context.Background()) },
}

// fire makes each move of the table happen, from the state reach left.
var fire = map[Transition]func(m *machine){
	{Idle, EvStart, Connecting}: (*machine).step,
	{Idle, EvSleep, Dormant}:    func(m *machine) { m.dormant(true); m.step() },

	{Connecting, EvReport, Reported}: func(m *machine) { m.conn.outcomes <- refused; m.await(Reported) },
	{Connecting, EvAbandon, Idle}: func(m *machine) {
		m.respec()
		m.step() // cancels the attempt for the old spec
		m.await(Idle)
	},

	{Reported, EvAdopt, Connected}: func(m *machine) { m.reportAgain(connected()); m.step() },
	{Reported, EvStale, Idle}:      func(m *machine) { m.reportAgain(connected()); m.respec(); m.step() },
	{Reported, EvFail, Backoff}:    (*machine).step,
	{Reported, EvFail, AuthRequired}: func(m *machine) {
		m.reportAgain(needLogin)
		m.step()
	},

	{Connected, EvFail, Backoff}: func(m *machine) {
		m.sup.Snapshot().Session.(*session).end()
		m.step()
	},
	{Connected, EvFail, AuthRequired}: func(m *machine) {
		m.sup.Snapshot().Session.(*session).endWith(authErr{login: true})
		m.step()
	},
	{Connected, EvRespec, Idle}:    func(m *machine) { m.respec(); m.step() },
	{Connected, EvIdle, Dormant}:   func(m *machine) { m.advance(24 * time.Hour); m.step() },
	{Backoff, EvStart, Connecting}: func(m *machine) { m.advance(time.Hour); m.step() },
	{Backoff, EvSleep, Dormant}:    func(m *machine) { m.dormant(true); m.step() },

	{AuthRequired, EvStart, Connecting}: func(m *machine) { m.sup.RetryNow(); m.step() },
	{AuthRequired, EvSleep, Dormant}:    func(m *machine) { m.sup.RetryNow(); m.dormant(true); m.step() },

	{Reported, EvFail, Refused}: func(m *machine) {
		m.reportAgain(noPolicy)
		m.step()
	},
	{Refused, EvStart, Connecting}: func(m *machine) { m.respec(); m.step() },
	{Refused, EvSleep, Dormant}:    func(m *machine) { m.respec(); m.dormant(true); m.step() },
	{Stopped, EvAwaitSpec, Refused}: func(m *machine) {
		m.report(noPolicy)
		m.step()
		m.sup.Stop("test")
		m.step()
	},

	{Dormant, EvStart, Connecting}: func(m *machine) { m.dormant(false); m.step() },
	{Dormant, EvWait, Backoff}: func(m *machine) {
		// A dormant server whose attempt failed sleeps; woken by a spec
		// that is no longer dormant, it waits for its backoff first.
		m.dormant(false)
		m.report(refused)
		m.dormant(true)
		m.step()
		m.dormant(false)
		m.step()
	},

	{Stopped, EvStart, Connecting}: (*machine).step,
	{Stopped, EvSleep, Dormant}:    func(m *machine) { m.dormant(true); m.step() },
	{Stopped, EvWait, Backoff}: func(m *machine) {
		m.report(refused)
		m.step()
		m.sup.Stop("test")
		m.step()
	},
	{Stopped, EvAwaitLogin, AuthRequired}: func(m *machine) {
		m.report(needLogin)
		m.step()
		m.sup.Stop("test")
		m.step()
	},

	{Suspended, EvStart, Connecting}: (*machine).step,
	{Suspended, EvSleep, Dormant}:    func(m *machine) { m.dormant(true); m.step() },
}

// reportAgain replaces the outcome reach reported (a refusal) by o: the
// refusal is taken in, and a new attempt reports o.
func (m *machine) reportAgain(o outcome) {
	m.t.Helper()
	m.step() // takes the refusal in: Backoff
	m.sup.RetryNow()
	m.report(o)
}

// endWith ends the session with err as its cause.
func (s *session) endWith(err error) {
	s.err = err
	s.end()
}

// TestTransitions takes every move of the table, each from a machine
// driven into its starting state through the public methods: the move is
// among those the firing took, and the machine ends where the move leads
// (or where the same step goes on to from there).
func TestTransitions(t *testing.T) {
	for _, tr := range Transitions {
		t.Run(fmt.Sprintf("%s-%s-%s", tr.From, tr.On, tr.To), func(t *testing.T) {
			m := newMachine(t)
			reach[tr.From](m)
			if got := m.state(); got != tr.From {
				t.Fatalf("reached %s, want %s", got, tr.From)
			}
			m.moves.reset()
			f := fire[tr]
			switch tr.On {
			case EvStop:
				f = func(m *machine) { m.sup.Stop("test") }
			case EvSuspend:
				f = func(m *machine) { m.sup.Suspend(context.Background()) }
			case EvClose:
				f = func(m *machine) { m.sup.Close("test") }
			}
			if f == nil {
				t.Fatalf("no way to fire %v", tr)
			}
			f(m)
			taken := m.moves.reset()
			if !slices.Contains(taken, tr) {
				t.Errorf("moves taken %v, want %v among them", taken, tr)
			}
		})
	}
}

// TestTransitionsOutsideTheTablePanic: every move the table does not list
// is refused, whatever the event (in tests, which make it panic).
func TestTransitionsOutsideTheTablePanic(t *testing.T) {
	sup := New(context.Background(), Options{Name: "x"})
	sup.strictMoves = true
	listed := 0
	for from := range numStates {
		for ev := range numEvents {
			for next := range numStates {
				tr := Transition{from, ev, next}
				if from == next {
					sup.state = from
					sup.to(next, ev) // staying is no move
					continue
				}
				if slices.Contains(Transitions, tr) {
					listed++
					sup.state = from
					sup.to(next, ev)
					if sup.state != next {
						t.Errorf("%v: state %s", tr, sup.state)
					}
					continue
				}
				sup.state = from
				func() {
					defer func() {
						if recover() == nil {
							t.Errorf("%v is not in the table, and to took it", tr)
						}
					}()
					sup.to(next, ev)
				}()
				if sup.state != from {
					t.Errorf("%v refused, but the state moved to %s", tr, sup.state)
				}
			}
		}
	}
	if listed != len(Transitions) {
		t.Errorf("%d moves listed, the table has %d (a duplicate?)", listed, len(Transitions))
	}
}

// TestIllegalMoveOutsideTestsIsLoggedAndTaken: outside tests, a move the
// table does not list kills nothing: it is said at ERROR with where from,
// on what and where to, counted in the Snapshot, and taken, so that the
// state names the data its caller made for it.
func TestIllegalMoveOutsideTestsIsLoggedAndTaken(t *testing.T) {
	var buf bytes.Buffer
	sup := New(context.Background(), Options{Name: "x",
		Logger: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError}))})
	sup.mu.Lock()
	sup.state = Connected
	sup.to(Connecting, EvFail) // not in the table: Connected fails to Backoff or AuthRequired
	sup.to(Idle, EvStop)
	sup.mu.Unlock()
	sn := sup.Snapshot()
	if sn.State != Idle || sn.IllegalMoves != 2 {
		t.Errorf("state %s, illegal moves %d; want Idle, 2", sn.State, sn.IllegalMoves)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	want := []string{
		"level=ERROR msg=\"illegal state transition, a bug in tether; taking it\" from=Connected on=fail to=Connecting illegalMoves=1",
		"level=ERROR msg=\"illegal state transition, a bug in tether; taking it\" from=Connecting on=stop to=Idle illegalMoves=2",
	}
	if len(lines) != len(want) {
		t.Fatalf("logged %q, want %d lines", lines, len(want))
	}
	for i, l := range lines {
		if _, rest, _ := strings.Cut(l, " "); rest != want[i] { // past the time
			t.Errorf("line %d: %q, want %q", i, rest, want[i])
		}
	}
}

// TestClosedIsFinal: nothing leaves Closed, and the public methods of a
// closed supervisor start nothing.
func TestClosedIsFinal(t *testing.T) {
	for _, tr := range Transitions {
		if tr.From == Closed {
			t.Errorf("the table leaves Closed: %v", tr)
		}
	}
	m := newMachine(t)
	m.sup.Close("test")
	m.step()
	m.sup.Stop("again")
	m.sup.Suspend(context.Background())
	m.sup.RetryNow()
	if got := m.state(); got != Closed {
		t.Errorf("state %s after Close", got)
	}
	if _, err := m.sup.Demand(context.Background()); err == nil {
		t.Error("a closed supervisor answered a Demand")
	}
	select {
	case <-m.conn.started:
		t.Error("a closed supervisor started an attempt")
	default:
	}
}

// TestStateNames: every state and event has its name, and an unknown one
// says its number.
func TestStateNames(t *testing.T) {
	for st := range numStates {
		if st.String() == "" || st.String() == fmt.Sprintf("State(%d)", uint8(st)) {
			t.Errorf("state %d has no name", st)
		}
	}
	for ev := range numEvents {
		if ev.String() == "" || ev.String() == fmt.Sprintf("Event(%d)", uint8(ev)) {
			t.Errorf("event %d has no name", ev)
		}
	}
	if got := numStates.String(); got != fmt.Sprintf("State(%d)", numStates) {
		t.Errorf("unknown state: %q", got)
	}
	if got := numEvents.String(); got != fmt.Sprintf("Event(%d)", numEvents) {
		t.Errorf("unknown event: %q", got)
	}
}
