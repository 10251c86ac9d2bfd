package supervisor

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// unsupportedErr is what controller/sandbox's UnsupportedError looks like
// to the supervisor.
type unsupportedErr struct{ unsupported bool }

func (e unsupportedErr) Error() string {
	return "sandbox: this kernel cannot enforce the policy fully: UDP rules"
}
func (e unsupportedErr) SandboxUnsupported() bool { return e.unsupported }

// sandboxedSession is a live session that says what confines its server.
type sandboxedSession struct{ *session }

func (s sandboxedSession) Sandbox() string { return "landlock fs+net" }

// sandboxConnector fails with errs in turn, then hands out a sandboxed
// session.
type sandboxConnector struct{ authConnector }

func (c *sandboxConnector) Connect(ctx context.Context, req ConnectRequest) (Session, error) {
	s, err := c.authConnector.Connect(ctx, req)
	if err != nil {
		return nil, err
	}
	return sandboxedSession{s.(*session)}, nil
}

// TestSupervisorSandboxUnsupported: a sandbox the kernel cannot enforce is
// reported (Snapshot.SandboxUnsupported) and retried at the backoff's cap,
// not hot (the first failure, which would wait 100ms); another failure or
// a success forgets it; a live session's
// sandbox is in the snapshot.
func TestSupervisorSandboxUnsupported(t *testing.T) {
	conn := &sandboxConnector{authConnector{errs: []error{
		unsupportedErr{unsupported: true}, errors.New("connection refused"), unsupportedErr{unsupported: false}, unsupportedErr{unsupported: true},
	}}}
	h := newClockedSupervisor(t, conn, spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}})
	attempt := func() (time.Duration, Snapshot) {
		t.Helper()
		h.step()
		h.waitNotified()
		d := h.step()
		h.now = h.now.Add(d)
		return d, h.sup.Snapshot()
	}

	if d, snap := attempt(); d != 3*time.Second || snap.SandboxUnsupported != (unsupportedErr{}).Error() {
		t.Fatalf("unsupported sandbox: wait %v, SandboxUnsupported %q; want the cap 3s and the error", d, snap.SandboxUnsupported)
	}
	if _, snap := attempt(); snap.SandboxUnsupported != "" || snap.LastError != "initialize: sending: connection refused" {
		t.Fatalf("another failure after it: SandboxUnsupported %q, last error %q; want none, that failure's", snap.SandboxUnsupported, snap.LastError)
	}
	if _, snap := attempt(); snap.SandboxUnsupported != "" {
		t.Fatalf("an error whose SandboxUnsupported says false: SandboxUnsupported %q, want none", snap.SandboxUnsupported)
	}
	if _, snap := attempt(); snap.SandboxUnsupported == "" {
		t.Fatal("unsupported again: SandboxUnsupported is empty")
	}
	if _, snap := attempt(); snap.Session == nil || snap.SandboxUnsupported != "" || snap.Sandbox != "landlock fs+net" {
		t.Fatalf("after a success: session %v, SandboxUnsupported %q, Sandbox %q; want live, none, the session's", snap.Session, snap.SandboxUnsupported, snap.Sandbox)
	}
}

// refusedErr is what controller/sandbox's RefusedError looks like to the
// supervisor.
type refusedErr struct{ refused bool }

func (e refusedErr) Error() string {
	return "spec.stdio.sandbox.write[0]: /srv/manifests holds the manifest's directory (/srv/manifests)"
}
func (e refusedErr) PolicyRefused() bool { return e.refused }

