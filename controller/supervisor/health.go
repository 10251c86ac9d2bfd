package supervisor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/spec"
)

// monitor probes one live session at its health interval. It runs from a
// timer, not a goroutine of its own: between probes an idle connection
// holds no goroutine (1,000 connections, 1,000 fewer stacks). The session's
// end reaches the supervisor through ConnectRequest.OnEnd.
type monitor struct {
	s     *Supervisor
	ss    Session
	ctx   context.Context // ends when the supervisor drops the session
	timer *time.Timer

	lastTail string // only the tick touches it; ticks never overlap
}

// startMonitor schedules the first probe of ss and returns what stops them.
// Called with s.mu held.
func (s *Supervisor) startMonitor(ss Session) context.CancelFunc {
	ctx, cancel := context.WithCancel(s.ctx)
	m := &monitor{s: s, ss: ss, ctx: ctx}
	interval, _, _, _ := m.settingsLocked()
	m.timer = time.AfterFunc(interval, m.tick)
	return func() {
		cancel()
		m.timer.Stop()
	}
}

// settingsLocked reads the health settings of the running spec, so that
// edits apply in place at the next tick. Called with s.mu held.
func (m *monitor) settingsLocked() (interval, timeout time.Duration, threshold int, endpoint string) {
	threshold = 1
	if sp := m.s.sessionSpec; sp != nil {
		interval = sp.Spec.HealthInterval()
		timeout = sp.Spec.HealthTimeout()
		threshold = sp.Spec.FailureThreshold()
		endpoint = tracing.EndpointOf(&sp.Spec)
	}
	if interval <= 0 {
		interval = spec.DefaultHealthInterval
		timeout = spec.DefaultHealthTimeout
	}
	return interval, timeout, threshold, endpoint
}

// tick sends one probe, records its outcome, and schedules the next one
// unless the session is down, ended or dropped.
//
// A stdio child's stderr tail reaches the status at the same pace: a chatty
// server costs at most one status write per health interval.
func (m *monitor) tick() {
	s, ss := m.s, m.ss
	s.mu.Lock()
	// Checked under s.mu, which dropLocked and Close hold while they cancel
	// m.ctx: a tick either sees the cancel or is counted in s.wg before
	// Wait waits.
	if m.ctx.Err() != nil {
		s.mu.Unlock()
		return
	}
	s.wg.Add(1)
	_, timeout, threshold, endpoint := m.settingsLocked()
	s.mu.Unlock()
	defer s.wg.Done()
	select {
	case <-ss.Done():
		return // OnEnd asked for a reconcile
	default:
	}

	ctx := m.ctx
	pctx, cancel := context.WithTimeout(ctx, timeout)
	pctx, span := s.opts.Tracer.Start(pctx, tracing.SpanHealthCheck, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			tracing.Server.String(s.opts.Name),
			tracing.Endpoint.String(endpoint),
			tracing.HealthThreshold.Int(threshold),
		))
	start := time.Now()
	err := ss.Probe(pctx)
	cancel()
	took := time.Since(start)
	if ctx.Err() != nil {
		span.SetAttributes(tracing.Result.String("canceled"))
		span.End()
		return
	}
	s.mu.Lock()
	if ctx.Err() != nil || s.session != ss {
		// Dropped (and maybe replaced) while probing: this result is
		// about a session that is gone.
		s.mu.Unlock()
		span.SetAttributes(tracing.Result.String("canceled"))
		span.End()
		return
	}
	before := s.health
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("health check timed out after %s", timeout)
		}
		s.health.failures++
		s.health.lastErr = err.Error()
		s.log.WarnContext(pctx, "health check failed", "failures", s.health.failures, "threshold", threshold, "err", err)
		if s.health.failures >= threshold {
			s.health.down = fmt.Errorf("%d health checks in a row failed: %w", s.health.failures, err)
		}
	} else {
		if s.health.failures > 0 {
			s.log.Info("health check passed again")
		}
		s.health.failures, s.health.lastErr = 0, ""
	}
	// A probe that sets down counted a failure too: the count says it.
	changed := before.failures != s.health.failures
	if p := ss.Process(); p != nil && len(p.StderrTail) > 0 {
		if tail := p.StderrTail[len(p.StderrTail)-1]; tail != m.lastTail {
			m.lastTail, changed = tail, true
		}
	}
	down := s.health.down != nil
	failures := s.health.failures
	next, _, _, _ := m.settingsLocked()
	if !down {
		// Under s.mu: a stop that comes later stops this new schedule.
		m.timer.Reset(next)
	}
	s.mu.Unlock()
	if s.opts.Metrics != nil {
		s.opts.Metrics.ObserveHealthCheck(s.opts.Name, took)
	}
	span.SetAttributes(tracing.HealthFailures.Int(failures))
	if err != nil {
		span.SetAttributes(tracing.Result.String(tracing.ResultFailure))
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(tracing.Result.String(tracing.ResultSuccess))
	}
	span.End()
	if changed {
		s.opts.Notify()
	}
}
