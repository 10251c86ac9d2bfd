package manifest

import "time"

// Debouncer waits for a burst of file events to settle before the tree is
// read again: editors, git and ConfigMap updates write in bursts, and one
// read after the burst sees its final state. Kick on every event; C fires
// once the events stayed quiet for Quiet, or MaxDelay after the burst's
// first event at the latest (0: no such bound), so a steady stream of
// events still gets read. Call Done after receiving from C. A Debouncer
// belongs to one goroutine.
type Debouncer struct {
	Quiet, MaxDelay time.Duration

	timer *time.Timer
	first time.Time
}

// C fires when the tree should be read; nil (never ready) while no burst is
// pending, so it can sit in a select.
func (d *Debouncer) C() <-chan time.Time {
	if d.timer == nil {
		return nil
	}
	return d.timer.C
}

// Kick notes an event.
func (d *Debouncer) Kick() {
	now := time.Now()
	if d.timer == nil {
		d.first = now
		d.timer = time.NewTimer(d.Quiet)
		return
	}
	d.timer.Reset(d.delay(now))
}

// delay is how long a burst that goes on at now waits for quiet: Quiet,
// cut short so that C fires no later than MaxDelay after the first event.
func (d *Debouncer) delay(now time.Time) time.Duration {
	if d.MaxDelay <= 0 {
		return d.Quiet
	}
	return max(min(d.Quiet, d.MaxDelay-now.Sub(d.first)), 0)
}

// Done ends the burst C fired for.
func (d *Debouncer) Done() { d.timer = nil }

// Stop drops a pending burst.
func (d *Debouncer) Stop() {
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
}
