package controller

import (
	"context"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// First outcomes: what a gateway client's first list waits for
// (docs/contract.md §5, "A complete first answer"). A connection has
// reached its first outcome when its phase says how its first attempt
// ended, or that none is due: Connected or Degraded (its tools are in the
// gateway, since expose runs before the phase is computed), Reconnecting
// (it failed), Idle (an OnDemand server with a saved catalog, served from
// it), AuthRequired, Refused, Suspended, Invalid. Pending and Connecting
// are not.

// isOutcome reports whether phase is a first outcome.
func isOutcome(p spec.Phase) bool {
	return p != spec.PhasePending && p != spec.PhaseConnecting
}

// noteOutcome records that rec reached its first outcome, once, and wakes
// whoever waits for first outcomes.
func (r *Reconciler) noteOutcome(rec *record, p spec.Phase) {
	if !isOutcome(p) || rec.outcome.Swap(true) {
		return
	}
	select {
	case r.outcomes <- struct{}{}:
	default:
	}
}

// ReachedOutcome reports whether name has reached its first outcome.
func (r *Reconciler) ReachedOutcome(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.conns[name]
	return rec != nil && rec.outcome.Load()
}

// reachedOutcome reports whether name has reached its first outcome, or is
// no longer wanted.
func (c *Controller) reachedOutcome(name string) bool {
	if c.reconciler.ReachedOutcome(name) {
		return true
	}
	_, exists := c.desired.Get(name)
	return !exists
}

// FirstOutcomes is closed once the source has synced and every connection
// of the desired state has reached its first outcome, or the connect
// timeout has passed since the sync (a first attempt is bounded by it), or
// Run has ended.
func (c *Controller) FirstOutcomes() <-chan struct{} { return c.firstOutcomes }

// watchFirstOutcomes closes FirstOutcomes when its time has come.
func (c *Controller) watchFirstOutcomes(ctx context.Context) {
	defer close(c.firstOutcomes)
	select {
	case <-c.synced:
	case <-ctx.Done():
		return
	}
	timeout := c.opts.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	w := outcomeWait{names: c.desired.Names, reached: c.reachedOutcome}
	for {
		if w.done() {
			c.log.Debug("every connection reached its first outcome")
			return
		}
		select {
		case <-c.reconciler.outcomes:
		case <-deadline.C:
			c.log.Info("not every connection reached its first outcome within the connect timeout; lists are answered with what is served")
			return
		case <-ctx.Done():
			return
		}
	}
}

// outcomeWait tells, at each wake, whether every declared name has reached
// its first outcome. An outcome, once reached, stays reached (a name gone
// counts as one), so a wake checks from the first name still pending on,
// and lists the names again only once the last listing has drained, for
// those declared since: at 1,000 connections, listing and sorting every
// name at each of a thousand wakes was a few percent of the start's CPU.
type outcomeWait struct {
	names   func() []string
	reached func(name string) bool
	pending []string // of the last listing, not yet seen at an outcome
	listed  bool     // pending is a listing taken during this call
}

// done reports whether the names of one listing have all reached their
// first outcome.
func (w *outcomeWait) done() bool {
	w.listed = false
	for {
		for len(w.pending) > 0 && w.reached(w.pending[0]) {
			w.pending = w.pending[1:]
		}
		if len(w.pending) > 0 {
			return false
		}
		if w.listed {
			return true
		}
		w.pending, w.listed = w.names(), true
	}
}
