//go:build unix

package main

import (
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// TestHostileSIGHUPStopsCleanly: SIGHUP (the terminal tether runs in goes
// away) shuts tether down as SIGTERM does (docs/reliability.md, row HP2):
// it exits 0, its child is gone and the final status says tether stopped.
// Left to its default, SIGHUP killed tether and the status stayed Connected.
func TestHostileSIGHUPStopsCleanly(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "hup.yaml")
	writeFile(t, m, faultManifest(t, "hup", nil, quickHealth))
	tt := startTether(t, dir)
	st := waitStatus(t, m, "hup", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	must(t, tt.cmd.Process.Signal(syscall.SIGHUP))
	select {
	case <-tt.done:
	case <-time.After(30 * time.Second):
		t.Fatal("tether had not exited 30s after SIGHUP")
	}
	if tt.err != nil {
		t.Errorf("tether exited with %v after SIGHUP, want 0", tt.err)
	}
	if !strings.Contains(tt.logs.String(), "tether stopped") {
		t.Errorf("tether did not log its shutdown after SIGHUP")
	}
	final, _ := readStatus(t, m, "hup")
	if final.Phase != spec.PhasePending || conditionOf(final, "Ready").Reason != spec.ReasonStopped {
		t.Errorf("final status after SIGHUP = phase %s, conditions %+v; want Pending, Ready reason Stopped", final.Phase, final.Conditions)
	}
	if st.Process != nil && !processGone(st.Process.PID, 5*time.Second) {
		t.Errorf("child %d still runs after tether exited", st.Process.PID)
	}
}
