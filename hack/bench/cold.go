//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// coldRun is a tether started on a tree that already held its manifests,
// measured until every status file showed Connected (or what startUntil
// waited for).
type coldRun struct {
	d      *daemon
	sw     *statusWatch
	dir    string
	paths  []string // status files, in manifest order
	took   time.Duration
	writes int // status changes seen until all were Connected
	// first and half: when the first, and half, of the connections were
	// seen Connected (a start that connects everything at the end shows
	// first ≈ took).
	first, half time.Duration
}

func (r *coldRun) stop() {
	if r.d != nil {
		r.d.stop()
	}
	if r.sw != nil {
		r.sw.Close()
	}
}

// coldStart writes mans into a fresh tree, starts tether on it and waits until
// every status file shows Connected. The clock starts just before tether is
// started and stops when the last status file was seen Connected.
//
// onStart, when not nil, is called right after tether started.
func coldStart(ctx context.Context, c *config, name string, mans []manifest, o tetherOptions, timeout time.Duration, onStart func(*daemon)) (*coldRun, error) {
	return startUntil(ctx, c, name, mans, o, timeout, onStart, isConnected)
}

// startUntil is coldStart waiting for until to hold for every status file
// instead of Connected (OnDemand servers settle Idle).
func startUntil(ctx context.Context, c *config, name string, mans []manifest, o tetherOptions, timeout time.Duration, onStart func(*daemon), until func(statusState) bool) (*coldRun, error) {
	dir, err := c.tempTree(name)
	if err != nil {
		return nil, err
	}
	r := &coldRun{dir: dir}
	if r.paths, err = writeAll(dir, mans); err != nil {
		r.stop()
		return nil, err
	}
	if r.sw, err = newStatusWatch(dir); err != nil {
		r.stop()
		return nil, err
	}
	t0 := time.Now()
	if r.d, err = startTether(c, dir, o); err != nil {
		r.stop()
		return nil, err
	}
	if onStart != nil {
		onStart(r.d)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last, err := r.sw.wait(wctx, r.paths, until)
	if err != nil {
		err = fmt.Errorf("%w\n%s", err, r.d.logTail(10))
		r.stop()
		return nil, err
	}
	r.took = last.Sub(t0)
	r.writes = r.sw.changesSeen()
	if len(r.paths) > 0 {
		seen := make([]time.Duration, 0, len(r.paths))
		for _, p := range r.paths {
			st, _ := r.sw.get(p)
			seen = append(seen, st.Seen.Sub(t0))
		}
		slices.Sort(seen)
		r.first, r.half = seen[0], seen[(len(seen)-1)/2]
	}
	return r, nil
}

// settleRSS gives tether's GC a moment after a burst, then reads its RSS.
func settleRSS(d *daemon, wait time.Duration) (int64, error) {
	time.Sleep(wait)
	return rssBytes(d.pid())
}

// coldFigures turns the runs of one size into results: median, min and max
// of the time to all Connected, median RSS.
func coldFigures(label string, n int, takes, firsts, halves, rss, writes []float64) []Result {
	if len(takes) == 0 {
		return nil
	}
	sorted := slices.Clone(takes)
	slices.Sort(sorted)
	return []Result{
		{Metric: fmt.Sprintf("%s start to all %d Connected (median)", label, n), Value: median(slices.Clone(takes)), Unit: "ms", Samples: len(takes)},
		{Metric: fmt.Sprintf("%s start to all %d Connected (min)", label, n), Value: sorted[0], Unit: "ms", Samples: len(takes)},
		{Metric: fmt.Sprintf("%s start to all %d Connected (max)", label, n), Value: sorted[len(sorted)-1], Unit: "ms", Samples: len(takes)},
		{Metric: fmt.Sprintf("%s start to first of %d Connected (median)", label, n), Value: median(slices.Clone(firsts)), Unit: "ms", Samples: len(firsts)},
		{Metric: fmt.Sprintf("%s start to half of %d Connected (median)", label, n), Value: median(slices.Clone(halves)), Unit: "ms", Samples: len(halves)},
		{Metric: fmt.Sprintf("%s tether RSS at %d Connected (median)", label, n), Value: median(slices.Clone(rss)), Unit: "MB", Samples: len(rss)},
		{Metric: fmt.Sprintf("%s status changes seen per connection until all Connected (median)", label), Value: median(slices.Clone(writes)) / float64(n), Unit: "changes", Samples: len(writes)},
	}
}

// httpCold starts tether on n streamable HTTP manifests served by example
// server processes (c.perProc connections each), for each size, c.runs
// times. On the last run of the largest size it goes on to measure the idle
// process and edit-to-status latency at that scale.
func httpCold(ctx context.Context, c *config) ([]Result, error) {
	var out []Result
	largest := slices.Max(c.sizes)
	for _, n := range c.sizes {
		var takes, firsts, halves, rss, writes, cpus []float64
		var atScale []Result // idle and edits, after the cold-start figures
		for run := range c.runs {
			final := run == c.runs-1 && n == largest
			rs, cr, r, err := httpColdOnce(ctx, c, n, final)
			atScale = append(atScale, rs...)
			if err != nil {
				return append(out, atScale...), err
			}
			takes, rss, writes = append(takes, millis(cr.took)), append(rss, mb(r)), append(writes, float64(cr.writes))
			firsts, halves = append(firsts, millis(cr.first)), append(halves, millis(cr.half))
			cpus = append(cpus, millis(cr.cpu))
			fmt.Fprintf(os.Stderr, "   http n=%d run %d: %v (first %v, half %v), tether CPU %v, RSS %.1f MB (load %s)\n", n, run+1,
				cr.took.Round(time.Millisecond), cr.first.Round(time.Millisecond), cr.half.Round(time.Millisecond),
				cr.cpu.Round(time.Millisecond), mb(r), loadAvg())
		}
		figs := coldFigures("http", n, takes, firsts, halves, rss, writes)
		if n == 1000 {
			figs[0] = figs[0].atMost(2000)
			figs[5] = figs[5].atMost(100)
		}
		// CPU time is what the machine's other load changes least: the
		// figure to compare across commits when the wall time is noisy.
		figs = append(figs, Result{Metric: fmt.Sprintf("http tether CPU from start to all %d Connected (median)", n),
			Value: median(cpus), Unit: "ms", Samples: len(cpus)})
		out = append(append(out, figs...), atScale...)
	}
	return out, nil
}

// coldOutcome is what one cold start showed.
type coldOutcome struct {
	took, first, half time.Duration
	cpu               time.Duration // tether's user+system CPU until all Connected
	writes            int
}

func httpColdOnce(ctx context.Context, c *config, n int, final bool) (res []Result, out coldOutcome, rss int64, err error) {
	backends, err := startBackends(ctx, c.bins, (n+c.perProc-1)/c.perProc)
	if err != nil {
		return nil, out, 0, err
	}
	defer killAll(backends)
	mans := httpManifests(n, backends)
	// The defaults of a real run: gateway and metrics on.
	o := tetherOptions{gateway: true, metrics: true}
	var onStart func(*daemon)
	finish := func(*daemon) {}
	if final {
		onStart, finish = startProfile(ctx, c, fmt.Sprintf("http-%d", n), 3*time.Second)
	}
	r, err := coldStart(ctx, c, fmt.Sprintf("http-%d", n), mans, o, 2*time.Minute, onStart)
	if err != nil {
		finish(nil)
		return nil, out, 0, err
	}
	defer r.stop()
	cpu, err := cpuTime(r.d.pid())
	if err != nil {
		finish(r.d)
		return nil, out, 0, err
	}
	finish(r.d)
	out = coldOutcome{took: r.took, first: r.first, half: r.half, cpu: cpu, writes: r.writes}
	if rss, err = rssBytes(r.d.pid()); err != nil {
		return nil, out, 0, err
	}
	if !final {
		return nil, out, rss, nil
	}
	res, err = idleAndEdits(ctx, c, r, mans, n)
	return res, out, rss, err
}

// startProfile returns an onStart hook for coldStart that, when profiling
// is on, records a CPU profile of tether's first seconds, and a func that
// waits for it and then saves a heap profile.
func startProfile(ctx context.Context, c *config, name string, dur time.Duration) (onStart func(*daemon), finish func(*daemon)) {
	if c.pprofDir == "" {
		return nil, func(*daemon) {}
	}
	done := make(chan struct{})
	started := false
	onStart = func(d *daemon) {
		started = true
		go func() {
			defer close(done)
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := waitTCP(wctx, d.pprof); err != nil {
				fmt.Fprintln(os.Stderr, "pprof:", err)
				return
			}
			d.profile(c.pprofDir, name+"-start", dur)()
		}()
	}
	return onStart, func(d *daemon) {
		if started {
			<-done // a stopped tether ends the profile request early
		}
		if d != nil {
			d.heapProfile(c.pprofDir, name+"-connected")
		}
	}
}
