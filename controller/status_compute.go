package controller

import (
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// Condition reasons.
const (
	ReasonConnected       = "Connected"
	ReasonConnecting      = "Connecting"
	ReasonConnectFailed   = "ConnectFailed"
	ReasonHealthCheckFail = "HealthCheckFailing"
	ReasonSuspended       = "Suspended"
	ReasonManifestInvalid = "ManifestInvalid"
	ReasonStopped         = "Stopped"
	ReasonPending         = "Pending"
	ReasonSucceeded       = "Succeeded"
)

// statusLocked computes the status of c from its actual and desired state.
// Called with r.mu held. Pure but for the clock and the gateway's counts.
func (r *Reconciler) statusLocked(c *conn, e *Entry) spec.ConnectionStatus {
	now := r.opts.Now().UTC().Truncate(time.Second)
	st := spec.ConnectionStatus{
		Attempt:       c.failures,
		LastError:     c.lastError,
		ManifestError: e.ManifestError,
	}
	if e.Conn != nil {
		st.ObservedSpecHash = e.Conn.Spec.Hash()
	}

	var reason, msg string
	switch {
	case e.Conn == nil:
		st.Phase, reason, msg = spec.PhaseInvalid, ReasonManifestInvalid, e.ManifestError
	case r.ctx.Err() != nil:
		st.Phase, reason, msg = spec.PhasePending, ReasonStopped, "tether stopped"
	case e.Conn.Spec.Suspend:
		st.Phase, reason, msg = spec.PhaseSuspended, ReasonSuspended, "suspended by spec.suspend"
	case c.session != nil:
		s := c.session
		info := s.Server()
		st.Server = &info
		tools := s.Tools()
		st.Tools = &spec.ToolCounts{Count: len(tools), Exposed: r.exposedCount(c, tools)}
		since := c.connectedAt.UTC().Truncate(time.Second)
		st.ConnectedSince = &since
		if c.health.failures > 0 {
			st.Phase, reason = spec.PhaseDegraded, ReasonHealthCheckFail
			msg = fmt.Sprintf("%d health check(s) failed: %s", c.health.failures, c.health.lastErr)
			st.LastError = c.health.lastErr
		} else {
			st.Phase, reason = spec.PhaseConnected, ReasonConnected
			msg = fmt.Sprintf("connected to %s %s, %d tools", info.Name, info.Version, len(tools))
		}
		if r.opts.Exposer != nil {
			st.Collisions = r.opts.Exposer.Collisions(c.name)
		}
	case c.failures == 0 && (c.attempting || c.result != nil):
		st.Phase, reason, msg = spec.PhaseConnecting, ReasonConnecting, "connecting"
	case c.failures > 0:
		st.Phase, reason = spec.PhaseReconnecting, ReasonConnectFailed
		if c.attempting {
			msg = fmt.Sprintf("attempt %d in progress; last error: %s", c.failures+1, c.lastError)
		} else {
			next := c.nextRetry.UTC().Truncate(time.Second)
			st.NextRetryTime = &next
			msg = fmt.Sprintf("attempt %d failed: %s", c.failures, c.lastError)
		}
	default:
		st.Phase, reason, msg = spec.PhasePending, ReasonPending, "waiting to connect"
	}
	if e.ManifestError != "" && e.Conn != nil {
		msg += " (manifest invalid; running the last valid spec)"
	}

	if e.Conn != nil && e.Conn.Spec.Stdio != nil {
		p := &spec.ProcessStatus{Restarts: max(c.starts-1, 0), LastExitCode: c.lastExitCode}
		if c.process != nil {
			p.StderrTail = c.process.StderrTail
		}
		if c.session != nil {
			if live := c.session.Process(); live != nil {
				p.PID = live.PID
				p.StderrTail = live.StderrTail
			}
		}
		st.Process = p
	}

	ready := condition(spec.ConditionReady, boolStatus(st.Phase == spec.PhaseConnected), reason, msg)
	reconciling := spec.ConditionFalse
	switch st.Phase {
	case spec.PhaseConnecting, spec.PhaseReconnecting, spec.PhasePending:
		if reason != ReasonStopped {
			reconciling = spec.ConditionTrue
		}
	}
	rec := condition(spec.ConditionReconciling, reconciling, reason, msg)
	if reconciling == spec.ConditionFalse {
		rec.Reason, rec.Message = ReasonSucceeded, ""
	}
	stalled := condition(spec.ConditionStalled, spec.ConditionFalse, ReasonSucceeded, "")
	if e.ManifestError != "" {
		stalled = condition(spec.ConditionStalled, spec.ConditionTrue, ReasonManifestInvalid, e.ManifestError)
	}
	st.Conditions = []spec.Condition{ready, rec, stalled}
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = transitionTime(c.prev, st.Conditions[i], now)
	}
	return st
}

// exposedCount is what the gateway serves of c's tools; without a gateway,
// what the filters let through.
func (r *Reconciler) exposedCount(c *conn, tools []*mcp.Tool) int {
	if r.opts.Exposer != nil {
		return r.opts.Exposer.Exposed(c.name)
	}
	n := 0
	for _, t := range tools {
		if c.sessionSpec.Spec.Tools.Allows(t.Name) {
			n++
		}
	}
	return n
}

func condition(typ, status, reason, msg string) spec.Condition {
	return spec.Condition{Type: typ, Status: status, Reason: reason, Message: msg}
}

func boolStatus(b bool) string {
	if b {
		return spec.ConditionTrue
	}
	return spec.ConditionFalse
}

// transitionTime keeps a condition's lastTransitionTime while its status
// stays the same (kstatus): only a change of status moves it.
func transitionTime(prev *spec.ConnectionStatus, c spec.Condition, now time.Time) time.Time {
	if prev != nil {
		for _, p := range prev.Conditions {
			if p.Type == c.Type && p.Status == c.Status && !p.LastTransitionTime.IsZero() {
				return p.LastTransitionTime
			}
		}
	}
	return now
}