// TestSupervisorPolicyRefused: a confinement policy tether refuses starts
// no attempt, whatever time passes, and a Demand is answered with the
// refusal at once; a new Secret version is no new spec; a Stop keeps it; a
// new spec is tried at once, and its success forgets the refusal. An
// error whose PolicyRefused says false, or any other failure, backs off as
// before.
func TestSupervisorPolicyRefused(t *testing.T) {
	conn := &sandboxConnector{authConnector{errs: []error{
		refusedErr{refused: true}, refusedErr{refused: true}, refusedErr{refused: false},
	}}}
	h := newClockedSupervisor(t, conn, spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}})
	refusal := (refusedErr{}).Error()

	h.step()
	h.waitNotified()
	if d := h.step(); d != 0 {
		t.Fatalf("a refused policy asks to be looked at again in %v", d)
	}
	snap := h.sup.Snapshot()
	if snap.State != Refused || snap.PolicyRefused != refusal || !snap.NextRetry.IsZero() || snap.Connecting ||
		snap.Failures != 1 || snap.LastError != "initialize: sending: "+refusal {
		t.Fatalf("after a refused policy: %+v", snap)
	}
	if _, err := h.sup.Demand(context.Background()); err == nil || err.Error() != refusal {
		t.Fatalf("a Demand of a refused connection: %v, want the refusal", err)
	}
	h.now = h.now.Add(time.Hour)
	h.want.SecretsVersion = "2" // a rotated Secret changes no policy
	for range 3 {
		if d := h.step(); d != 0 || h.sup.Snapshot().Connecting {
			t.Fatalf("an hour later, a step started an attempt or a wait (%v)", d)
		}
	}
	h.sup.Stop("manifest invalid")
	if h.step(); h.sup.Snapshot().State != Refused || h.sup.Snapshot().Connecting {
		t.Fatalf("after a Stop, the same spec: %+v, want Refused kept", h.sup.Snapshot())
	}
	if n := conn.count(); n != 1 {
		t.Fatalf("%d attempts while the policy stays refused, want 1", n)
	}

	// A new spec is tried at once; refused again, it waits again.
	c2 := h.c.DeepCopy()
	c2.Spec.Stdio.Args = []string{"--other"}
	h.want = Want{Conn: c2}
	h.step()
	h.waitNotified()
	h.step()
	if n, snap := conn.count(), h.sup.Snapshot(); n != 2 || snap.State != Refused || snap.Failures != 2 {
		t.Fatalf("a new spec: %d attempts, %+v; want 2, refused again", n, snap)
	}
	// Another directory is a new spec too (relative grants resolve there).
	h.want = Want{Conn: c2, Dir: "/elsewhere"}
	h.step()
	h.waitNotified()
	if d := h.step(); d != 100*time.Millisecond || h.sup.Snapshot().PolicyRefused != "" || h.sup.Snapshot().State != Backoff {
		t.Fatalf("an error whose PolicyRefused says false: wait %v, %+v; want the first backoff delay", d, h.sup.Snapshot())
	}
	h.now = h.now.Add(time.Second)
	h.step()
	h.waitNotified()
	h.step()
	if snap := h.sup.Snapshot(); snap.Session == nil || snap.PolicyRefused != "" || snap.Failures != 0 {
		t.Fatalf("after a success: %+v", snap)
	}
}

// TestSupervisorSuspendForgetsRefusal: a suspended connection starts
// afresh when resumed, as for any other failure.
func TestSupervisorSuspendForgetsRefusal(t *testing.T) {
	notified := make(chan struct{}, 100)
	conn := &sandboxConnector{authConnector{errs: []error{refusedErr{refused: true}}}}
	sup := New(context.Background(), Options{Name: "one", Connector: conn, Notify: func() { notified <- struct{}{} }})
	t.Cleanup(func() { sup.Close("test over"); _ = sup.Wait(context.Background()) })
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}}}
	c.Default()
	want := Want{Conn: c}
	sup.Step(context.Background(), want)
	<-notified
	sup.Step(context.Background(), want)
	if snap := sup.Snapshot(); snap.State != Refused {
		t.Fatalf("after a refused policy: %+v", snap)
	}
	sup.Suspend(context.Background())
	if snap := sup.Snapshot(); snap.PolicyRefused != "" {
		t.Fatalf("Suspend kept the refusal: %+v", snap)
	}
	sup.Step(context.Background(), want)
	<-notified
	sup.Step(context.Background(), want)
	if n, snap := conn.count(), sup.Snapshot(); n != 2 || snap.Session == nil {
		t.Fatalf("resumed: %d attempts, %+v; want 2, connected", n, snap)
	}
}
