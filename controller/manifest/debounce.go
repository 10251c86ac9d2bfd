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
	// Keep waiting while events keep coming, up to MaxDelay.
	wait := d.Quiet
	if d.MaxDelay > 0 {
		if rest := d.MaxDelay - now.Sub(d.first); rest < wait {
			wait = max(rest, 0)
		}
	}
	d.timer.Reset(wait)
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
