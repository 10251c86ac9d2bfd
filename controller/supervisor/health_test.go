package supervisor

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// probingSession is a session whose probes answer what the test says:
// nil, an error, or (block) nothing until the probe's deadline.
type probingSession struct {
	*session
	mu     sync.Mutex
	err    error
	block  bool
	probes atomic.Int32
	proc   atomic.Pointer[spec.ProcessStatus] // what Process says
	busy   atomic.Bool                        // what Activity says
}

func (p *probingSession) Process() *spec.ProcessStatus { return p.proc.Load() }

func (p *probingSession) Activity() (bool, time.Time) { return p.busy.Load(), time.Time{} }

// lockedBuffer is a log destination the supervisor's goroutines write to
// while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count counts the lines whose message is msg.
func (l *lockedBuffer) count(msg string) int {
	if strings.ContainsAny(msg, " =\"") {
		msg = strconv.Quote(msg)
	}
	n := 0
	for line := range strings.Lines(l.String()) {
		if strings.Contains(strings.TrimSuffix(line, "\n")+" ", " msg="+msg+" ") {
			n++
		}
	}
	return n
}

func (p *probingSession) Probe(ctx context.Context) error {
	p.probes.Add(1)
	p.mu.Lock()
	err, block := p.err, p.block
	p.mu.Unlock()
	if block {
		<-ctx.Done()
		return ctx.Err()
	}
	return err
}

func (p *probingSession) answer(err error, block bool) {
	p.mu.Lock()
	p.err, p.block = err, block
	p.mu.Unlock()
}

type probingConnector struct{ ss *probingSession }

func (c probingConnector) Connect(_ context.Context, req ConnectRequest) (Session, error) {
	c.ss.onEnd = req.OnEnd
	return c.ss, nil
}

type healthCounter struct{ n atomic.Int32 }

func (h *healthCounter) ObserveAttempt(string, bool)                     {}
func (h *healthCounter) ObserveHealthCheck(_ string, took time.Duration) { h.n.Add(1) }

// TestHealthChecks: a failed probe is counted and shown, a passing one
// clears the count, a probe that runs out of its timeout says so, and
// failureThreshold failures in a row drop the session with why.
func TestHealthChecks(t *testing.T) {
	ss := &probingSession{session: newSession()}
	notified := make(chan struct{}, 1000)
	metrics := &healthCounter{}
	var logs lockedBuffer
	sup := New(context.Background(), Options{Name: "h", Connector: probingConnector{ss}, Metrics: metrics,
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Notify: func() { notified <- struct{}{} }, Jitter: func() float64 { return 0 }})
	t.Cleanup(func() { sup.Close("over"); _ = sup.Wait(context.Background()) })
	threshold := 2
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "h"}, Spec: spec.Spec{
		Stdio: &spec.StdioSpec{Command: "server"},
		HealthCheck: &spec.HealthCheck{Interval: &spec.Duration{Duration: 5 * time.Millisecond},
			Timeout: &spec.Duration{Duration: 30 * time.Millisecond}, FailureThreshold: &threshold}}}
	c.Default()
	want := Want{Conn: c}
	until := func(what string, ok func(Snapshot) bool) Snapshot {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			sup.Step(context.Background(), want)
			if sn := sup.Snapshot(); ok(sn) {
				return sn
			}
			select {
			case <-notified:
			case <-deadline:
				t.Fatalf("waiting for %s: %+v", what, sup.Snapshot())
			}
		}
	}
	until("connected", func(sn Snapshot) bool { return sn.State == Connected })

	// One passing probe at least: nothing to report.
	for ss.probes.Load() < 2 {
		time.Sleep(time.Millisecond)
	}
	if sn := sup.Snapshot(); sn.HealthFailures != 0 || sn.HealthError != "" {
		t.Fatalf("after passing probes: %+v", sn)
	}
	if metrics.n.Load() == 0 {
		t.Error("no health check observed")
	}
	// The first probe's line, if any, was written before the second was
	// scheduled.
	if n := logs.count("health check passed again"); n != 0 {
		t.Errorf("%d lines say a probe passed again, and none failed", n)
	}

	// A probe that never answers: timed out, counted; then the threshold.
	ss.answer(nil, true)
	sn := until("a timed-out probe", func(sn Snapshot) bool { return sn.HealthFailures >= 1 })
	if !strings.Contains(sn.HealthError, "health check timed out after 30ms") {
		t.Errorf("HealthError = %q", sn.HealthError)
	}
	ss.answer(nil, false)
	until("a passing probe again", func(sn Snapshot) bool { return sn.State == Connected && sn.HealthFailures == 0 })
	if n := logs.count("health check passed again"); n != 1 {
		t.Errorf("%d lines say a probe passed again after a failure, want 1", n)
	}

	ss.answer(errors.New("no pong"), false)
	sn = until("the session dropped", func(sn Snapshot) bool { return sn.State != Connected })
	if sn.Session != nil || !strings.Contains(sn.LastError, "2 health checks in a row failed: no pong") {
		t.Errorf("after %d failed probes: %+v", threshold, sn)
	}
	if sn.HealthFailures != 0 {
		t.Errorf("the dropped session's probe count stayed: %d", sn.HealthFailures)
	}
}

