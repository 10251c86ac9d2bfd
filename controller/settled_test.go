package controller

import (
	"errors"
	"testing"
)

// A connection is settled once its first outcome is in: connected and
// exposed, or failed; not while its first attempt runs, and it stays so
// while later attempts run.
func TestSettledAfterTheFirstOutcome(t *testing.T) {
	h := newHarness(t)
	if h.r.ReachedOutcome("one") {
		t.Fatal("an unknown connection is settled")
	}
	h.conn.push(errors.New("refused"), newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", ""))
	h.reconcile("one")
	if h.r.ReachedOutcome("one") {
		t.Fatal("settled while its first attempt runs")
	}
	h.waitEnqueued("one")
	h.reconcile("one") // the failure is taken in: Backoff
	if !h.r.ReachedOutcome("one") {
		t.Fatal("not settled after its first attempt failed")
	}
	h.retryNow("one")
	h.reconcile("one") // the next attempt runs
	if !h.r.ReachedOutcome("one") {
		t.Fatal("no longer settled while a later attempt runs")
	}

	h.conn.push(newFakeSession("b"))
	h.apply("two.yaml", manifestYAML("two", ""))
	h.reconcile("two")
	h.waitEnqueued("two")
	if h.r.ReachedOutcome("two") {
		t.Fatal("settled before its outcome was taken in")
	}
	h.reconcile("two")
	if _, ok := h.exposer.get("two"); !ok || !h.r.ReachedOutcome("two") {
		t.Fatalf("connected: exposed %v, settled %v", ok, h.r.ReachedOutcome("two"))
	}
}
