package controller

import (
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/supervisor"
	"github.com/tether-mcp/tether/spec"
)

// TestComputeStatus holds the status function to the phases, reasons and
// messages of each state, with no fakes: it is a pure function of its input.
func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	conn := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}}}
	conn.Default()
	suspended := conn.DeepCopy()
	suspended.Spec.Suspend = true
	live := newFakeSession("a", "b")
	exit := 3
	valid := desired.Entry{Name: "one", Conn: conn}

	for _, tc := range []struct {
		name        string
		in          StatusInput
		phase       spec.Phase
		reason      string
		msg         string
		ready       string
		reconciling string
		stalled     string
	}{
		{
			name:  "never valid",
			in:    StatusInput{Entry: desired.Entry{Name: "one", ManifestError: "bad.yaml:3: spec: no transport"}},
			phase: spec.PhaseInvalid, reason: spec.ReasonManifestInvalid, msg: "bad.yaml:3: spec: no transport",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name:  "stopped",
			in:    StatusInput{Entry: valid, Stopped: true},
			phase: spec.PhasePending, reason: spec.ReasonStopped, msg: "tether stopped",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionFalse,
		},
		{
			name:  "suspended",
			in:    StatusInput{Entry: desired.Entry{Name: "one", Conn: suspended}},
			phase: spec.PhaseSuspended, reason: spec.ReasonSuspended, msg: "suspended by spec.suspend",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionFalse,
		},
		{
			name:  "connecting",
			in:    StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{Connecting: true, Attempting: true, Starts: 1}},
			phase: spec.PhaseConnecting, reason: spec.ReasonConnecting, msg: "connecting",
			ready: spec.ConditionFalse, reconciling: spec.ConditionTrue, stalled: spec.ConditionFalse,
		},
		{
			name: "reconnecting, waiting",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 2, LastError: "refused", NextRetry: now.Add(400 * time.Millisecond), Starts: 2, LastExitCode: &exit,
			}},
			phase: spec.PhaseReconnecting, reason: spec.ReasonConnectFailed, msg: "attempt 2 failed: refused",
			ready: spec.ConditionFalse, reconciling: spec.ConditionTrue, stalled: spec.ConditionFalse,
		},
		{
			name: "reconnecting, attempt running",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 2, LastError: "refused", Attempting: true, Connecting: true, Starts: 3,
			}},
			phase: spec.PhaseReconnecting, reason: spec.ReasonConnectFailed, msg: "attempt 3 in progress; last error: refused",
			ready: spec.ConditionFalse, reconciling: spec.ConditionTrue, stalled: spec.ConditionFalse,
		},
		{
			name: "connected, running the last valid spec",
			in: StatusInput{
				Entry: desired.Entry{Name: "one", Conn: conn, ManifestError: "one.yaml:7: spec.callTimeout: invalid duration"},
				Snapshot: supervisor.Snapshot{Session: live, Running: conn, Server: live.Server(), Tools: 2, ConnectedAt: now.Add(-time.Minute),
					Starts: 1, Process: &spec.ProcessStatus{PID: 42, StderrTail: []string{"ready"}}},
				Exposure: gateway.Exposure{Tools: 1, Collisions: []spec.ToolCollision{{Tool: "one_b", Connection: "another"}}},
			},
			phase: spec.PhaseConnected, reason: spec.ReasonConnected,
			msg:   "connected to fake 1.0.0, 2 tools (manifest invalid; running the last valid spec)",
			ready: spec.ConditionTrue, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name: "degraded",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{Session: live, Running: conn, Server: live.Server(), Tools: 2,
				HealthFailures: 1, HealthError: "health check timed out after 5s", Starts: 1}},
			phase: spec.PhaseDegraded, reason: spec.ReasonHealthCheckFail, msg: "1 health check(s) failed: health check timed out after 5s",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionFalse,
		},
		{
			name: "auth required, waiting for a login",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 1, LastError: "initialize: calling \"initialize\": no token is stored for this connection: run `tether login one`",
				AuthRequired: "no token is stored for this connection: run `tether login one`", AwaitingLogin: true,
			}},
			phase: spec.PhaseAuthRequired, reason: spec.ReasonAuthRequired, msg: "no token is stored for this connection: run `tether login one`",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name: "auth required, client credentials refused",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 4, LastError: "initialize: invalid_client", NextRetry: now.Add(3 * time.Second),
				AuthRequired: "getting a token with the client credentials: invalid_client: check spec.http.oauth.clientCredentials",
			}},
			phase: spec.PhaseAuthRequired, reason: spec.ReasonAuthRequired, msg: "getting a token with the client credentials: invalid_client: check spec.http.oauth.clientCredentials",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name: "auth required, the attempt after a login runs",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 1, LastError: "no token", Attempting: true, Connecting: true, AuthRequired: "no token: run `tether login one`",
			}},
			phase: spec.PhaseReconnecting, reason: spec.ReasonConnectFailed, msg: "attempt 2 in progress; last error: no token",
			ready: spec.ConditionFalse, reconciling: spec.ConditionTrue, stalled: spec.ConditionFalse,
		},
		{
			name: "sandbox unsupported",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 2, LastError: "sandbox: this kernel cannot enforce the policy fully: UDP rules", NextRetry: now.Add(3 * time.Second),
				SandboxUnsupported: "sandbox: this kernel cannot enforce the policy fully: UDP rules",
			}},
			phase: spec.PhaseReconnecting, reason: spec.ReasonSandboxUnsupported, msg: "attempt 2 failed: sandbox: this kernel cannot enforce the policy fully: UDP rules",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name: "sandbox unsupported, the retry at the longest backoff runs",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 2, LastError: "sandbox: this kernel cannot enforce the policy fully: UDP rules", Attempting: true, Connecting: true,
				SandboxUnsupported: "sandbox: this kernel cannot enforce the policy fully: UDP rules",
			}},
			phase: spec.PhaseReconnecting, reason: spec.ReasonSandboxUnsupported, msg: "attempt 3 in progress; last error: sandbox: this kernel cannot enforce the policy fully: UDP rules",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name: "reconnecting the last valid spec while the manifest is invalid",
			in: StatusInput{Entry: desired.Entry{Name: "one", Conn: conn, ManifestError: "one.yaml:7: spec.callTimeout: invalid duration"},
				Snapshot: supervisor.Snapshot{Failures: 1, LastError: "refused", NextRetry: now.Add(time.Second)}},
			phase: spec.PhaseReconnecting, reason: spec.ReasonConnectFailed, msg: "attempt 1 failed: refused (manifest invalid; running the last valid spec)",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name: "policy refused",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 1, LastError: "starting server: spec.stdio.sandbox.write[0]: /m holds the manifest's directory (/m)",
				PolicyRefused: "spec.stdio.sandbox.write[0]: /m holds the manifest's directory (/m)", Starts: 1,
			}},
			phase: spec.PhaseRefused, reason: spec.ReasonPolicyRefused, msg: "spec.stdio.sandbox.write[0]: /m holds the manifest's directory (/m)",
			ready: spec.ConditionFalse, reconciling: spec.ConditionFalse, stalled: spec.ConditionTrue,
		},
		{
			name: "policy refused, the attempt for a new spec runs",
			in: StatusInput{Entry: valid, Snapshot: supervisor.Snapshot{
				Failures: 1, LastError: "refused", Attempting: true, Connecting: true, PolicyRefused: "spec.stdio.sandbox.write[0]: /m holds it",
			}},
			phase: spec.PhaseReconnecting, reason: spec.ReasonConnectFailed, msg: "attempt 2 in progress; last error: refused",
			ready: spec.ConditionFalse, reconciling: spec.ConditionTrue, stalled: spec.ConditionFalse,
		},
		{
			name:  "pending",
			in:    StatusInput{Entry: valid},
			phase: spec.PhasePending, reason: spec.ReasonPending, msg: "waiting to connect",
			ready: spec.ConditionFalse, reconciling: spec.ConditionTrue, stalled: spec.ConditionFalse,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.Now = now
			st := ComputeStatus(tc.in)
			ready := conditionOf(st, spec.ConditionReady)
			if st.Phase != tc.phase || ready.Reason != tc.reason || ready.Message != tc.msg {
				t.Errorf("phase %s, Ready %s/%q; want %s, %s/%q", st.Phase, ready.Reason, ready.Message, tc.phase, tc.reason, tc.msg)
			}
			for typ, want := range map[string]string{
				spec.ConditionReady: tc.ready, spec.ConditionReconciling: tc.reconciling, spec.ConditionStalled: tc.stalled,
			} {
				if got := conditionOf(st, typ).Status; got != want {
					t.Errorf("%s = %s, want %s", typ, got, want)
				}
			}
			if tc.reason == spec.ReasonSandboxUnsupported {
				if c := conditionOf(st, spec.ConditionStalled); c.Reason != spec.ReasonSandboxUnsupported || c.Message != tc.in.Snapshot.SandboxUnsupported {
					t.Errorf("Stalled = %s/%q, want %s/%q", c.Reason, c.Message, spec.ReasonSandboxUnsupported, tc.in.Snapshot.SandboxUnsupported)
				}
			}
			if tc.reason == spec.ReasonPolicyRefused {
				if c := conditionOf(st, spec.ConditionStalled); c.Reason != spec.ReasonPolicyRefused || c.Message != tc.in.Snapshot.PolicyRefused {
					t.Errorf("Stalled = %s/%q, want %s/%q", c.Reason, c.Message, spec.ReasonPolicyRefused, tc.in.Snapshot.PolicyRefused)
				}
				if st.NextRetryTime != nil || st.LastError != tc.in.Snapshot.LastError || st.Attempt != 1 {
					t.Errorf("nextRetryTime %v, lastError %q, attempt %d; want none, the error, 1", st.NextRetryTime, st.LastError, st.Attempt)
				}
			}
			if conditionOf(st, spec.ConditionStalled).Status == spec.ConditionTrue && conditionOf(st, spec.ConditionReconciling).Status != spec.ConditionFalse {
				t.Errorf("Stalled True with Reconciling %+v: kstatus wants Reconciling False", conditionOf(st, spec.ConditionReconciling))
			}
			for _, c := range st.Conditions {
				if !c.LastTransitionTime.Equal(now) {
					t.Errorf("%s: lastTransitionTime %v, want now (no previous status)", c.Type, c.LastTransitionTime)
				}
			}
		})
	}
}

