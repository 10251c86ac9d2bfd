//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// stdioAgent is an MCP client on a `tether run --stdio` of its own.
type stdioAgent struct {
	cs  *mcp.ClientSession
	cmd *exec.Cmd
}

func startStdioAgent(ctx context.Context, c *config, dir string) (*stdioAgent, error) {
	args := append([]string{"run", "--stdio", "--dir", dir, "--metrics-addr", ""}, c.tetherFlags...)
	cmd := exec.Command(c.bins.tether, args...)
	cmd.Env = append(os.Environ(), c.tetherEnv...)
	cl := mcp.NewClient(&mcp.Implementation{Name: "tether-bench", Version: "0"}, nil)
	cs, err := cl.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return nil, fmt.Errorf("tether run --stdio on %s: %w", dir, err)
	}
	return &stdioAgent{cs: cs, cmd: cmd}, nil
}

func (a *stdioAgent) call(ctx context.Context) error {
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: "b_echo", Arguments: argsFor("echo")})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("tool error")
	}
	return nil
}

// waitCall calls until a call succeeds (the connection is up), within d.
func (a *stdioAgent) waitCall(ctx context.Context, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := a.call(ctx)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// bridgeOverhead measures what a bridge (a second `tether run --stdio` on an
// owned directory) adds to a call against the owner's own stdio client, on
// one example server, calls one at a time and interleaved so that both see
// the same load; then the takeover: from the owner's exit (its client
// closed stdin while the bridge was attached) to the bridge's first call
// answered, c.runs times.
func bridgeOverhead(ctx context.Context, c *config) ([]Result, error) {
	var direct, bridged, takeovers []float64
	n := max(c.samples*40, 200)
	for run := range c.runs {
		dir, err := c.tempTree("bridge")
		if err != nil {
			return nil, err
		}
		if _, err := writeAll(dir, []manifest{{name: "b", command: c.bins.example}}); err != nil {
			return nil, err
		}
		ownerAgent, err := startStdioAgent(ctx, c, dir)
		if err != nil {
			return nil, err
		}
		if err := ownerAgent.waitCall(ctx, time.Minute); err != nil {
			ownerAgent.cs.Close()
			return nil, fmt.Errorf("the owner's first call: %w", err)
		}
		bridge, err := startStdioAgent(ctx, c, dir)
		if err != nil {
			ownerAgent.cs.Close()
			return nil, err
		}
		if run == 0 {
			for i := range n {
				for j, a := range []*stdioAgent{ownerAgent, bridge} {
					start := time.Now()
					if err := a.call(ctx); err != nil {
						return nil, fmt.Errorf("call %d: %w", i, err)
					}
					if j == 0 {
						direct = append(direct, micros(time.Since(start)))
					} else {
						bridged = append(bridged, micros(time.Since(start)))
					}
				}
			}
		}
		// Takeover: the owner's client leaves; the bridge's next call is
		// held until the bridge that took over serves it.
		ownerAgent.cs.Close()
		exited := time.Now()
		if err := bridge.call(ctx); err != nil {
			bridge.cs.Close()
			return nil, fmt.Errorf("the first call after the takeover: %w", err)
		}
		takeovers = append(takeovers, millis(time.Since(exited)))
		bridge.cs.Close()
	}
	slices.Sort(direct)
	slices.Sort(bridged)
	out := []Result{
		{Metric: "call p50, owner's own stdio client", Value: percentile(direct, 50), Unit: "µs", Samples: len(direct)},
		{Metric: "call p50, through a bridge (tether run --stdio on an owned directory)", Value: percentile(bridged, 50), Unit: "µs", Samples: len(bridged)},
		{Metric: "call p99, owner's own stdio client", Value: percentile(direct, 99), Unit: "µs", Samples: len(direct)},
		{Metric: "call p99, through a bridge", Value: percentile(bridged, 99), Unit: "µs", Samples: len(bridged)},
		Result{Metric: "bridge adds per call, p50", Value: percentile(bridged, 50) - percentile(direct, 50), Unit: "µs", Samples: len(bridged)}.atMost(500),
		Result{Metric: "takeover: owner exited to the bridge's first call answered, median", Value: median(takeovers), Unit: "ms", Samples: len(takeovers)}.atMost(1000),
	}
	return out, nil
}
