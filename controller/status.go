package controller

import (
	"fmt"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/supervisor"
	"github.com/tether-mcp/tether/spec"
)

// StatusInput is everything a connection's status is computed from.
type StatusInput struct {
	Entry    desired.Entry
	Snapshot supervisor.Snapshot
	Exposure gateway.Exposure
	// Catalog is what the server publishes and how it last moved; nil
	// while unknown.
	Catalog *spec.CatalogStatus
	// Previous is the status computed last (or left by a previous run):
	// a condition keeps its lastTransitionTime while its status stays.
	Previous *spec.ConnectionStatus
	// Stopped is true once tether is shutting down.
	Stopped bool
	Now     time.Time
}

// ComputeStatus is a connection's status, a pure function of its desired
// entry, its supervisor's snapshot, what the gateway serves of it, its
// previous status and the time.
func ComputeStatus(in StatusInput) spec.ConnectionStatus {
	e, sn := &in.Entry, &in.Snapshot
	now := in.Now.UTC().Truncate(time.Second)
	st := spec.ConnectionStatus{
		ObservedGeneration: e.Generation,
		Attempt:            sn.Failures,
		LastError:          sn.LastError,
		ManifestError:      e.ManifestError,
	}
	if e.Conn != nil {
		st.ObservedSpecHash = e.Conn.Spec.Hash()
	}

	var reason, msg string
	switch {
	case e.Conn == nil:
		st.Phase, reason, msg = spec.PhaseInvalid, spec.ReasonManifestInvalid, e.ManifestError
	case in.Stopped:
		st.Phase, reason, msg = spec.PhasePending, spec.ReasonStopped, "tether stopped"
	case e.Conn.Spec.Suspend:
		st.Phase, reason, msg = spec.PhaseSuspended, spec.ReasonSuspended, "suspended by spec.suspend"
	case sn.Session != nil:
		info := sn.Server
		st.Server = &info
		st.Tools = &spec.Counts{Count: sn.Tools, Exposed: in.Exposure.Tools}
		st.Prompts = someCounts(sn.Prompts, in.Exposure.Prompts)
		st.Resources = someCounts(sn.Resources, in.Exposure.Resources)
		st.ResourceTemplates = someCounts(sn.ResourceTemplates, in.Exposure.ResourceTemplates)
		since := sn.ConnectedAt.UTC().Truncate(time.Second)
		st.ConnectedSince = &since
		if sn.HealthFailures > 0 {
			st.Phase, reason = spec.PhaseDegraded, spec.ReasonHealthCheckFail
			msg = fmt.Sprintf("%d health check(s) failed: %s", sn.HealthFailures, sn.HealthError)
			st.LastError = sn.HealthError
		} else {
			st.Phase, reason = spec.PhaseConnected, spec.ReasonConnected
			msg = fmt.Sprintf("connected to %s %s, %d tools", info.Name, info.Version, sn.Tools)
		}
		st.Sandbox = sn.Sandbox
		st.Collisions = in.Exposure.Collisions
		st.NameWarnings = in.Exposure.NameWarnings
	case sn.AuthRequired != "" && !sn.Attempting:
		// No valid OAuth token: a login (or a fixed client) is needed.
		st.Phase, reason, msg = spec.PhaseAuthRequired, spec.ReasonAuthRequired, sn.AuthRequired
		if !sn.AwaitingLogin && !sn.NextRetry.IsZero() {
			next := sn.NextRetry.UTC().Truncate(time.Second)
			st.NextRetryTime = &next
		}
	case sn.PolicyRefused != "" && !sn.Attempting:
		// tether will not run this policy: only a new spec helps.
		st.Phase, reason, msg = spec.PhaseRefused, spec.ReasonPolicyRefused, sn.PolicyRefused
	case sn.Idle:
		st.Phase, reason = spec.PhaseIdle, spec.ReasonIdle
		msg = "idle: starts at the next call that needs it"
		if sn.LastError != "" {
			msg += "; the last start failed: " + sn.LastError
		}
	case sn.Failures == 0 && sn.Connecting:
		st.Phase, reason, msg = spec.PhaseConnecting, spec.ReasonConnecting, "connecting"
	case sn.Failures > 0:
		st.Phase, reason = spec.PhaseReconnecting, spec.ReasonConnectFailed
		if sn.SandboxUnsupported != "" {
			reason = spec.ReasonSandboxUnsupported
		}
		if sn.Attempting {
			msg = fmt.Sprintf("attempt %d in progress; last error: %s", sn.Failures+1, sn.LastError)
		} else {
			next := sn.NextRetry.UTC().Truncate(time.Second)
			st.NextRetryTime = &next
			msg = fmt.Sprintf("attempt %d failed: %s", sn.Failures, sn.LastError)
		}
	default:
		st.Phase, reason, msg = spec.PhasePending, spec.ReasonPending, "waiting to connect"
	}
	if e.ManifestError != "" && e.Conn != nil {
		msg += " (manifest invalid; running the last valid spec)"
	}
	if in.Catalog != nil && e.Conn != nil {
		c := *in.Catalog
		st.Catalog = &c
	}

	if e.Conn != nil && e.Conn.Spec.RunsProcess() {
		p := &spec.ProcessStatus{Restarts: max(sn.Starts-1, 0), LastExitCode: sn.LastExitCode}
		if sn.Process != nil {
			p.StderrTail = sn.Process.StderrTail
			p.Runtime = sn.Process.Runtime
			if sn.Session != nil {
				p.PID = sn.Process.PID // only a live child has one
				p.Container = sn.Process.Container
			}
		}
		st.Process = p
		if c := e.Conn.Spec.Container; c != nil && p.Container != "" && p.Runtime != "" {
			// What isolates the server while its container runs.
			st.Sandbox = fmt.Sprintf("container %s network=%s", p.Runtime, c.NetworkMode())
		}
	}

	ready := condition(spec.ConditionReady, boolStatus(st.Phase == spec.PhaseConnected), reason, msg)
	reconciling := spec.ConditionFalse
	switch st.Phase {
	case spec.PhaseConnecting, spec.PhaseReconnecting, spec.PhasePending:
		if reason != spec.ReasonStopped {
			reconciling = spec.ConditionTrue
		}
	}
	stalled := condition(spec.ConditionStalled, spec.ConditionFalse, spec.ReasonSucceeded, "")
	switch {
	case e.ManifestError != "":
		stalled = condition(spec.ConditionStalled, spec.ConditionTrue, spec.ReasonManifestInvalid, e.ManifestError)
	case st.Phase == spec.PhaseAuthRequired:
		// No progress without someone: a login, or a fixed client.
		stalled = condition(spec.ConditionStalled, spec.ConditionTrue, spec.ReasonAuthRequired, msg)
	case st.Phase == spec.PhaseRefused:
		// No progress until the manifest asks for less.
		stalled = condition(spec.ConditionStalled, spec.ConditionTrue, spec.ReasonPolicyRefused, msg)
	case reason == spec.ReasonSandboxUnsupported:
		// No progress until the manifest accepts less or the kernel
		// can do more.
		stalled = condition(spec.ConditionStalled, spec.ConditionTrue, spec.ReasonSandboxUnsupported, sn.SandboxUnsupported)
	}
	if stalled.Status == spec.ConditionTrue {
		// kstatus: a stalled object is not reconciling, though a retry at
		// the longest backoff (SandboxUnsupported) or the last valid spec's
		// reconnect may still run.
		reconciling = spec.ConditionFalse
	}
	rec := condition(spec.ConditionReconciling, reconciling, reason, msg)
	if reconciling == spec.ConditionFalse {
		rec.Reason, rec.Message = spec.ReasonSucceeded, ""
	}
	st.Conditions = []spec.Condition{ready, rec, stalled}
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = transitionTime(in.Previous, st.Conditions[i], now)
	}
	return st
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

// someCounts is a status's counts of one kind: nil when the server lists
// none of it (docs/contract.md §3).
func someCounts(count, exposed int) *spec.Counts {
	if count == 0 {
		return nil
	}
	return &spec.Counts{Count: count, Exposed: exposed}
}
