package kubernetes

import (
	"time"

	"github.com/tether-mcp/tether/spec"
)

// event is one Kubernetes Event about a connection's object.
type event struct {
	Type, Reason, Message string
}

// Event reasons that are not condition reasons.
const (
	reasonManifestValid = "ManifestValid"
)

// transitions lists the Events of a status change, the transitions the logs
// mark at INFO and WARN: a session established (Normal Connected), an attempt
// failing (Warning ConnectFailed, again only when the error changes), a
// confinement policy refused (Warning PolicyRefused, likewise), health
// checks failing (Warning HealthCheckFailing), connecting, idle, suspended
// and stopped (Normal), an object that became invalid or valid again. prev is
// nil for a first status. A status that moves nothing a person acts on (the
// attempt count, the next retry time) gives none: the Events stay few and
// the Recorder's correlation is the second line.
func transitions(prev, cur *spec.ConnectionStatus) []event {
	var out []event
	ready := readyMessage(cur)
	phaseMoved := prev == nil || prev.Phase != cur.Phase
	switch cur.Phase {
	case spec.PhaseConnected:
		if phaseMoved || !sameTime(prev.ConnectedSince, cur.ConnectedSince) {
			out = append(out, event{eventTypeNormal, spec.ReasonConnected, ready})
		}
	case spec.PhaseDegraded:
		if phaseMoved {
			out = append(out, event{eventTypeWarning, spec.ReasonHealthCheckFail, ready})
		}
	case spec.PhaseReconnecting:
		if phaseMoved || prev.LastError != cur.LastError {
			out = append(out, event{eventTypeWarning, spec.ReasonConnectFailed, ready})
		}
	case spec.PhaseRefused:
		// No retry follows: this Event is the one a person sees.
		if phaseMoved || prev.LastError != cur.LastError {
			out = append(out, event{eventTypeWarning, spec.ReasonPolicyRefused, ready})
		}
	case spec.PhaseConnecting, spec.PhaseSuspended, spec.PhaseIdle:
		if phaseMoved {
			out = append(out, event{eventTypeNormal, readyReason(cur), ready})
		}
	case spec.PhasePending:
		if phaseMoved && readyReason(cur) == spec.ReasonStopped {
			out = append(out, event{eventTypeNormal, spec.ReasonStopped, ready})
		}
	}
	had := ""
	if prev != nil {
		had = prev.ManifestError
	}
	switch {
	case cur.ManifestError != "" && cur.ManifestError != had:
		out = append(out, event{eventTypeWarning, spec.ReasonManifestInvalid, cur.ManifestError})
	case cur.ManifestError == "" && had != "":
		out = append(out, event{eventTypeNormal, reasonManifestValid, "the object is valid again"})
	}
	return out
}

func readyCondition(st *spec.ConnectionStatus) spec.Condition {
	for _, c := range st.Conditions {
		if c.Type == spec.ConditionReady {
			return c
		}
	}
	return spec.Condition{}
}

func readyMessage(st *spec.ConnectionStatus) string { return readyCondition(st).Message }
func readyReason(st *spec.ConnectionStatus) string  { return readyCondition(st).Reason }

func sameTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}
