//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"
)

// onDemandLifecycle is what the harness adds under spec for an OnDemand
// server: an idle timeout short enough that a round (a call, then the idle
// stop) takes a second or two.
const onDemandLifecycle = "  lifecycle: {mode: OnDemand, idleTimeout: 1s}\n"

// rssSettle is how long the RSS figures wait once every server is Idle, or
// Connected, so that what starting them left behind is collected first.
const rssSettle = 3 * time.Second

// onDemand measures servers started on demand (spec.lifecycle OnDemand):
//
//   - the time from a tools/call to its answer through the gateway when the
//     server is stopped (Idle: the call starts it), against the same call to
//     an Always connection, connected all along; and a second call to the
//     OnDemand server while it runs;
//   - the memory of tether and its children with c.odN idle OnDemand stdio
//     servers against c.odN Always ones.
func onDemand(ctx context.Context, c *config) ([]Result, error) {
	out, err := onDemandCalls(ctx, c)
	if err != nil {
		return out, err
	}
	rs, err := onDemandRSS(ctx, c)
	return append(out, rs...), err
}

func onDemandCalls(ctx context.Context, c *config) ([]Result, error) {
	mans := []manifest{
		{name: "od", command: c.bins.example, extra: onDemandLifecycle},
		{name: "al", command: c.bins.example},
	}
	// A new OnDemand server is started once to learn its catalog, then
	// stopped: either phase will do to begin with.
	r, err := startUntil(ctx, c, "ondemand-calls", mans, tetherOptions{gateway: true}, time.Minute, nil,
		func(s statusState) bool { return isConnected(s) || isIdle(s) })
	if err != nil {
		return nil, err
	}
	defer r.stop()
	odPath, alPath := r.paths[0], r.paths[1]
	a, err := connectAgent(ctx, "http://"+r.d.gateway+"/mcp")
	if err != nil {
		return nil, err
	}
	defer a.close()
	// The Always connection's tool reaches the gateway a moment after its
	// status says Connected at the latest; this also warms the agent's
	// session.
	if _, _, err := probe(ctx, a, "al_echo", 10*time.Second); err != nil {
		return nil, err
	}

	timed := func(tool string) (float64, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		t0 := time.Now()
		if err := a.call(cctx, tool); err != nil {
			return 0, fmt.Errorf("calling %s: %w\n%s", tool, err, r.d.logTail(10))
		}
		return millis(time.Since(t0)), nil
	}
	var first, running, always []float64
	for i := range c.odRounds {
		al, _ := r.sw.get(alPath)
		if !isConnected(al) || al.PID <= 0 {
			return nil, fmt.Errorf("round %d: the Always connection is not Connected with a child: %+v", i, al)
		}
		// Stopped: the status says Idle and no child but the Always
		// connection's is left.
		if err := waitStopped(ctx, r, []string{odPath}, []int{al.PID}); err != nil {
			return nil, fmt.Errorf("round %d: %w", i, err)
		}
		for _, x := range []struct {
			tool string
			into *[]float64
		}{{"al_echo", &always}, {"od_echo", &first}, {"od_echo", &running}} {
			ms, err := timed(x.tool)
			if err != nil {
				return nil, fmt.Errorf("round %d: %w", i, err)
			}
			*x.into = append(*x.into, ms)
		}
		// The server runs now (for idleTimeout at least): see its status
		// say so, so that the Idle the next round waits for is the next one.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := r.sw.wait(wctx, []string{odPath}, func(s statusState) bool { return isConnected(s) && s.PID > 0 })
		cancel()
		if err != nil {
			return nil, fmt.Errorf("round %d: after the call: %w", i, err)
		}
	}
	fmt.Fprintf(os.Stderr, "   stopped OnDemand first call %.1f ms, running %.1f ms, Always %.1f ms (medians of %d; load %s)\n",
		median(slices.Clone(first)), median(slices.Clone(running)), median(slices.Clone(always)), len(first), loadAvg())
	var out []Result
	for _, x := range []struct {
		label string
		ms    []float64
	}{
		{"call to answer, OnDemand stdio server stopped (first call starts it)", first},
		{"call to answer, OnDemand stdio server running (second call)", running},
		{"call to answer, Always stdio server connected", always},
	} {
		sorted := slices.Sorted(slices.Values(x.ms))
		n := len(sorted)
		out = append(out,
			Result{Metric: x.label + " (median)", Value: median(slices.Clone(sorted)), Unit: "ms", Samples: n},
			Result{Metric: x.label + " (min)", Value: sorted[0], Unit: "ms", Samples: n},
			Result{Metric: x.label + " (max)", Value: sorted[n-1], Unit: "ms", Samples: n})
	}
	return out, nil
}

