package manifest

import (
	"testing"
	"time"
)

// TestDebouncerDelay: a burst waits Quiet after each event, but never
// longer than MaxDelay after its first one; MaxDelay 0 sets no bound.
func TestDebouncerDelay(t *testing.T) {
	const ms = time.Millisecond
	for _, tc := range []struct {
		name             string
		quiet, maxDelay  time.Duration
		sinceFirst, want time.Duration
	}{
		{"no bound", 50 * ms, 0, time.Hour, 50 * ms},
		{"negative bound is no bound", 50 * ms, -1, time.Hour, 50 * ms},
		{"far from the bound", 50 * ms, 500 * ms, 100 * ms, 50 * ms},
		{"the bound cuts the wait short", 50 * ms, 500 * ms, 480 * ms, 20 * ms},
		{"at the bound", 50 * ms, 500 * ms, 500 * ms, 0},
		{"past the bound", 50 * ms, 500 * ms, 600 * ms, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			d := &Debouncer{Quiet: tc.quiet, MaxDelay: tc.maxDelay, first: first}
			if got := d.delay(first.Add(tc.sinceFirst)); got != tc.want {
				t.Errorf("delay %v after the first event = %v, want %v", tc.sinceFirst, got, tc.want)
			}
		})
	}
}

// TestDebouncerLifecycle: C is nil until a Kick, fires after it, is nil
// again after Done; Stop drops a pending burst and is harmless without one.
func TestDebouncerLifecycle(t *testing.T) {
	d := &Debouncer{}
	d.Stop() // nothing pending: a no-op
	if d.C() != nil {
		t.Fatal("C is not nil before any event")
	}
	d.Kick()
	if d.first.IsZero() {
		t.Error("Kick did not note the burst's first event")
	}
	first := d.first
	d.Kick()
	if d.first != first {
		t.Error("a second event in the burst moved its first event")
	}
	c := d.C()
	if c == nil {
		t.Fatal("C is nil with a burst pending")
	}
	<-c // Quiet is 0: fires at once
	d.Done()
	if d.C() != nil {
		t.Error("C is not nil after Done")
	}

	d.Kick()
	d.Stop()
	if d.C() != nil {
		t.Error("C is not nil after Stop")
	}
}