// TestStderrTailIsReported: a new last line of a stdio child's stderr asks
// for a reconcile at the next probe (the status shows it), and the
// snapshot shows the live child's facts, not those it had when it
// connected.
func TestStderrTailIsReported(t *testing.T) {
	ss := &probingSession{session: newSession()}
	ss.proc.Store(&spec.ProcessStatus{}) // a child that wrote nothing yet
	var notifies atomic.Int32
	sup := New(context.Background(), Options{Name: "tail", Connector: probingConnector{ss},
		Notify: func() { notifies.Add(1) }, Jitter: func() float64 { return 0 }})
	t.Cleanup(func() { sup.Close("over"); _ = sup.Wait(context.Background()) })
	c := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "tail"}, Spec: spec.Spec{
		Stdio:       &spec.StdioSpec{Command: "server"},
		HealthCheck: &spec.HealthCheck{Interval: &spec.Duration{Duration: 5 * time.Millisecond}}}}
	c.Default()
	want := Want{Conn: c}
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			sup.Step(context.Background(), want)
			time.Sleep(time.Millisecond)
		}
	}
	wait("connected", func() bool { return sup.Snapshot().State == Connected })
	wait("probes of a child with no stderr", func() bool { return ss.probes.Load() >= 3 })
	for _, line := range []string{"one", "two", "three"} {
		n := notifies.Load()
		ss.proc.Store(&spec.ProcessStatus{StderrTail: []string{"earlier", line}})
		wait("a reconcile asked for stderr line "+line, func() bool { return notifies.Load() > n })
		if p := sup.Snapshot().Process; p == nil || len(p.StderrTail) != 2 || p.StderrTail[1] != line {
			t.Fatalf("snapshot's process %+v, want the live child's tail ending %q", p, line)
		}
	}
}

// TestHealthSettingsDefaults: a session whose spec sets no usable interval
// (none, or zero from a spec that skipped validation) is probed at the
// default interval and timeout, never in a hot loop.
func TestHealthSettingsDefaults(t *testing.T) {
	sup := New(context.Background(), Options{Name: "d"})
	m := &monitor{s: sup}
	if iv, to, th, ep := m.settingsLocked(); iv != spec.DefaultHealthInterval || to != spec.DefaultHealthTimeout || th != 1 || ep != "" {
		t.Errorf("without a spec: %v %v %d %q", iv, to, th, ep)
	}
	threshold := 4
	sup.sessionSpec = &spec.McpConnection{Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "server"},
		HealthCheck: &spec.HealthCheck{Interval: &spec.Duration{}, Timeout: &spec.Duration{Duration: time.Second},
			FailureThreshold: &threshold}}}
	if iv, to, th, ep := m.settingsLocked(); iv != spec.DefaultHealthInterval || to != spec.DefaultHealthTimeout || th != 4 || ep != "server" {
		t.Errorf("a zero interval: %v %v %d %q", iv, to, th, ep)
	}
	sup.sessionSpec.Spec.HealthCheck.Interval.Duration = time.Minute
	if iv, to, _, _ := m.settingsLocked(); iv != time.Minute || to != time.Second {
		t.Errorf("set: %v %v", iv, to)
	}
}
