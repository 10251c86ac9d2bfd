//go:build linux

package main

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// sandboxStart writes one stdio manifest of the example server at a time
// into a running tether, unconfined, then confined (docs/security.md) two
// ways, and times each until its status shows Connected: what the launcher
// (a second exec, the ELF library walk, the Landlock ruleset, a user and
// network namespace) adds to a server's start.
func sandboxStart(ctx context.Context, c *config) ([]Result, error) {
	r, err := coldStart(ctx, c, "sandbox", nil, tetherOptions{gateway: true, metrics: true}, time.Minute, nil)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	kinds := []struct{ label, extra string }{
		{"unconfined", ""},
		{"sandbox landlock fs+net (connect, best effort)", "    sandbox: {network: connect, connect: [\"443\"], bestEffort: true}\n"},
		// bestEffort: before Landlock ABI 9 no policy is enforced fully.
		{"sandbox landlock fs+netns none", "    sandbox: {network: none, bestEffort: true}\n"},
	}
	lat := make([][]float64, len(kinds))
	for i := range c.samples {
		for k, kind := range kinds {
			m := manifest{name: fmt.Sprintf("sb-%d-%04d", k, i), command: c.bins.example, stdioExtra: kind.extra}
			t0 := time.Now()
			p, err := m.write(r.dir)
			if err != nil {
				return nil, err
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			seen, err := r.sw.wait(wctx, []string{p}, isConnected)
			cancel()
			if err != nil {
				return nil, fmt.Errorf("%s sample %d: %w\n%s", kind.label, i, err, r.d.logTail(10))
			}
			lat[k] = append(lat[k], millis(seen.Sub(t0)))
		}
	}
	var out []Result
	for k, kind := range kinds {
		slices.Sort(lat[k])
		out = append(out,
			Result{Metric: "stdio write-to-Connected p50, " + kind.label, Value: percentile(lat[k], 50), Unit: "ms", Samples: len(lat[k])},
			Result{Metric: "stdio write-to-Connected p90, " + kind.label, Value: percentile(lat[k], 90), Unit: "ms", Samples: len(lat[k])})
	}
	return out, nil
}