// TestComputeStatusDetails: the fields beside the phase, and the kstatus
// rule that lastTransitionTime moves only when a condition's status does.
func TestComputeStatusDetails(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	conn := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}}}
	conn.Default()
	live := newFakeSession("a", "b")
	exit := 1
	in := StatusInput{
		Entry: desired.Entry{Name: "one", Conn: conn, Generation: 7},
		Snapshot: supervisor.Snapshot{Session: live, Running: conn, Server: live.Server(), Tools: 2, ConnectedAt: now.Add(-90 * time.Second),
			Starts: 4, LastExitCode: &exit, Process: &spec.ProcessStatus{PID: 42, StderrTail: []string{"ready"}}, Sandbox: "landlock fs+net"},
		Exposure: gateway.Exposure{Tools: 1, Collisions: []spec.ToolCollision{{Tool: "one_b", Connection: "another"}}},
		Now:      now,
	}
	st := ComputeStatus(in)
	if st.Tools == nil || st.Tools.Count != 2 || st.Tools.Exposed != 1 {
		t.Errorf("tools = %+v, want count 2, exposed 1", st.Tools)
	}
	if len(st.Collisions) != 1 || st.Collisions[0].Connection != "another" {
		t.Errorf("collisions = %+v", st.Collisions)
	}
	// A server with no prompts, resources or templates has none of those
	// counts; one that lists them has them, with what the gateway exposes.
	if st.Prompts != nil || st.Resources != nil || st.ResourceTemplates != nil {
		t.Errorf("counts of a tools-only server: prompts %+v, resources %+v, templates %+v; want none", st.Prompts, st.Resources, st.ResourceTemplates)
	}
	withCatalog := in
	withCatalog.Snapshot.Prompts, withCatalog.Snapshot.Resources, withCatalog.Snapshot.ResourceTemplates = 3, 5, 1
	withCatalog.Exposure.Prompts, withCatalog.Exposure.Resources, withCatalog.Exposure.ResourceTemplates = 2, 5, 0
	stc := ComputeStatus(withCatalog)
	for _, c := range []struct {
		kind string
		got  *spec.Counts
		want spec.Counts
	}{
		{"prompts", stc.Prompts, spec.Counts{Count: 3, Exposed: 2}},
		{"resources", stc.Resources, spec.Counts{Count: 5, Exposed: 5}},
		{"resourceTemplates", stc.ResourceTemplates, spec.Counts{Count: 1, Exposed: 0}},
	} {
		if c.got == nil || *c.got != c.want {
			t.Errorf("%s = %+v, want %+v", c.kind, c.got, c.want)
		}
	}
	if st.Sandbox != "landlock fs+net" {
		t.Errorf("sandbox = %q, want the live session's", st.Sandbox)
	}
	if p := st.Process; p == nil || p.PID != 42 || p.Restarts != 3 || p.LastExitCode == nil || *p.LastExitCode != 1 || len(p.StderrTail) != 1 {
		t.Errorf("process = %+v, want pid 42, 3 restarts, last exit 1, the tail", p)
	}
	if st.ObservedGeneration != 7 {
		t.Errorf("observedGeneration = %d, want the entry's generation 7", st.ObservedGeneration)
	}
	if st.ObservedSpecHash != conn.Spec.Hash() || st.ConnectedSince == nil || !st.ConnectedSince.Equal(now.Add(-90*time.Second)) {
		t.Errorf("hash %q, connectedSince %v", st.ObservedSpecHash, st.ConnectedSince)
	}

	// An hour later, still connected: Ready keeps its time. Then the
	// session is gone: Ready moves, and the dead child shows no pid.
	later := in
	later.Previous, later.Now = &st, now.Add(time.Hour)
	st2 := ComputeStatus(later)
	if got := conditionOf(st2, spec.ConditionReady).LastTransitionTime; !got.Equal(now) {
		t.Errorf("Ready moved to %v while it stayed True", got)
	}
	later.Snapshot.Session, later.Snapshot.Failures, later.Snapshot.LastError = nil, 1, "connection lost: EOF"
	st3 := ComputeStatus(later)
	if got := conditionOf(st3, spec.ConditionReady).LastTransitionTime; !got.Equal(now.Add(time.Hour)) {
		t.Errorf("Ready kept %v after it turned False", got)
	}
	if st3.Process == nil || st3.Process.PID != 0 || len(st3.Process.StderrTail) != 1 {
		t.Errorf("process after the session ended = %+v, want no pid and the last tail", st3.Process)
	}
}

