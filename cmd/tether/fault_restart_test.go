package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// TestFaultRestartRebuildsState: tether stopped, the manifests changed
// while it was down, tether started again (docs/reliability.md, row P3). The
// new tether acts on the files as they are: an added manifest connects, an
// edited one runs its new spec, a removed one leaves no status behind, and
// an untouched one keeps its status history. TestRunRestartKeepsStatus
// covers transition times and restart counts.
func TestFaultRestartRebuildsState(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	path := func(n string) string { return filepath.Join(dir, n+".yaml") }
	writeFile(t, path("kept"), faultManifest(t, "kept", nil, ""))
	writeFile(t, path("edited"), faultManifest(t, "edited", []string{"-stderr-line", "before"}, ""))
	writeFile(t, path("removed"), faultManifest(t, "removed", nil, ""))
	tt := startTether(t, dir)
	var kept spec.ConnectionStatus
	for _, n := range []string{"kept", "edited", "removed"} {
		st := waitStatus(t, path(n), n, 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		if n == "kept" {
			kept = st
		}
	}
	tt.stop()
	if tt.err != nil {
		t.Fatalf("tether exited with %v", tt.err)
	}

	writeFile(t, path("edited"), faultManifest(t, "edited", []string{"-stderr-line", "after"}, ""))
	must(t, os.Remove(path("removed")))
	writeFile(t, path("added"), faultManifest(t, "added", nil, ""))
	// Not a status file of tether's, whatever its name: left alone.
	notes := filepath.Join(dir, "notes.status.yaml")
	writeFile(t, notes, "# my notes\n")
	startTether(t, dir)

	waitStatus(t, path("added"), "added", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	waitStatus(t, path("edited"), "edited", 15*time.Second, "Connected with the edit", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && slices.Contains(st.Process.StderrTail, "after")
	})
	st := waitStatus(t, path("kept"), "kept", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if c := st.Conditions[2]; !c.LastTransitionTime.Equal(kept.Conditions[2].LastTransitionTime) {
		t.Errorf("Stalled moved across the restart: %v → %v", kept.Conditions[2].LastTransitionTime, c.LastTransitionTime)
	}
	waitFor(t, 10*time.Second, "the status of the manifest removed while tether was down to go", func() (bool, string) {
		_, err := os.Stat(filepath.Join(dir, "removed.status.yaml"))
		return os.IsNotExist(err), fmt.Sprint(err)
	})
	if _, err := os.Stat(notes); err != nil {
		t.Errorf("a file that is no status of tether's was removed: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(dir, "*.status.yaml"))
	for _, f := range left {
		if n := strings.TrimSuffix(filepath.Base(f), ".status.yaml"); !slices.Contains([]string{"kept", "edited", "added", "notes"}, n) {
			t.Errorf("stray status file %s", f)
		}
	}
}