// waitStopped waits until every status file in paths shows Idle and tether
// has no child left but those in keep, both at the same time.
func waitStopped(ctx context.Context, r *coldRun, paths []string, keep []int) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var left []int
	for {
		if _, err := r.sw.wait(ctx, paths, isIdle); err != nil {
			return fmt.Errorf("waiting for Idle: %w\n%s", err, r.d.logTail(10))
		}
		pids, err := descendants(r.d.pid())
		if err != nil {
			return err
		}
		left = slices.DeleteFunc(pids, func(p int) bool { return slices.Contains(keep, p) })
		if len(left) == 0 && !slices.ContainsFunc(paths, func(p string) bool { st, _ := r.sw.get(p); return !isIdle(st) }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("status Idle, but tether's children %v still run\n%s", left, r.d.logTail(10))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// onDemandRSS starts tether on c.odN stdio servers, OnDemand then Always
// (the order alternates between runs), waits until all are Idle with no
// child left, resp. all Connected, then rssSettle, and sums the resident
// memory of tether and all its descendants.
func onDemandRSS(ctx context.Context, c *config) ([]Result, error) {
	type figures struct{ total, own, children, kids, took []float64 }
	var od, al figures
	for run := range c.runs {
		for k := range 2 {
			onDemand := (run+k)%2 == 0
			mans := stdioManifests(c.odN, c.bins.example)
			f, label := &al, "Always"
			until := isConnected
			if onDemand {
				f, label, until = &od, "OnDemand", isIdle
				for i := range mans {
					mans[i].extra = onDemandLifecycle
				}
			}
			r, err := startUntil(ctx, c, "ondemand-rss", mans, tetherOptions{gateway: true}, 2*time.Minute, nil, until)
			if err != nil {
				return nil, fmt.Errorf("%d %s: %w", c.odN, label, err)
			}
			if onDemand {
				err = waitStopped(ctx, r, r.paths, nil)
			}
			if err == nil {
				time.Sleep(rssSettle)
				err = r.d.alive()
			}
			var own, children int64
			var kids int
			if err == nil {
				own, children, kids, err = treeRSS(r.d.pid())
			}
			r.stop()
			if err != nil {
				return nil, fmt.Errorf("%d %s: %w", c.odN, label, err)
			}
			f.total, f.own, f.children = append(f.total, mb(own+children)), append(f.own, mb(own)), append(f.children, mb(children))
			f.kids, f.took = append(f.kids, float64(kids)), append(f.took, millis(r.took))
			fmt.Fprintf(os.Stderr, "   %d %s run %d: tether %.1f MB + %d children %.1f MB = %.1f MB (load %s)\n",
				c.odN, label, run+1, mb(own), kids, mb(children), mb(own+children), loadAvg())
		}
	}
	var out []Result
	for _, x := range []struct {
		label, state string
		f            *figures
	}{{"OnDemand", "Idle", &od}, {"Always", "Connected", &al}} {
		pre := fmt.Sprintf("%d %s stdio servers, all %s: ", c.odN, x.label, x.state)
		n := len(x.f.total)
		out = append(out,
			Result{Metric: pre + "tether + children RSS (median)", Value: median(x.f.total), Unit: "MB", Samples: n},
			Result{Metric: pre + "tether RSS (median)", Value: median(x.f.own), Unit: "MB", Samples: n},
			Result{Metric: pre + "children's RSS (median)", Value: median(x.f.children), Unit: "MB", Samples: n},
			Result{Metric: pre + "children running (median)", Value: median(x.f.kids), Unit: "processes", Samples: n},
			Result{Metric: pre + "start to all " + x.state + " (median)" + map[bool]string{true: ", idleTimeout 1 s included"}[x.label == "OnDemand"], Value: median(x.f.took), Unit: "ms", Samples: n})
	}
	return out, nil
}
