//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
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

	var out []Result
	for _, w := range []struct {
		tool, label string
		concs       []int
	}{
		{"echo", "", c.concs},
		// A tool that works 1 ms, at the concurrencies of the targets only.
		{"slow", "1ms tool ", slices.DeleteFunc(slices.Clone(c.concs), func(n int) bool { return n != 1 && n != 16 })},
	} {
		for _, conc := range w.concs {
			rs, err := compareAt(ctx, c, r, be, direct, via, w.tool, w.label, conc)
			out = append(out, rs...)
			if err != nil {
				return out, err
			}
		}
	}
	if c.pprofDir != "" {
		// Profiles of the gateway alone under load, apart from the
		// measured runs: at concurrency 1 (latency) and 16 (throughput).
		for _, conc := range []int{1, 16} {
			wait := r.d.profile(c.pprofDir, fmt.Sprintf("gateway-conc%d", conc), 5*time.Second)
			if _, err := via.load(ctx, "gw_echo", conc, 5*time.Second); err != nil {
				wait()
				return out, err
			}
			wait()
		}
	}
	return out, nil
}

// compareAt runs direct and gateway loads of tool at one concurrency,
// c.rounds times each, alternating which goes first.
func compareAt(ctx context.Context, c *config, r *coldRun, be *backend, direct, via *agent, tool, label string, conc int) ([]Result, error) {
	pid := r.d.pid()
	var dP50, dP99, dRate, gP50, gP99, gRate, cpuPerCall, beCPU, agentCPU, gBeCPU, gAgentCPU []float64
	self, bePID := os.Getpid(), be.cmd.Process.Pid
	for round := range c.rounds {
		runDirect := func() error {
			a0, _ := cpuTime(self)
			b0, _ := cpuTime(bePID)
			lr, err := direct.load(ctx, tool, conc, c.loadDur)
			if err != nil {
				return fmt.Errorf("direct %s, concurrency %d: %w", tool, conc, err)
			}
			a1, _ := cpuTime(self)
			b1, _ := cpuTime(bePID)
			dP50, dP99, dRate = append(dP50, micros(lr.pct(50))), append(dP99, micros(lr.pct(99))), append(dRate, lr.perSec())
			beCPU = append(beCPU, micros(b1-b0)/float64(len(lr.lats)))
			agentCPU = append(agentCPU, micros(a1-a0)/float64(len(lr.lats)))
			return nil
		}
		runGateway := func() error {
			cpu0, _ := cpuTime(pid)
			a0, _ := cpuTime(self)
			b0, _ := cpuTime(bePID)
			lr, err := via.load(ctx, "gw_"+tool, conc, c.loadDur)
			if err != nil {
				return fmt.Errorf("gateway %s, concurrency %d: %w\n%s", tool, conc, err, r.d.logTail(10))
			}
			cpu1, _ := cpuTime(pid)
			a1, _ := cpuTime(self)
			b1, _ := cpuTime(bePID)
			gP50, gP99, gRate = append(gP50, micros(lr.pct(50))), append(gP99, micros(lr.pct(99))), append(gRate, lr.perSec())
			cpuPerCall = append(cpuPerCall, micros(cpu1-cpu0)/float64(len(lr.lats)))
			gBeCPU = append(gBeCPU, micros(b1-b0)/float64(len(lr.lats)))
			gAgentCPU = append(gAgentCPU, micros(a1-a0)/float64(len(lr.lats)))
			return nil
		}
		first, second := runDirect, runGateway
		if round%2 == 1 {
			first, second = runGateway, runDirect
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	d50, d99, dr := median(dP50), median(dP99), median(dRate)
	g50, g99, gr := median(gP50), median(gP99), median(gRate)
	fmt.Fprintf(os.Stderr, "   %sconc %d: direct p50 %.0f µs %.0f/s, gateway p50 %.0f µs %.0f/s (load %s)\n", label, conc, d50, dr, g50, gr, loadAvg())
	pre := fmt.Sprintf("%sconc %d ", label, conc)
	n := c.rounds
	ratio50 := Result{Metric: pre + "p50 gateway/direct", Value: g50 / d50, Unit: "x", Samples: n}
	ratioRate := Result{Metric: pre + "calls/s gateway/direct", Value: gr / dr, Unit: "x", Samples: n}
	if label == "" && (conc == 1 || conc == 16) {
		ratio50 = ratio50.atMost(1.25)
	}
	if label == "" && conc == 16 {
		ratioRate = ratioRate.atLeast(0.85)
	}
	return []Result{
		{Metric: pre + "direct p50", Value: d50, Unit: "µs", Samples: n},
		{Metric: pre + "gateway p50", Value: g50, Unit: "µs", Samples: n},
		ratio50,
		{Metric: pre + "gateway added p50", Value: g50 - d50, Unit: "µs", Samples: n},
		{Metric: pre + "direct p99", Value: d99, Unit: "µs", Samples: n},
		{Metric: pre + "gateway p99", Value: g99, Unit: "µs", Samples: n},
		{Metric: pre + "direct calls/s", Value: dr, Unit: "calls/s", Samples: n},
		{Metric: pre + "gateway calls/s", Value: gr, Unit: "calls/s", Samples: n},
		ratioRate,
		{Metric: pre + "tether CPU per gateway call", Value: median(cpuPerCall), Unit: "µs", Samples: n},
		// What the same call costs the two ends of a direct call: the
		// gateway hop is one more server end and one more client end.
		{Metric: pre + "backend CPU per direct call", Value: median(beCPU), Unit: "µs", Samples: n},
		{Metric: pre + "agent (harness) CPU per direct call", Value: median(agentCPU), Unit: "µs", Samples: n},
		// The same two through the gateway: a change here is work the
		// gateway's requests or answers cause at either end.
		{Metric: pre + "backend CPU per gateway call", Value: median(gBeCPU), Unit: "µs", Samples: n},
		{Metric: pre + "agent (harness) CPU per gateway call", Value: median(gAgentCPU), Unit: "µs", Samples: n},
	}, nil
}
