//go:build linux

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// idleAndEdits measures a tether that has just brought n connections up:
// CPU over c.idle with the default health checks, RSS after it, then the
// latency from a manifest edit to its status file showing the new spec hash.
func idleAndEdits(ctx context.Context, c *config, r *coldRun, mans []manifest, n int) ([]Result, error) {
	pid := r.d.pid()
	waitProf := r.d.profile(c.pprofDir, fmt.Sprintf("http-%d-idle", n), c.idle)
	cpu, err := cpuWindow(pid, c.idle)
	waitProf()
	if err != nil {
		return nil, err
	}
	if err := r.d.alive(); err != nil {
		return nil, err
	}
	rss, err := rssBytes(pid)
	if err != nil {
		return nil, err
	}
	out := []Result{
		Result{Metric: fmt.Sprintf("http idle CPU at %d connections over %v", n, c.idle), Value: cpu * 100, Unit: "% core"}.atMost(1),
		Result{Metric: fmt.Sprintf("http tether RSS after idle at %d", n), Value: mb(rss), Unit: "MB"}.atMost(100),
		{Metric: fmt.Sprintf("http tether open fds at %d", n), Value: float64(openFDs(pid)), Unit: "fds"},
		{Metric: fmt.Sprintf("http tether threads at %d", n), Value: float64(threads(pid)), Unit: "threads"},
	}
	if m, err := scrape(ctx, r.d.metrics, "go_goroutines", "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes"); err == nil {
		out = append(out,
			Result{Metric: fmt.Sprintf("http tether goroutines at %d", n), Value: m["go_goroutines"], Unit: "goroutines"},
			Result{Metric: fmt.Sprintf("http tether heap in use at %d", n), Value: m["go_memstats_heap_inuse_bytes"] / (1 << 20), Unit: "MB"},
			Result{Metric: fmt.Sprintf("http tether stacks in use at %d", n), Value: m["go_memstats_stack_inuse_bytes"] / (1 << 20), Unit: "MB"})
	}
	if c.edits <= 0 {
		return out, nil
	}
	waitProf = r.d.profile(c.pprofDir, fmt.Sprintf("http-%d-edits", n), 10*time.Second)
	edits, err := editLatency(ctx, c, r, mans)
	waitProf()
	return append(out, edits...), err
}

// editKind is one way of changing a manifest.
type editKind struct {
	name string
	// extra is what the edited manifest adds under spec (see manifest.extra).
	extra func(i int) string
	// reconnect: the change needs a new session, so also time until the
	// connection is Connected again on the new spec.
	reconnect bool
}

var editKinds = []editKind{
	{
		name:  "in place (tools.deny)",
		extra: func(i int) string { return fmt.Sprintf("  tools:\n    deny: [\"bench-edit-%d\"]\n", i) },
	},
	{
		name: "reconnect (http.headers)",
		extra: func(i int) string {
			return fmt.Sprintf("    headers:\n      - name: X-Bench-Edit\n        value: \"%d\"\n", i)
		},
		reconnect: true,
	},
}

// editLatency edits c.edits manifests of each kind, one after another, each
// a different connection, and times from the write until the status file
// shows the edited spec's hash (debounce, re-list, reconcile and status
// write included).
func editLatency(ctx context.Context, c *config, r *coldRun, mans []manifest) ([]Result, error) {
	var out []Result
	for k, kind := range editKinds {
		var toHash, toConnected []float64
		for i := range c.edits {
			// A stride coprime with the count visits distinct connections
			// spread over the tree.
			j := (k*c.edits + i) * 37 % len(mans)
			m := mans[j]
			m.extra = kind.extra(i)
			want, err := m.hash()
			if err != nil {
				return out, err
			}
			path := statusPath(m.path(r.dir))
			t0 := time.Now()
			if _, err := m.write(r.dir); err != nil {
				return out, err
			}
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			seen, err := r.sw.wait(wctx, []string{path}, func(st statusState) bool { return st.Hash == want })
			if err == nil && kind.reconnect {
				var up time.Time
				up, err = r.sw.wait(wctx, []string{path}, func(st statusState) bool { return st.Hash == want && isConnected(st) })
				toConnected = append(toConnected, millis(up.Sub(t0)))
			}
			cancel()
			if err != nil {
				return out, fmt.Errorf("edit %d (%s) of %s: %w\n%s", i, kind.name, m.name, err, r.d.logTail(10))
			}
			toHash = append(toHash, millis(seen.Sub(t0)))
		}
		slices.Sort(toHash)
		out = append(out,
			Result{Metric: "edit " + kind.name + " to new hash p50", Value: percentile(toHash, 50), Unit: "ms", Samples: len(toHash)},
			Result{Metric: "edit " + kind.name + " to new hash p99", Value: percentile(toHash, 99), Unit: "ms", Samples: len(toHash)}.atMost(300),
			Result{Metric: "edit " + kind.name + " to new hash max", Value: toHash[len(toHash)-1], Unit: "ms", Samples: len(toHash)},
		)
		if kind.reconnect {
			slices.Sort(toConnected)
			out = append(out,
				Result{Metric: "edit " + kind.name + " to Connected again p50", Value: percentile(toConnected, 50), Unit: "ms", Samples: len(toConnected)},
				Result{Metric: "edit " + kind.name + " to Connected again p99", Value: percentile(toConnected, 99), Unit: "ms", Samples: len(toConnected)},
			)
		}
	}
	return out, nil
}

// scrape reads the named unlabelled series from tether's /metrics.
func scrape(ctx context.Context, addr string, names ...string) (map[string]float64, error) {
	if addr == "" {
		return nil, fmt.Errorf("metrics are off")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(names, name) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(val), 64); err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}
