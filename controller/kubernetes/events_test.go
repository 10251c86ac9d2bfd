package kubernetes

import (
	"reflect"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

func status(phase spec.Phase, reason, msg string) *spec.ConnectionStatus {
	return &spec.ConnectionStatus{Phase: phase, Conditions: []spec.Condition{{Type: spec.ConditionReady, Reason: reason, Message: msg}}}
}

// TestTransitions: an Event for each transition the logs mark at INFO and
// WARN, none for a status that moved nothing a person acts on.
func TestTransitions(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	connected := func(since time.Time) *spec.ConnectionStatus {
		st := status(spec.PhaseConnected, spec.ReasonConnected, "connected to srv 1.0, 5 tools")
		st.ConnectedSince = &since
		return st
	}
	failing := func(attempt int, err string) *spec.ConnectionStatus {
		st := status(spec.PhaseReconnecting, spec.ReasonConnectFailed, "attempt failed: "+err)
		st.Attempt, st.LastError = attempt, err
		return st
	}
	refused := func(err string) *spec.ConnectionStatus {
		st := status(spec.PhaseRefused, spec.ReasonPolicyRefused, err)
		st.Attempt, st.LastError = 1, err
		return st
	}
	invalid := status(spec.PhaseInvalid, spec.ReasonManifestInvalid, "bad")
	invalid.ManifestError = "McpConnection a/b: spec: bad"
	keptValid := connected(t0)
	keptValid.ManifestError = "McpConnection a/b: spec.backoff.max: bad"

	for _, tc := range []struct {
		name      string
		prev, cur *spec.ConnectionStatus
		want      []event
	}{
		{"first status, connected", nil, connected(t0),
			[]event{{"Normal", "Connected", "connected to srv 1.0, 5 tools"}}},
		{"still connected", connected(t0), connected(t0), nil},
		{"a new session (spec edit, rotated Secret)", connected(t0), connected(t1),
			[]event{{"Normal", "Connected", "connected to srv 1.0, 5 tools"}}},
		{"connecting", nil, status(spec.PhaseConnecting, spec.ReasonConnecting, "connecting"),
			[]event{{"Normal", "Connecting", "connecting"}}},
		{"an attempt fails", connected(t0), failing(1, "connection refused"),
			[]event{{"Warning", "ConnectFailed", "attempt failed: connection refused"}}},
		{"it fails again the same way", failing(1, "connection refused"), failing(2, "connection refused"), nil},
		{"it fails another way", failing(2, "connection refused"), failing(3, "401 Unauthorized"),
			[]event{{"Warning", "ConnectFailed", "attempt failed: 401 Unauthorized"}}},
		{"a confinement policy refused", failing(1, "connection refused"), refused("spec.stdio.sandbox.write[0]: /m holds it"),
			[]event{{"Warning", "PolicyRefused", "spec.stdio.sandbox.write[0]: /m holds it"}}},
		{"refused again, the same way (a Stop kept it)", refused("spec.stdio.sandbox.write[0]: /m holds it"), refused("spec.stdio.sandbox.write[0]: /m holds it"), nil},
		{"a new spec refused another way", refused("spec.stdio.sandbox.write[0]: /m holds it"), refused("spec.container.mounts[0]: /m holds it"),
			[]event{{"Warning", "PolicyRefused", "spec.container.mounts[0]: /m holds it"}}},
		{"health checks fail", connected(t0), status(spec.PhaseDegraded, spec.ReasonHealthCheckFail, "2 health check(s) failed"),
			[]event{{"Warning", "HealthCheckFailing", "2 health check(s) failed"}}},
		{"suspended", connected(t0), status(spec.PhaseSuspended, spec.ReasonSuspended, "suspended by spec.suspend"),
			[]event{{"Normal", "Suspended", "suspended by spec.suspend"}}},
		{"idle (an OnDemand server stopped)", connected(t0), status(spec.PhaseIdle, spec.ReasonIdle, "stopped after 10m idle"),
			[]event{{"Normal", "Idle", "stopped after 10m idle"}}},
		{"stopped", connected(t0), status(spec.PhasePending, spec.ReasonStopped, "tether stopped"),
			[]event{{"Normal", "Stopped", "tether stopped"}}},
		{"pending is no event", nil, status(spec.PhasePending, spec.ReasonPending, "waiting to connect"), nil},
		{"never valid", nil, invalid,
			[]event{{"Warning", "ManifestInvalid", "McpConnection a/b: spec: bad"}}},
		{"a bad edit keeps the last valid spec", connected(t0), keptValid,
			[]event{{"Warning", "ManifestInvalid", "McpConnection a/b: spec.backoff.max: bad"}}},
		{"fixed", keptValid, connected(t0),
			[]event{{"Normal", "ManifestValid", "the object is valid again"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transitions(tc.prev, tc.cur); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v\nwant %v", got, tc.want)
			}
		})
	}
}

// TestStatusMap: the status as the object stores it: no nulls (the API
// server drops them), numbers as a read-back object has them, so that an
// unchanged status compares equal and is not written again.
func TestStatusMap(t *testing.T) {
	since := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	st := spec.ConnectionStatus{
		Phase: spec.PhaseConnected, ObservedGeneration: 4, ConnectedSince: &since,
		Conditions: []spec.Condition{{Type: spec.ConditionReady, Status: spec.ConditionTrue, Reason: "Connected", LastTransitionTime: since}},
		Tools:      &spec.Counts{Count: 5, Exposed: 4},
	}
	m, err := statusMap(st)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := m["nextRetryTime"]; ok {
		t.Error("a null nextRetryTime is written")
	}
	if m["observedGeneration"] != float64(4) || m["connectedSince"] != "2026-11-23T10:00:00Z" {
		t.Errorf("status map = %v", m)
	}
	// As the informer delivers it back: integers as int64.
	stored := map[string]any{
		"phase": "Connected", "observedGeneration": int64(4), "connectedSince": "2026-11-23T10:00:00Z",
		"attempt": int64(0), "lastError": "", "manifestError": "",
		"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": "Connected", "message": "", "lastTransitionTime": "2026-11-23T10:00:00Z"}},
		"tools":      map[string]any{"count": int64(5), "exposed": int64(4)},
	}
	back, err := normalize(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, back) {
		t.Errorf("written and read back differ:\n%v\n%v", m, back)
	}
}
