package main

import (
	"context"
	"fmt"
	"os"
	"time"
)

// gatewayOverhead calls the example server's echo tool directly and through
// tether's gateway, with the same client code, at each concurrency. Direct
// and gateway runs alternate, c.rounds of each, and the medians are
// compared, so that drift in the machine's load hits both sides alike.
func gatewayOverhead(ctx context.Context, c *config) ([]Result, error) {
	be, err := startBackend(ctx, c.bins, "")
	if err != nil {
		return nil, err
	}
	defer be.kill()
	r, err := coldStart(ctx, c, "gateway", []manifest{{name: "gw", url: be.url()}}, tetherOptions{gateway: true, metrics: true}, time.Minute, nil)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	direct, err := connectAgent(ctx, be.url())
	if err != nil {
		return nil, err
	}
	defer direct.close()
	via, err := connectAgent(ctx, "http://"+r.d.gateway+"/mcp")
	if err != nil {
		return nil, err
	}
	defer via.close()
	// The tool reaches the gateway a moment after the status says Connected
	// at the latest; then warm both paths (connections, lazily built state).
	if _, _, err := probe(ctx, via, "gw_echo", 10*time.Second); err != nil {
		return nil, err
	}
	for range 200 {
		if err := direct.call(ctx, "echo"); err != nil {
			return nil, err
		}
		if err := via.call(ctx, "gw_echo"); err != nil {
			return nil, err
		}
	}

	pid := r.d.pid()
	var out []Result
	for _, conc := range c.concs {
		var dP50, dP99, dRate, gP50, gP99, gRate, cpuPerCall []float64
		for round := range c.rounds {
			runDirect := func() error {
				lr, err := direct.load(ctx, "echo", conc, c.loadDur)
				if err != nil {
					return fmt.Errorf("direct, concurrency %d: %w", conc, err)
				}
				dP50, dP99, dRate = append(dP50, micros(lr.pct(50))), append(dP99, micros(lr.pct(99))), append(dRate, lr.perSec())
				return nil
			}
			runGateway := func() error {
				cpu0, _ := cpuTime(pid)
				lr, err := via.load(ctx, "gw_echo", conc, c.loadDur)
				if err != nil {
					return fmt.Errorf("gateway, concurrency %d: %w\n%s", conc, err, r.d.logTail(10))
				}
				cpu1, _ := cpuTime(pid)
				gP50, gP99, gRate = append(gP50, micros(lr.pct(50))), append(gP99, micros(lr.pct(99))), append(gRate, lr.perSec())
				cpuPerCall = append(cpuPerCall, micros(cpu1-cpu0)/float64(len(lr.lats)))
				return nil
			}
			first, second := runDirect, runGateway
			if round%2 == 1 {
				first, second = runGateway, runDirect
			}
			if err := first(); err != nil {
				return out, err
			}
			if err := second(); err != nil {
				return out, err
			}
		}
		d50, d99, dr := median(dP50), median(dP99), median(dRate)
		g50, g99, gr := median(gP50), median(gP99), median(gRate)
		fmt.Fprintf(os.Stderr, "   conc %d: direct p50 %.0f µs %.0f/s, gateway p50 %.0f µs %.0f/s (load %s)\n", conc, d50, dr, g50, gr, loadAvg())
		pre := fmt.Sprintf("conc %d ", conc)
		n := c.rounds
		ratio50 := Result{Metric: pre + "p50 gateway/direct", Value: g50 / d50, Unit: "x", Samples: n}
		ratioRate := Result{Metric: pre + "calls/s gateway/direct", Value: gr / dr, Unit: "x", Samples: n}
		if conc == 1 || conc == 16 {
			ratio50 = ratio50.atMost(1.25)
		}
		if conc == 16 {
			ratioRate = ratioRate.atLeast(0.85)
		}
		out = append(out,
			Result{Metric: pre + "direct p50", Value: d50, Unit: "µs", Samples: n},
			Result{Metric: pre + "gateway p50", Value: g50, Unit: "µs", Samples: n},
			ratio50,
			Result{Metric: pre + "gateway added p50", Value: g50 - d50, Unit: "µs", Samples: n},
			Result{Metric: pre + "direct p99", Value: d99, Unit: "µs", Samples: n},
			Result{Metric: pre + "gateway p99", Value: g99, Unit: "µs", Samples: n},
			Result{Metric: pre + "direct calls/s", Value: dr, Unit: "calls/s", Samples: n},
			Result{Metric: pre + "gateway calls/s", Value: gr, Unit: "calls/s", Samples: n},
			ratioRate,
			Result{Metric: pre + "tether CPU per gateway call", Value: median(cpuPerCall), Unit: "µs", Samples: n},
		)
	}
	if c.pprofDir != "" {
		// A profile of the gateway alone under load, apart from the
		// measured runs.
		wait := r.d.profile(c.pprofDir, "gateway-conc16", 5*time.Second)
		if _, err := via.load(ctx, "gw_echo", 16, 5*time.Second); err != nil {
			wait()
			return out, err
		}
		wait()
	}
	return out, nil
}
