package supervisor

import (
	"time"

	"github.com/tether-mcp/tether/spec"
)

// Snapshot is the state of a supervised connection at one moment. It is a
// copy: nothing in it changes after Snapshot returns it (Session is the live
// session itself, for the gateway to call through; its facts are copied).
type Snapshot struct {
	// Session is the live session; nil when there is none. Running is the
	// spec it runs (prefix, filters and health settings as last applied).
	Session Session
	Running *spec.McpConnection
	// Server, the counts of what it lists and ConnectedAt describe the
	// live session.
	Server                                       spec.ServerInfo
	Tools, Prompts, Resources, ResourceTemplates int
	ConnectedAt                                  time.Time
	// State is where the connection's machine is (state.go).
	State State
	// Connecting is true while an attempt runs or its outcome is not taken
	// in yet.
	Connecting bool
	Attempting bool
	// Failures counts failed attempts since the last success; LastError is
	// the last one's (or the lost session's) error, NextRetry when the
	// backoff allows the next attempt.
	Failures  int
	LastError string
	NextRetry time.Time
	// Idle is true for an OnDemand connection that is stopped and starts at
	// the next call (phase Idle).
	Idle bool
	// AuthRequired says what to do when the last failure was that no valid
	// OAuth token can be had ("" otherwise); AwaitingLogin is true while
	// no attempt starts before new tokens are stored.
	AuthRequired  string
	AwaitingLogin bool
	// SandboxUnsupported is the last failure's message when it was a
	// sandbox the kernel cannot enforce fully ("" otherwise).
	SandboxUnsupported string
	// PolicyRefused is the refusal while tether refuses the server's
	// confinement policy and waits for a new spec ("" otherwise).
	PolicyRefused string
	// Sandbox is what confines the live session's server ("landlock
	// fs+net"), "" when nothing does.
	Sandbox string
	// HealthFailures counts failed probes in a row of the live session.
	HealthFailures int
	HealthError    string
	// Starts counts stdio children started; LastExitCode is the last one's
	// exit code; Process the child's facts (the live child's when there is
	// one, else the last known).
	Starts       int
	LastExitCode *int
	Process      *spec.ProcessStatus
	// IllegalMoves counts the moves outside the machine's table the
	// supervisor took (each a bug, logged at ERROR); 0 in a sound tether.
	IllegalMoves int
}

// Snapshot returns the connection's state now.
func (s *Supervisor) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := Snapshot{
		Session:            s.session,
		Running:            s.sessionSpec,
		ConnectedAt:        s.connectedAt,
		State:              s.state,
		Connecting:         s.attempt != nil || s.state == Reported,
		Attempting:         s.attempt != nil,
		Failures:           s.failures,
		LastError:          s.lastError,
		NextRetry:          s.nextRetry,
		Idle:               s.state == Dormant && !s.demanded,
		HealthFailures:     s.health.failures,
		HealthError:        s.health.lastErr,
		Starts:             s.starts,
		LastExitCode:       s.lastExitCode,
		Process:            s.process,
		IllegalMoves:       s.illegalMoves,
		SandboxUnsupported: s.unsupported,
	}
	if r := s.refusal; r != nil {
		snap.PolicyRefused = r.msg
	}
	if a := s.auth; a != nil {
		snap.AuthRequired = a.msg
		snap.AwaitingLogin = a.login && !a.released
	}
	if ss := s.session; ss != nil {
		snap.Server = ss.Server()
		snap.Tools = len(ss.Tools())
		snap.Prompts = len(ss.Prompts())
		snap.Resources = len(ss.Resources())
		snap.ResourceTemplates = len(ss.ResourceTemplates())
		if live := ss.Process(); live != nil {
			snap.Process = live
		}
		if sb, ok := ss.(interface{ Sandbox() string }); ok {
			snap.Sandbox = sb.Sandbox()
		}
	}
	if snap.Process != nil {
		p := *snap.Process
		p.StderrTail = append([]string(nil), p.StderrTail...)
		snap.Process = &p
	}
	return snap
}