// TestComputeStatusContainer: a container server has process facts like a
// stdio child, names its container and says what isolates it while it
// runs; once its session is gone, neither the container nor the sandbox
// is shown (nothing is in force).
func TestComputeStatusContainer(t *testing.T) {
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	conn := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "box"}, Spec: spec.Spec{Container: &spec.ContainerSpec{Image: "srv:1"}}}
	conn.Default()
	live := newFakeSession("a")
	in := StatusInput{
		Entry: desired.Entry{Name: "box", Conn: conn},
		Snapshot: supervisor.Snapshot{Session: live, Running: conn, Server: live.Server(), Tools: 1, ConnectedAt: now, Starts: 2,
			Process: &spec.ProcessStatus{PID: 42, Container: "tether-box-0a1b2c3d", Runtime: "docker"}},
		Now: now,
	}
	st := ComputeStatus(in)
	if p := st.Process; p == nil || p.PID != 42 || p.Container != "tether-box-0a1b2c3d" || p.Runtime != "docker" || p.Restarts != 1 {
		t.Errorf("process = %+v, want pid 42, container tether-box-0a1b2c3d, runtime docker, 1 restart", p)
	}
	if want := "container docker network=none"; st.Sandbox != want {
		t.Errorf("sandbox = %q, want %q", st.Sandbox, want)
	}
	in.Snapshot.Session = nil
	st = ComputeStatus(in)
	if p := st.Process; p == nil || p.Container != "" || p.PID != 0 || st.Sandbox != "" {
		t.Errorf("after the session: process %+v, sandbox %q; want no container, no pid, no sandbox", p, st.Sandbox)
	}
}
