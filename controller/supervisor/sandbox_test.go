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
	notified := make(chan struct{}, 100)
	now := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	conn := &sandboxConnector{authConnector{errs: []error{
		unsupportedErr{unsupported: true}, errors.New("connection refused"), unsupportedErr{unsupported: false}, unsupportedErr{unsupported: true},
	}}}
	sup := New(context.Background(), Options{
		Name:      "one",
		Connector: conn,
		Notify:    func() { notified <- struct{}{} },
		Now:       func() time.Time { return now },
		Jitter:    func() float64 { return 0 },
	})
	t.Cleanup(func() { sup.Close("test over"); _ = sup.Wait(context.Background()) })
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "one"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"}}}
	c.Default()
	want := Want{Conn: c}
	attempt := func() (time.Duration, Snapshot) {
		t.Helper()
		sup.Step(context.Background(), want)
		select {
		case <-notified:
		case <-time.After(5 * time.Second):
			t.Fatal("attempt did not report back")
		}
		d := sup.Step(context.Background(), want)
		now = now.Add(d)
		return d, sup.Snapshot()
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
