package supervisor

import "fmt"

// State is where a supervised connection is. It is the one answer to "what
// is this connection doing": everything else the supervisor keeps is data
// that belongs to a state (the live session of Connected, the outcome of
// Reported, the backoff deadline of Backoff, the authorization failure of
// AuthRequired, the refusal of Refused) or bookkeeping of the callers waiting in Demand.
//
// One thing outlives its state on purpose: an attempt that Stop, Suspend or
// Close cancelled still runs until its Connector returns, so that no second
// attempt starts beside it (Step starts none while one runs). Its outcome is
// discarded.
//
// docs/architecture.md §1 holds the same machine as a table.
type State uint8

// The states. Idle is the zero value: a new supervisor, or one whose last
// attempt was abandoned or whose last session was let go for a new spec;
// the next Step decides.
const (
	Idle State = iota
	// Connecting: an attempt runs (Connector.Connect in a goroutine).
	Connecting
	// Reported: the attempt finished; the next Step takes its outcome in.
	Reported
	// Connected: a live session serves.
	Connected
	// Backoff: the last attempt failed, or the session was lost; the next
	// attempt waits for the backoff delay (refused client credentials wait
	// the longest delay).
	Backoff
	// AuthRequired: the last failure said only a person's login helps; no
	// attempt starts until new tokens are stored (RetryNow) or the spec
	// changes.
	AuthRequired
	// Refused: tether refused the server's confinement policy (a sandbox
	// grant or a writable container mount that reaches what it protects);
	// no attempt starts until the spec changes, since no retry can change
	// the answer.
	Refused
	// Dormant: an OnDemand server whose catalog is known, stopped until a
	// Demand (phase Idle in the status).
	Dormant
	// Stopped: Stop ended what ran (an invalid manifest, tether stopping);
	// the backoff is kept.
	Stopped
	// Suspended: Suspend ended what ran and forgot the backoff.
	Suspended
	// Closed: the connection was removed; nothing starts again.
	Closed
	numStates
)

var stateNames = [numStates]string{"Idle", "Connecting", "Reported", "Connected", "Backoff",
	"AuthRequired", "Refused", "Dormant", "Stopped", "Suspended", "Closed"}

func (s State) String() string {
	if s < numStates {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Event is what moves a connection from one state to another.
type Event uint8

// The events.
const (
	// EvStart: Step starts an attempt.
	EvStart Event = iota
	// EvReport: the attempt's Connect returned, and tether did not cancel it.
	EvReport
	// EvAbandon: the attempt returned after Step cancelled it for a new spec.
	EvAbandon
	// EvAdopt: Step takes in the attempt's session.
	EvAdopt
	// EvStale: Step takes in a session made for a spec no longer wanted.
	EvStale
	// EvFail: Step takes in a failed attempt, or a session that ended or
	// failed its health checks.
	EvFail
	// EvRespec: Step lets the live session go, its spec or a Secret it
	// reads changed.
	EvRespec
	// EvIdle: Step stops an OnDemand server nobody used for idleTimeout.
	EvIdle
	// EvSleep: Step leaves an OnDemand server with a known catalog stopped.
	EvSleep
	// EvWait: Step finds the backoff delay not over.
	EvWait
	// EvAwaitLogin: Step finds the connection waiting for a login (an
	// authorization failure that Stop kept).
	EvAwaitLogin
	// EvAwaitSpec: Step finds the connection's policy refused for the spec
	// it still wants (a refusal that Stop kept).
	EvAwaitSpec
	// EvStop, EvSuspend, EvClose: the reconciler's Stop, Suspend, Close.
	EvStop
	EvSuspend
	EvClose
	numEvents
)

var eventNames = [numEvents]string{"start", "report", "abandon", "adopt", "stale", "fail",
	"respec", "idle", "sleep", "wait", "await-login", "await-spec", "stop", "suspend", "close"}

func (e Event) String() string {
	if e < numEvents {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

// Transition is one legal move of the machine.
type Transition struct {
	From State
	On   Event
	To   State
}

// Transitions is the whole machine: a move not listed here is a bug, which
// to reports (and tests make panic). Staying in a state is no move. Stop,
// Suspend and Close are legal from every state but Closed (Close of a
// closed supervisor is staying).
var Transitions = append([]Transition{
	{Idle, EvStart, Connecting},
	{Idle, EvSleep, Dormant},

	{Connecting, EvReport, Reported},
	{Connecting, EvAbandon, Idle},

	{Reported, EvAdopt, Connected},
	{Reported, EvStale, Idle},
	{Reported, EvFail, Backoff},
	{Reported, EvFail, AuthRequired},
	{Reported, EvFail, Refused},

	{Connected, EvFail, Backoff},
	{Connected, EvFail, AuthRequired},
	{Connected, EvRespec, Idle},
	{Connected, EvIdle, Dormant},

	{Backoff, EvStart, Connecting},
	{Backoff, EvSleep, Dormant},

	{AuthRequired, EvStart, Connecting},
	{AuthRequired, EvSleep, Dormant},

	{Refused, EvStart, Connecting},
	{Refused, EvSleep, Dormant},

	{Dormant, EvStart, Connecting},
	{Dormant, EvWait, Backoff},

	{Stopped, EvStart, Connecting},
	{Stopped, EvSleep, Dormant},
	{Stopped, EvWait, Backoff},
	{Stopped, EvAwaitLogin, AuthRequired},
	{Stopped, EvAwaitSpec, Refused},

	{Suspended, EvStart, Connecting},
	{Suspended, EvSleep, Dormant},
}, stops()...)

// stops are the reconciler's Stop, Suspend and Close, legal from every
// live state.
func stops() []Transition {
	var ts []Transition
	for from := Idle; from < Closed; from++ {
		if from != Stopped {
			ts = append(ts, Transition{from, EvStop, Stopped})
		}
		if from != Suspended {
			ts = append(ts, Transition{from, EvSuspend, Suspended})
		}
		ts = append(ts, Transition{from, EvClose, Closed})
	}
	return ts
}

// legal indexes Transitions.
var legal = func() map[Transition]bool {
	m := make(map[Transition]bool, len(Transitions))
	for _, t := range Transitions {
		m[t] = true
	}
	return m
}()

// to moves the machine on ev, and says so at DEBUG. Staying is always
// allowed; any other move must be in Transitions: a move outside the table
// is a bug in this package, not a fault of the server's. Tests make it
// panic (strictMoves); a daemon must not die of it, nor be left half-way,
// so it says so at ERROR, counts it (Snapshot.IllegalMoves) and takes the
// move all the same: every caller has already made, or goes on to make,
// the state's data what the new state needs (the session gone before a
// failure's Backoff, say), and refusing the move would name that data by
// the old state (a Connected without a session). Called with s.mu held.
func (s *Supervisor) to(next State, ev Event) {
	if next == s.state {
		return
	}
	if !legal[Transition{s.state, ev, next}] {
		if s.strictMoves {
			panic(fmt.Sprintf("supervisor %s: illegal transition %s -%s-> %s", s.opts.Name, s.state, ev, next))
		}
		s.illegalMoves++
		s.log.Error("illegal state transition, a bug in tether; taking it", "from", s.state, "on", ev, "to", next,
			"illegalMoves", s.illegalMoves)
	}
	s.log.Debug("state", "from", s.state, "on", ev, "to", next)
	s.state = next
}
