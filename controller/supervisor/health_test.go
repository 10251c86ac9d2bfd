package supervisor

import (
	"context"
	"errors"
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
	sup := New(context.Background(), Options{Name: "h", Connector: probingConnector{ss}, Metrics: metrics,
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

	// A probe that never answers: timed out, counted; then the threshold.
	ss.answer(nil, true)
	sn := until("a timed-out probe", func(sn Snapshot) bool { return sn.HealthFailures >= 1 })
	if !strings.Contains(sn.HealthError, "health check timed out after 30ms") {
		t.Errorf("HealthError = %q", sn.HealthError)
	}
	ss.answer(nil, false)
	until("a passing probe again", func(sn Snapshot) bool { return sn.State == Connected && sn.HealthFailures == 0 })

	ss.answer(errors.New("no pong"), false)
	sn = until("the session dropped", func(sn Snapshot) bool { return sn.State != Connected })
	if sn.Session != nil || !strings.Contains(sn.LastError, "2 health checks in a row failed: no pong") {
		t.Errorf("after %d failed probes: %+v", threshold, sn)
	}
	if sn.HealthFailures != 0 {
		t.Errorf("the dropped session's probe count stayed: %d", sn.HealthFailures)
	}
}
