//go:build linux

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"syscall"
	"time"
)

// recovery kills what a connection talks to and times until a call through
// tether's gateway succeeds again:
//
//   - an HTTP backend, SIGKILLed and restarted on the same address 1 s
//     later; the clock starts when the new one accepts connections and
//     stops at the first call that succeeds. With an idle agent the first
//     call comes after the backend is back (then, if it failed, one every
//     millisecond); with a busy agent calls keep coming while it is down
//     (which is what tells tether early, and what drives its backoff).
//   - a stdio child, SIGKILLed; tether starts a new one. The server can be
//     started again at once, so the clock starts at the kill: the child's
//     death being noticed is part of the figure.
//
// The agent calls as soon as the backend is back and never waits for a
// status file: a call for a connection that waits out its backoff starts an
// attempt at once (reconnect on use), and that is what these rows show.
func recovery(ctx context.Context, c *config) ([]Result, error) {
	var out []Result
	for _, busy := range []bool{false, true} {
		rs, err := recoverHTTP(ctx, c, busy)
		out = append(out, rs...)
		if err != nil {
			return out, err
		}
	}
	rs, err := recoverStdio(ctx, c)
	return append(out, rs...), err
}

// recoveryTarget is the goal for the time from a backend back (a stdio
// child killed) to the first successful call through the gateway, with
// reconnect on use.
const recoveryTarget = 150 // ms

// probe calls tool through the agent until a call succeeds, a call every
// millisecond, and returns when that was and how many calls failed.
func probe(ctx context.Context, a *agent, tool string, timeout time.Duration) (time.Time, int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	failed := 0
	for {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		err := a.call(cctx, tool)
		ccancel()
		if err == nil {
			return time.Now(), failed, nil
		}
		failed++
		select {
		case <-ctx.Done():
			return time.Time{}, failed, fmt.Errorf("no successful call of %s within %v; last error: %w", tool, timeout, err)
		case <-time.After(time.Millisecond):
		}
	}
}

func recoverHTTP(ctx context.Context, c *config, busy bool) ([]Result, error) {
	be, err := startBackend(ctx, c.bins, "")
	if err != nil {
		return nil, err
	}
	defer func() { be.kill() }()
	m := manifest{name: "rec", url: be.url()}
	r, err := coldStart(ctx, c, "recovery-http", []manifest{m}, tetherOptions{gateway: true}, time.Minute, nil)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	a, err := connectAgent(ctx, "http://"+r.d.gateway+"/mcp")
	if err != nil {
		return nil, err
	}
	defer a.close()
	if _, _, err := probe(ctx, a, "rec_echo", 10*time.Second); err != nil {
		return nil, err
	}
	label := "idle agent"
	if busy {
		label = "busy agent"
	}
	var took []float64
	var failedCalls, firstFailed int
	var firstErr error // of the idle agent's first call after the backend is back
	for i := range c.recovers {
		be.kill()
		// The busy agent calls all along, from another goroutine; its first
		// success after the restart is the one that counts.
		type probed struct {
			at     time.Time
			failed int
			err    error
		}
		var busyDone chan probed
		downCtx, stopBusy := context.WithCancel(ctx)
		if busy {
			busyDone = make(chan probed, 1)
			go func() {
				at, failed, err := probe(downCtx, a, "rec_echo", 30*time.Second)
				busyDone <- probed{at, failed, err}
			}()
		}
		time.Sleep(time.Second) // the outage being simulated
		be, err = startBackend(ctx, c.bins, be.addr)
		if err != nil {
			stopBusy()
			if busy {
				<-busyDone
			}
			return nil, fmt.Errorf("restarting the backend: %w", err)
		}
		back := be.ready
		var p probed
		if busy {
			p = <-busyDone
		} else {
			// The agent's first call after the backend is back; when it
			// fails, the agent goes on calling until one succeeds.
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			err := a.call(cctx, "rec_echo")
			ccancel()
			p.at = time.Now()
			if err != nil {
				firstFailed++
				if firstErr == nil {
					firstErr = err
				}
				p.at, p.failed, p.err = probe(ctx, a, "rec_echo", 30*time.Second)
				p.failed++
			}
		}
		stopBusy()
		if p.err != nil {
			return nil, fmt.Errorf("cycle %d: %w\n%s", i, p.err, r.d.logTail(10))
		}
		if p.at.Before(back) {
			// A success while the backend was down would mean the call did
			// not reach it: the measure is broken, not fast.
			return nil, fmt.Errorf("cycle %d: a call succeeded before the backend was back", i)
		}
		took = append(took, millis(p.at.Sub(back)))
		failedCalls += p.failed
	}
	slices.Sort(took)
	out := []Result{
		Result{Metric: "HTTP backend back to call OK, " + label + " (median)", Value: median(slices.Clone(took)), Unit: "ms", Samples: len(took)}.atMost(recoveryTarget),
		{Metric: "HTTP backend back to call OK, " + label + " (max)", Value: took[len(took)-1], Unit: "ms", Samples: len(took)},
		{Metric: "HTTP failed calls per outage, " + label, Value: float64(failedCalls) / float64(len(took)), Unit: "calls", Samples: len(took)},
	}
	if !busy {
		out = append(out, Result{Metric: "HTTP first call after the backend is back failed, idle agent", Value: float64(firstFailed), Unit: "outages", Samples: len(took)})
		if firstErr != nil {
			fmt.Fprintf(os.Stderr, "   idle agent: the first call after the backend was back failed in %d of %d outages, e.g.: %v\n", firstFailed, len(took), firstErr)
		}
	}
	return out, nil
}

func recoverStdio(ctx context.Context, c *config) ([]Result, error) {
	m := manifest{name: "recs", command: c.bins.example}
	r, err := coldStart(ctx, c, "recovery-stdio", []manifest{m}, tetherOptions{gateway: true}, time.Minute, nil)
	if err != nil {
		return nil, err
	}
	defer r.stop()
	a, err := connectAgent(ctx, "http://"+r.d.gateway+"/mcp")
	if err != nil {
		return nil, err
	}
	defer a.close()
	if _, _, err := probe(ctx, a, "recs_echo", 10*time.Second); err != nil {
		return nil, err
	}
	path := r.paths[0]
	var took []float64
	for i := range c.recovers {
		st, _ := r.sw.get(path)
		if st.PID <= 0 {
			return nil, fmt.Errorf("cycle %d: status shows no child pid", i)
		}
		t0 := time.Now()
		if err := syscall.Kill(st.PID, syscall.SIGKILL); err != nil {
			return nil, fmt.Errorf("killing the child %d: %w", st.PID, err)
		}
		at, _, err := probe(ctx, a, "recs_echo", 30*time.Second)
		if err != nil {
			return nil, fmt.Errorf("cycle %d: %w\n%s", i, err, r.d.logTail(10))
		}
		took = append(took, millis(at.Sub(t0)))
		// The next cycle kills the new child: wait until the status names it.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err = r.sw.wait(wctx, []string{path}, func(s statusState) bool { return isConnected(s) && s.PID > 0 && s.PID != st.PID })
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cycle %d: %w", i, err)
		}
	}
	slices.Sort(took)
	return []Result{
		Result{Metric: "stdio child killed to call OK (median)", Value: median(slices.Clone(took)), Unit: "ms", Samples: len(took)}.atMost(recoveryTarget),
		{Metric: "stdio child killed to call OK (max)", Value: took[len(took)-1], Unit: "ms", Samples: len(took)},
	}, nil
}
