//go:build unix

package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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

// TestFaultRestartDuringInvalidEdit: tether stopped, a manifest made invalid
// while it was down, tether started again (docs/reliability.md, row P4). The
// connection comes back on its last valid spec, kept in the state
// directory, with manifestError and Stalled saying why; a state file that
// cannot be read back is ignored with a warning.
func TestFaultRestartDuringInvalidEdit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	held := filepath.Join(dir, "held.yaml")
	writeFile(t, held, faultManifest(t, "held", []string{"-stderr-line", "the valid one"}, ""))
	tt := startTether(t, dir)
	waitStatus(t, held, "held", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	tt.stop()
	if tt.err != nil {
		t.Fatalf("tether exited with %v", tt.err)
	}

	state := filepath.Join(dir, ".tether")
	saved := filepath.Join(state, "specs", "held.json")
	for path, want := range map[string]os.FileMode{state: 0o700 | os.ModeDir, saved: 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode() != want {
			t.Errorf("%s has mode %v, want %v (a spec may hold plain env values)", path, fi.Mode(), want)
		}
	}
	writeFile(t, filepath.Join(state, "specs", "junk.json"), "{not json")

	// Invalid, but its name can be read: the connection is kept.
	writeFile(t, held, faultManifest(t, "held", []string{"-stderr-line", "the invalid one"}, "  callTimeout: 3x\n"))
	tt = startTether(t, dir)
	st := waitStatus(t, held, "held", 15*time.Second, "Connected on the last valid spec", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && slices.Contains(st.Process.StderrTail, "the valid one")
	})
	if !strings.Contains(st.ManifestError, "spec.callTimeout") {
		t.Errorf("manifestError = %q, want the problem with spec.callTimeout", st.ManifestError)
	}
	if c := st.Conditions[2]; c.Type != spec.ConditionStalled || c.Status != spec.ConditionTrue {
		t.Errorf("Stalled = %+v, want True", c)
	}
	tt.waitLogLine(t, 5*time.Second, "a saved last valid spec cannot be used", "junk.json")

	// Fixed: the new spec runs and the saved one follows it.
	writeFile(t, held, faultManifest(t, "held", []string{"-stderr-line", "the fixed one"}, ""))
	waitStatus(t, held, "held", 15*time.Second, "Connected on the fixed spec", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.ManifestError == "" && st.Process != nil && slices.Contains(st.Process.StderrTail, "the fixed one")
	})
	waitFor(t, 10*time.Second, "the saved spec to be the fixed one", func() (bool, string) {
		data, err := os.ReadFile(saved)
		return err == nil && strings.Contains(string(data), "the fixed one"), string(data)
	})

	// Removed: forgotten.
	must(t, os.Remove(held))
	waitFor(t, 10*time.Second, "the saved spec of a removed manifest to go", func() (bool, string) {
		_, err := os.Stat(saved)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
}

// TestFaultKillBeforeFirstOutcomes: a spec edited while tether was down is
// saved as soon as it is listed, not once every connection has its first
// outcome (which a server that never answers holds off until the connect
// timeout): a tether killed with SIGKILL meanwhile, and the manifest broken
// before the next start, leave the connection on the edited spec, not on
// the one it replaced (docs/contract.md §3). A name new to the state
// directory is saved once the first outcomes are in, or a few seconds
// after the start when one server holds them off: its connection working,
// killed, broken, it comes back on its spec too.
func TestFaultKillBeforeFirstOutcomes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	held := filepath.Join(dir, "held.yaml")
	writeFile(t, held, faultManifest(t, "held", []string{"-stderr-line", "the old one"}, ""))
	tt := startTether(t, dir)
	waitStatus(t, held, "held", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	tt.stop()

	hang := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hang); ts.Close() })
	writeFile(t, filepath.Join(dir, "hang.yaml"), httpManifest("hang", ts.URL, "streamable", ""))
	writeFile(t, held, faultManifest(t, "held", []string{"-stderr-line", "the new one"}, ""))
	fresh := filepath.Join(dir, "fresh.yaml")
	writeFile(t, fresh, faultManifest(t, "fresh", nil, ""))
	tt = startTether(t, dir, "--connect-timeout", "5m")
	st := waitStatus(t, held, "held", 15*time.Second, "Connected on the new spec", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && slices.Contains(st.Process.StderrTail, "the new one")
	})
	killAtCleanup(t, st.Process.PID)
	saved := filepath.Join(dir, ".tether", "specs", "held.json")
	waitFor(t, 10*time.Second, "the saved spec to be the new one while hang connects", func() (bool, string) {
		data, err := os.ReadFile(saved)
		return err == nil && strings.Contains(string(data), "the new one"), string(data)
	})
	if st, ok := readStatus(t, filepath.Join(dir, "hang.yaml"), "hang"); ok && st.Phase != spec.PhaseConnecting {
		t.Fatalf("hang is %s: the first outcomes are in, this test shows nothing", st.Phase)
	}
	fst := waitStatus(t, fresh, "fresh", 15*time.Second, "fresh Connected", phaseIs(spec.PhaseConnected))
	killAtCleanup(t, fst.Process.PID)
	waitFor(t, 30*time.Second, "fresh's spec to be saved while hang still connects", func() (bool, string) {
		_, err := os.Stat(filepath.Join(dir, ".tether", "specs", "fresh.json"))
		return err == nil, fmt.Sprint(err)
	})
	if st, ok := readStatus(t, filepath.Join(dir, "hang.yaml"), "hang"); ok && st.Phase != spec.PhaseConnecting {
		t.Fatalf("hang is %s: the first outcomes are in, the bound on the wait is not what saved fresh", st.Phase)
	}
	must(t, tt.cmd.Process.Kill())
	<-tt.done

	writeFile(t, held, faultManifest(t, "held", []string{"-stderr-line", "the broken one"}, "  callTimeout: 3x\n"))
	writeFile(t, fresh, faultManifest(t, "fresh", nil, "  callTimeout: 3x\n"))
	startTether(t, dir)
	waitStatus(t, fresh, "fresh", 15*time.Second, "fresh Connected on its last valid spec", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.ManifestError != ""
	})
	st = waitStatus(t, held, "held", 15*time.Second, "Connected on the last valid spec", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.ManifestError != "" && st.Process != nil && len(st.Process.StderrTail) > 0
	})
	if !slices.Contains(st.Process.StderrTail, "the new one") {
		t.Errorf("after the restart the connection runs %q, want the new spec (the last valid one)", st.Process.StderrTail)
	}
}
