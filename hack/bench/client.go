//go:build linux

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// agent is an MCP client as an agent would hold one: one session, shared by
// concurrent calls. Direct and gateway measurements use the same code, so
// the only difference between them is tether's hop.
type agent struct {
	cs *mcp.ClientSession
	hc *http.Client
}

// agentProtocol is the protocol version the bench's agents ask for
// (-protocol); "" is the go-sdk client's latest (2026-07-28: over HTTP the
// gateway then serves it statelessly, its tools/call on the fast path as a
// classic session's).
var agentProtocol string

func connectAgent(ctx context.Context, url string) (*agent, error) {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Enough idle connections for the highest concurrency measured, so a
	// run does not measure connection churn.
	t.MaxIdleConnsPerHost = 128
	hc := &http.Client{Transport: t}
	c := mcp.NewClient(&mcp.Implementation{Name: "tether-bench", Version: "0"}, nil)
	var opts *mcp.ClientSessionOptions
	if agentProtocol != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: agentProtocol}
	}
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1}, opts)
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", url, err)
	}
	return &agent{cs: cs, hc: hc}, nil
}

func (a *agent) close() {
	a.cs.Close()
	a.hc.CloseIdleConnections()
}

// argsFor returns the arguments the harness sends to a tool of the example
// server: echo gets a short text; slow takes 1 ms in one step, standing for
// a tool that does a little work.
func argsFor(tool string) json.RawMessage {
	if strings.HasSuffix(tool, "slow") {
		return json.RawMessage(`{"seconds":0.001,"steps":1}`)
	}
	return json.RawMessage(`{"text":"hello, gateway"}`)
}

// call calls tool and checks that the answer is a result, not a tool error.
func (a *agent) call(ctx context.Context, tool string) error {
	res, err := a.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: argsFor(tool)})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("tool error")
	}
	return nil
}

// loadResult is one load run: every call's latency, and the throughput.
type loadResult struct {
	lats    []time.Duration // sorted
	elapsed time.Duration
}

func (r loadResult) pct(p float64) time.Duration {
	if len(r.lats) == 0 {
		return 0
	}
	return r.lats[int(float64(len(r.lats)-1)*p/100)]
}

func (r loadResult) perSec() float64 { return float64(len(r.lats)) / r.elapsed.Seconds() }

// load runs conc goroutines calling tool back to back for dur.
func (a *agent) load(ctx context.Context, tool string, conc int, dur time.Duration) (loadResult, error) {
	var (
		mu    sync.Mutex
		lats  []time.Duration
		first error
		wg    sync.WaitGroup
		stop  atomic.Bool
	)
	start := time.Now()
	timer := time.AfterFunc(dur, func() { stop.Store(true) })
	defer timer.Stop()
	for range conc {
		wg.Go(func() {
			local := make([]time.Duration, 0, 4096)
			var err error
			for !stop.Load() {
				t0 := time.Now()
				if err = a.call(ctx, tool); err != nil {
					stop.Store(true)
					break
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			lats = append(lats, local...)
			if err != nil && first == nil {
				first = err
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if first != nil {
		return loadResult{}, first
	}
	slices.Sort(lats)
	return loadResult{lats: lats, elapsed: elapsed}, nil
}
