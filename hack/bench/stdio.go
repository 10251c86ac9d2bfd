//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// idleOne measures tether idle with one HTTP connection, gateway and
// metrics on: the smallest real deployment.
func idleOne(ctx context.Context, c *config) ([]Result, error) {
	be, err := startBackend(ctx, c.bins, "")
	if err != nil {
		return nil, err
	}
	defer be.kill()
	r, err := coldStart(ctx, c, "idle1", httpManifests(1, []*backend{be}), tetherOptions{gateway: true, metrics: true}, time.Minute, nil)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	pid := r.d.pid()
	// Let the start's garbage be collected before the window.
	time.Sleep(5 * time.Second)
	window := min(c.idle, 10*time.Second)
	cpu, err := cpuWindow(pid, window)
	if err != nil {
		return nil, err
	}
	rss, err := rssBytes(pid)
	if err != nil {
		return nil, err
	}
	out := []Result{
		{Metric: "start to 1 HTTP Connected", Value: millis(r.took), Unit: "ms"},
		Result{Metric: "tether RSS idle, 1 HTTP connection", Value: mb(rss), Unit: "MB"}.atMost(15),
		{Metric: fmt.Sprintf("tether idle CPU, 1 connection, over %v", window), Value: cpu * 100, Unit: "% core"},
	}
	if m, err := scrape(ctx, r.d.metrics, "go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_sys_bytes"); err == nil {
		out = append(out,
			Result{Metric: "tether goroutines, 1 connection", Value: m["go_goroutines"], Unit: "goroutines"},
			Result{Metric: "tether heap in use, 1 connection", Value: m["go_memstats_heap_inuse_bytes"] / (1 << 20), Unit: "MB"},
			Result{Metric: "tether memory from the OS (go_memstats_sys_bytes), 1 connection", Value: m["go_memstats_sys_bytes"] / (1 << 20), Unit: "MB"})
	}
	r.d.heapProfile(c.pprofDir, "idle1")
	return out, nil
}

// stdioCold starts tether on c.stdioN stdio manifests of the example server,
// c.runs times.
func stdioCold(ctx context.Context, c *config) ([]Result, error) {
	var takes, firsts, halves, rss, settled, children, writes []float64
	for run := range c.runs {
		var onStart func(*daemon)
		finish := func(*daemon) {}
		if run == c.runs-1 {
			onStart, finish = startProfile(ctx, c, fmt.Sprintf("stdio-%d", c.stdioN), 2*time.Second)
		}
		r, err := coldStart(ctx, c, "stdio", stdioManifests(c.stdioN, c.bins.example), tetherOptions{gateway: true, metrics: true}, 2*time.Minute, onStart)
		if err != nil {
			finish(nil)
			return nil, err
		}
		own, err := rssBytes(r.d.pid())
		if err != nil {
			r.stop()
			return nil, err
		}
		var kids int64
		for _, p := range r.paths {
			if st, ok := r.sw.get(p); ok && st.PID > 0 {
				if b, err := rssBytes(st.PID); err == nil {
					kids += b
				}
			}
		}
		later, _ := settleRSS(r.d, 2*time.Second)
		finish(r.d)
		r.stop()
		takes, rss, settled, children = append(takes, millis(r.took)), append(rss, mb(own)), append(settled, mb(later)), append(children, mb(kids))
		writes = append(writes, float64(r.writes))
		firsts, halves = append(firsts, millis(r.first)), append(halves, millis(r.half))
		fmt.Fprintf(os.Stderr, "   stdio n=%d run %d: %v, RSS %.1f MB (load %s)\n", c.stdioN, run+1, r.took.Round(time.Millisecond), mb(own), loadAvg())
	}
	out := coldFigures("stdio", c.stdioN, takes, firsts, halves, rss, writes)
	if c.stdioN == 100 {
		out[0] = out[0].atMost(1000)
	}
	return append(out,
		Result{Metric: fmt.Sprintf("stdio tether RSS 2 s after %d Connected (median)", c.stdioN), Value: median(settled), Unit: "MB", Samples: len(settled)},
		Result{Metric: fmt.Sprintf("stdio children's RSS, all %d together (median)", c.stdioN), Value: median(children), Unit: "MB", Samples: len(children)},
	), nil
}

// stdioLatency writes one stdio manifest at a time into a running tether
// and times until its status file shows Connected.
func stdioLatency(ctx context.Context, c *config) ([]Result, error) {
	r, err := coldStart(ctx, c, "stdio-latency", nil, tetherOptions{gateway: true, metrics: true}, time.Minute, nil)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	var lat []float64
	for i, m := range stdioManifests(c.samples, c.bins.example) {
		t0 := time.Now()
		p, err := m.write(r.dir)
		if err != nil {
			return nil, err
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		seen, err := r.sw.wait(wctx, []string{p}, isConnected)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("sample %d: %w\n%s", i, err, r.d.logTail(10))
		}
		lat = append(lat, millis(seen.Sub(t0)))
	}
	slices.Sort(lat)
	return []Result{
		{Metric: "write-to-Connected p50", Value: percentile(lat, 50), Unit: "ms", Samples: len(lat)},
		{Metric: "write-to-Connected p90", Value: percentile(lat, 90), Unit: "ms", Samples: len(lat)},
		{Metric: "write-to-Connected max", Value: lat[len(lat)-1], Unit: "ms", Samples: len(lat)},
	}, nil
}

// stdioBurst writes c.burst stdio manifests at once into a running tether
// and times until all are Connected.
func stdioBurst(ctx context.Context, c *config) ([]Result, error) {
	r, err := coldStart(ctx, c, "stdio-burst", nil, tetherOptions{gateway: true, metrics: true}, time.Minute, nil)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	t0 := time.Now()
	paths, err := writeAll(r.dir, stdioManifests(c.burst, c.bins.example))
	if err != nil {
		return nil, err
	}
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	seen, err := r.sw.wait(wctx, paths, isConnected)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, r.d.logTail(10))
	}
	return []Result{{Metric: fmt.Sprintf("%d manifests written to all Connected", c.burst), Value: millis(seen.Sub(t0)), Unit: "ms"}}, nil
}
