//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tether-mcp/tether/spec"
)

// TestFaultSIGTERMWithCallsInFlight: SIGTERM while calls run through the
// gateway (docs/reliability.md, row P1). Every call ends, with an answer
// or an error, well within the shutdown bound; tether exits 0; the child
// is gone; the final status says tether stopped.
func TestFaultSIGTERMWithCallsInFlight(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	m := filepath.Join(dir, "busy.yaml")
	writeFile(t, m, faultManifest(t, "busy", nil, quickHealth))
	tt, ep := startTetherServing(t, dir)
	st := waitStatus(t, m, "busy", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)

	const calls = 5
	type outcome struct {
		err  error
		took time.Duration
	}
	results := make(chan outcome, calls)
	var started sync.WaitGroup
	for i := range calls {
		started.Add(1)
		go func() {
			started.Done()
			begin := time.Now()
			_, err := call(s, 60*time.Second, "busy_slow", map[string]any{"seconds": 60, "id": fmt.Sprint(i)})
			results <- outcome{err, time.Since(begin)}
		}()
	}
	started.Wait()
	waitStatus(t, m, "busy", 10*time.Second, "every call running in the backend", func(st spec.ConnectionStatus) bool {
		for i := range calls {
			if st.Process == nil || !slices.Contains(st.Process.StderrTail, fmt.Sprintf("slow call %d started", i)) {
				return false
			}
		}
		return true
	})

	must(t, tt.cmd.Process.Signal(syscall.SIGTERM))
	sent := time.Now()
	// The bound: --shutdown-timeout (15 s) for the connections and 5 s for
	// the gateway's own shutdown.
	const bound = 20 * time.Second
	for range calls {
		select {
		case o := <-results:
			// Failing cleanly: the caller gets an MCP error that names the
			// connection, not a cut stream.
			var je *jsonrpc.Error
			switch {
			case o.err == nil:
				t.Errorf("a 60 s call answered successfully after SIGTERM")
			case !errors.As(o.err, &je) || !strings.Contains(je.Message, "busy"):
				t.Errorf("in-flight call ended without an MCP error naming its connection: %v", o.err)
			default:
				t.Logf("in-flight call answered after %v: %v", o.took.Round(time.Millisecond), o.err)
			}
		case <-time.After(bound - time.Since(sent)):
			t.Fatalf("an in-flight call had not ended %v after SIGTERM", bound)
		}
	}
	select {
	case <-tt.done:
	case <-time.After(bound - time.Since(sent)):
		t.Fatalf("tether had not exited %v after SIGTERM", bound)
	}
	t.Logf("calls ended and tether exited %v after SIGTERM", time.Since(sent).Round(time.Millisecond))
	if tt.err != nil {
		t.Errorf("tether exited with %v, want 0", tt.err)
	}
	if !processGone(st.Process.PID, 5*time.Second) {
		t.Errorf("child %d outlived tether", st.Process.PID)
	}
	final, _ := readStatus(t, m, "busy")
	if final.Phase != spec.PhasePending || final.Conditions[0].Reason != "Stopped" {
		t.Errorf("final status %s/%s, want Pending/Stopped", final.Phase, final.Conditions[0].Reason)
	}
}

// TestFaultSIGKILLLeavesNoOrphans: tether killed with SIGKILL while it runs a
// wrapper (sh) whose child is the server (docs/reliability.md, row P2).
// The kernel kills the wrapper (parent-death signal); the server, tether's
// grandchild, sees its stdin close and exits. Direct children are covered
// by TestRunSIGKILLLeavesNoChild.
func TestFaultSIGKILLLeavesNoOrphans(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	m := filepath.Join(dir, "wrapped.yaml")
	writeFile(t, m, stdioManifest("wrapped", "/bin/sh", []string{"-c", faultServer(t) + "; echo wrapper done"}, ""))
	tt := startTether(t, dir)
	st := waitStatus(t, m, "wrapped", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	sh := st.Process.PID
	kids := childrenOf(sh)
	if len(kids) != 1 {
		t.Fatalf("wrapper %d has children %v, want the server alone", sh, kids)
	}
	for _, pid := range append(kids, sh) {
		killAtCleanup(t, pid)
	}
	must(t, tt.cmd.Process.Kill())
	<-tt.done
	for _, pid := range []int{sh, kids[0]} {
		if !processGone(pid, 10*time.Second) {
			t.Errorf("process %d outlived a SIGKILLed tether", pid)
		}
	}
}

// TestFaultSIGKILLThenRestartStopsLeftovers: a wrapper's background child
// that does not read stdin outlives a tether killed with SIGKILL (only the
// direct child gets the parent-death signal); the next tether, reading the
// process groups the first one recorded in the state directory, stops it
// (docs/reliability.md, row P5).
func TestFaultSIGKILLThenRestartStopsLeftovers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	m := filepath.Join(dir, "wrapped.yaml")
	writeFile(t, m, stdioManifest("wrapped", "/bin/sh", []string{"-c", "sleep 300 & exec " + faultServer(t)}, ""))
	tt := startTether(t, dir)
	st := waitStatus(t, m, "wrapped", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	leader := st.Process.PID
	kids := childrenOf(leader)
	if len(kids) != 1 {
		t.Fatalf("wrapper %d has children %v, want the background sleep alone", leader, kids)
	}
	orphan := kids[0]
	killAtCleanup(t, orphan)
	killAtCleanup(t, leader)
	if _, err := os.Stat(filepath.Join(dir, ".tether", "groups", fmt.Sprint(leader)+".json")); err != nil {
		t.Fatalf("the child's process group is not recorded: %v", err)
	}

	must(t, tt.cmd.Process.Kill())
	<-tt.done
	if !processGone(leader, 10*time.Second) {
		t.Fatalf("the server %d outlived a SIGKILLed tether", leader)
	}
	if processGone(orphan, 300*time.Millisecond) {
		t.Fatalf("the background child %d died with tether: this test shows nothing", orphan)
	}

	tt = startTether(t, dir)
	if !processGone(orphan, 15*time.Second) {
		t.Fatalf("the next tether left the previous one's orphan %d running", orphan)
	}
	tt.waitLogLine(t, 5*time.Second, "stopped process groups a previous tether left running", "groups=1")
	waitStatus(t, m, "wrapped", 15*time.Second, "Connected again", func(s spec.ConnectionStatus) bool {
		return s.Phase == spec.PhaseConnected && s.Process != nil && s.Process.PID != leader
	})
}
