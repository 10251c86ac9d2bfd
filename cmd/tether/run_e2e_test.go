//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

const fastHealth = "  healthCheck: {interval: 300ms, timeout: 500ms, failureThreshold: 2}\n"

// TestRunConnectsToRealServers: every transport against real servers reaches
// Connected with the server's facts and tool counts.
func TestRunConnectsToRealServers(t *testing.T) {
	bin := builtBinaries(t)
	everything := npmPeer(t, "mcp-server-everything")
	dir := t.TempDir()

	streamPort, ssePort, goPort := testport.Free(t), testport.Free(t), testport.Free(t)
	startServer(t, []string{fmt.Sprintf("PORT=%d", streamPort)}, everything, "streamableHttp")
	startServer(t, []string{fmt.Sprintf("PORT=%d", ssePort)}, everything, "sse")
	startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", goPort))
	for _, p := range []int{streamPort, ssePort, goPort} {
		waitTCP(t, p, 20*time.Second)
	}

	cases := []struct {
		file, name, manifest, server string
		minTools                     int
	}{
		{"ts-stdio.yaml", "ts-stdio", stdioManifest("ts-stdio", everything, []string{"stdio"}, ""), "", 10},
		{"ts-http.yaml", "ts-http", httpManifest("ts-http", fmt.Sprintf("http://127.0.0.1:%d/mcp", streamPort), "streamable", ""), "", 10},
		{"ts-sse.yaml", "ts-sse", httpManifest("ts-sse", fmt.Sprintf("http://127.0.0.1:%d/sse", ssePort), "sse", ""), "", 10},
		{"go-stdio.yaml", "go-stdio", stdioManifest("go-stdio", filepath.Join(bin, "everything-server"), nil, ""), "", 3},
		{"go-http.yaml", "go-http", httpManifest("go-http", fmt.Sprintf("http://127.0.0.1:%d/mcp", goPort), "streamable", ""), "", 3},
		{"example.yaml", "example", stdioManifest("example", filepath.Join(bin, "tether-example-server"), nil, ""), "", 4},
	}
	for _, c := range cases {
		writeFile(t, filepath.Join(dir, c.file), c.manifest)
	}
	startTether(t, dir)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := waitStatus(t, filepath.Join(dir, c.file), c.name, 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
			if st.Server == nil || st.Server.Name == "" || st.Server.ProtocolVersion == "" {
				t.Errorf("server facts missing: %+v", st.Server)
			}
			if st.Tools == nil || st.Tools.Count < c.minTools || st.Tools.Exposed != st.Tools.Count {
				t.Errorf("tools = %+v, want at least %d, all exposed", st.Tools, c.minTools)
			}
			if st.ObservedSpecHash == "" || !strings.HasPrefix(st.ObservedSpecHash, "sha256:") {
				t.Errorf("observedSpecHash = %q", st.ObservedSpecHash)
			}
			ready := st.Conditions[0]
			if ready.Type != spec.ConditionReady || ready.Status != spec.ConditionTrue || !strings.Contains(ready.Message, "tools") {
				t.Errorf("Ready condition = %+v", ready)
			}
			if strings.HasPrefix(c.name, "ts-stdio") || strings.HasPrefix(c.name, "go-stdio") {
				if st.Process == nil || st.Process.PID == 0 {
					t.Errorf("stdio connection without a pid: %+v", st.Process)
				}
			}
		})
	}
}

// TestRunStdioChildKilled: a killed child leaves Connected and comes back by
// itself with a new pid and a counted restart.
func TestRunStdioChildKilled(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "ex.yaml")
	writeFile(t, m, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, fastHealth))
	startTether(t, dir)
	st := waitStatus(t, m, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid := st.Process.PID

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st = waitStatus(t, m, "ex", 20*time.Second, "Connected with a new pid", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && st.Process.PID != pid
	})
	if st.Process.Restarts < 1 {
		t.Errorf("restarts = %d, want ≥ 1", st.Process.Restarts)
	}
	if st.Process.LastExitCode == nil {
		t.Errorf("lastExitCode not recorded: %+v", st.Process)
	}
}

// TestRunHTTPBackendKilled: an HTTP server that dies is noticed by the health
// check, and the connection comes back when the server does.
func TestRunHTTPBackendKilled(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	port := testport.Free(t)
	srv := startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", port))
	waitTCP(t, port, 20*time.Second)
	m := filepath.Join(dir, "web.yaml")
	writeFile(t, m, httpManifest("web", fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "streamable", fastHealth))
	startTether(t, dir)
	waitStatus(t, m, "web", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	_ = syscall.Kill(-srv.Process.Pid, syscall.SIGKILL)
	// interval 300ms × threshold 2 + timeouts: well inside 10s.
	waitStatus(t, m, "web", 10*time.Second, "not Connected", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseReconnecting
	})
	startServer(t, nil, filepath.Join(bin, "everything-server"), fmt.Sprintf("-http=127.0.0.1:%d", port))
	waitStatus(t, m, "web", 20*time.Second, "Connected again", phaseIs(spec.PhaseConnected))
}

// TestRunUnreachableBacksOff: attempts grow and the wait is capped at 3s.
func TestRunUnreachableBacksOff(t *testing.T) {
	dir := t.TempDir()
	port := testport.Free(t) // nothing listens there
	m := filepath.Join(dir, "gone.yaml")
	writeFile(t, m, httpManifest("gone", fmt.Sprintf("http://127.0.0.1:%d/mcp", port), "streamable", ""))
	startTether(t, dir)

	st := waitStatus(t, m, "gone", 30*time.Second, "attempt ≥ 7", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseReconnecting && st.Attempt >= 7 && st.NextRetryTime != nil
	})
	if !strings.Contains(st.LastError, "refused") {
		t.Errorf("lastError = %q, want connection refused", st.LastError)
	}
	// 100+200+400+800+1600 ms, then 3s caps: attempt 7 needs ≥ ~5.6s
	// (jitter only shortens) and the cap keeps the gaps ≤ 3s.
	prev := st.Attempt
	start := time.Now()
	st = waitStatus(t, m, "gone", 10*time.Second, "the next attempt", func(st spec.ConnectionStatus) bool {
		return st.Attempt > prev
	})
	if gap := time.Since(start); gap > 3*time.Second+time.Second {
		t.Errorf("gap between attempts %v exceeds the 3s cap (plus polling and connect time)", gap)
	}
}

// TestRunTypoKeepsConnection: an invalid edit keeps the working connection,
// reports manifestError, and a fix clears it without reconnecting.
func TestRunTypoKeepsConnection(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "ex.yaml")
	good := stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, "")
	writeFile(t, m, good)
	startTether(t, dir)
	st := waitStatus(t, m, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid := st.Process.PID

	writeFile(t, m, good+"  healthCheck: {intervall: 5s}\n")
	st = waitStatus(t, m, "ex", 10*time.Second, "manifestError", func(st spec.ConnectionStatus) bool { return st.ManifestError != "" })
	if st.Phase != spec.PhaseConnected || st.Process.PID != pid {
		t.Errorf("a typo disturbed the connection: phase %s pid %d→%d", st.Phase, pid, st.Process.PID)
	}
	if !strings.Contains(st.ManifestError, "intervall") || !strings.Contains(st.ManifestError, "ex.yaml") {
		t.Errorf("manifestError does not name the file and field: %q", st.ManifestError)
	}
	writeFile(t, m, good)
	st = waitStatus(t, m, "ex", 10*time.Second, "manifestError cleared", func(st spec.ConnectionStatus) bool { return st.ManifestError == "" })
	if st.Process.PID != pid {
		t.Errorf("fixing the typo reconnected: pid %d→%d", pid, st.Process.PID)
	}
}

// TestRunRemovalAndPrefixEdit: an edit of toolPrefix applies in place; removing
// the manifest ends the child and deletes the status file.
func TestRunRemovalAndPrefixEdit(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "ex.yaml")
	writeFile(t, m, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))
	startTether(t, dir)
	st := waitStatus(t, m, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid, hash := st.Process.PID, st.ObservedSpecHash

	writeFile(t, m, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, "  toolPrefix: renamed\n"))
	st = waitStatus(t, m, "ex", 10*time.Second, "the new spec hash", func(st spec.ConnectionStatus) bool { return st.ObservedSpecHash != hash })
	if st.Phase != spec.PhaseConnected || st.Process.PID != pid {
		t.Errorf("a toolPrefix edit reconnected: phase %s pid %d→%d", st.Phase, pid, st.Process.PID)
	}

	if err := os.Remove(m); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid, 15*time.Second) {
		t.Errorf("child %d still runs after its manifest was removed", pid)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "ex.status.yaml")); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("status file not deleted with its manifest")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunEditorAndConfigMapSaves: a vim-style save (write a temp, rename over)
// and a ConfigMap ..data symlink swap are both picked up.
func TestRunEditorAndConfigMapSaves(t *testing.T) {
	bin := builtBinaries(t)
	server := filepath.Join(bin, "tether-example-server")
	dir := t.TempDir()
	startTether(t, dir)

	// vim: write 4913, remove it, rename the file away, write anew.
	m := filepath.Join(dir, "vim.yaml")
	writeFile(t, m, stdioManifest("vim", server, nil, ""))
	st := waitStatus(t, m, "vim", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	writeFile(t, filepath.Join(dir, "4913"), "")
	os.Remove(filepath.Join(dir, "4913"))
	if err := os.Rename(m, m+"~"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, m, stdioManifest("vim", server, nil, "  toolPrefix: edited\n"))
	os.Remove(m + "~")
	waitStatus(t, m, "vim", 10*time.Second, "the edited spec", func(s spec.ConnectionStatus) bool {
		return s.ObservedSpecHash != st.ObservedSpecHash && s.Phase == spec.PhaseConnected
	})

	// ConfigMap: cm/..2026_a/cm.yaml, cm/..data -> ..2026_a, cm/cm.yaml -> ..data/cm.yaml
	cm := filepath.Join(dir, "cm")
	writeFile(t, filepath.Join(cm, "..2026_a", "cm.yaml"), stdioManifest("cm", server, nil, ""))
	must(t, os.Symlink("..2026_a", filepath.Join(cm, "..data")))
	must(t, os.Symlink(filepath.Join("..data", "cm.yaml"), filepath.Join(cm, "cm.yaml")))
	cmManifest := filepath.Join(cm, "cm.yaml")
	st = waitStatus(t, cmManifest, "cm", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	// The kubelet's update: a new timestamped dir, a new ..data link renamed
	// over the old one. No event names cm.yaml.
	writeFile(t, filepath.Join(cm, "..2026_b", "cm.yaml"), stdioManifest("cm", server, nil, "  toolPrefix: swapped\n"))
	must(t, os.Symlink("..2026_b", filepath.Join(cm, "..data_tmp")))
	must(t, os.Rename(filepath.Join(cm, "..data_tmp"), filepath.Join(cm, "..data")))
	must(t, os.RemoveAll(filepath.Join(cm, "..2026_a")))
	waitStatus(t, cmManifest, "cm", 10*time.Second, "the swapped spec", func(s spec.ConnectionStatus) bool {
		return s.ObservedSpecHash != st.ObservedSpecHash && s.Phase == spec.PhaseConnected
	})
}

// TestRunSIGKILLLeavesNoChild: the parent-death signal ends every child even
// when tether itself cannot clean up.
func TestRunSIGKILLLeavesNoChild(t *testing.T) {
	bin := builtBinaries(t)
	everything := npmPeer(t, "mcp-server-everything")
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "a.yaml"), stdioManifest("a", filepath.Join(bin, "tether-example-server"), nil, ""))
	writeFile(t, filepath.Join(dir, "b.yaml"), stdioManifest("b", everything, []string{"stdio"}, ""))
	tt := startTether(t, dir)
	var pids []int
	for _, n := range []string{"a", "b"} {
		st := waitStatus(t, filepath.Join(dir, n+".yaml"), n, 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		pids = append(pids, st.Process.PID)
	}
	must(t, tt.cmd.Process.Kill())
	<-tt.done
	for _, pid := range pids {
		if !processGone(pid, 10*time.Second) {
			t.Errorf("child %d outlived a SIGKILLed tether", pid)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// TestRunSlowServerDelaysNoOne: a server that takes long to start does not
// hold up a fast one.
func TestRunSlowServerDelaysNoOne(t *testing.T) {
	bin := builtBinaries(t)
	server := filepath.Join(bin, "tether-example-server")
	dir := t.TempDir()
	slow := filepath.Join(dir, "slow.yaml")
	writeFile(t, slow, stdioManifest("slow", "/bin/sh", []string{"-c", "sleep 20; exec " + server}, ""))
	startTether(t, dir, "--workers", "1")
	waitStatus(t, slow, "slow", 10*time.Second, "Connecting", phaseIs(spec.PhaseConnecting))

	fast := filepath.Join(dir, "fast.yaml")
	writeFile(t, fast, stdioManifest("fast", server, nil, ""))
	waitStatus(t, fast, "fast", 10*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if st, _ := readStatus(t, slow, "slow"); st.Phase != spec.PhaseConnecting {
		t.Errorf("the slow server is %s, want still Connecting (the test proves nothing otherwise)", st.Phase)
	}
}

// TestRunSIGTERMWritesFinalStatus: SIGTERM closes every connection, ends the
// children, writes final status and exits 0.
func TestRunSIGTERMWritesFinalStatus(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "ex.yaml")
	writeFile(t, m, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))
	tt := startTether(t, dir)
	st := waitStatus(t, m, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	start := time.Now()
	tt.stop()
	if tt.err != nil {
		t.Errorf("tether exited with %v after SIGTERM, want 0", tt.err)
	}
	t.Logf("shutdown took %v", time.Since(start))
	if !processGone(st.Process.PID, 5*time.Second) {
		t.Errorf("child %d still runs after tether exited", st.Process.PID)
	}
	final, _ := readStatus(t, m, "ex")
	if final.Phase == spec.PhaseConnected {
		t.Errorf("final status still says Connected")
	}
}

// TestRunAddressInUseStartsNothing: tether binds its gateway and metrics
// addresses before it starts anything, so an address in use ends the run
// with an error naming the flag and the address, and no server was
// started, no status written and no owner record made. Bound in a
// goroutine beside the controller, the gateway's failure came after the
// controller had started: every run wrote status files (and sometimes
// started the server) before it exited, and nothing kept a status from
// saying Connected before the gateway accepted.
func TestRunAddressInUseStartsNothing(t *testing.T) {
	bin := builtBinaries(t)
	for _, flag := range []string{"--listen", "--metrics-addr"} {
		t.Run(flag, func(t *testing.T) {
			held, err := net.Listen("tcp", "127.0.0.1:0")
			must(t, err)
			defer held.Close()
			addr := held.Addr().String()
			dir := t.TempDir()
			mark := filepath.Join(t.TempDir(), "started")
			m := filepath.Join(dir, "ex.yaml")
			writeFile(t, m, stdioManifest("ex", "/bin/sh", []string{"-c", "touch " + mark + "; exec " + filepath.Join(bin, "tether-example-server")}, ""))
			addrs := map[string]string{"--listen": "", "--metrics-addr": ""}
			addrs[flag] = addr
			args := []string{"run", "--dir", dir, "--listen", addrs["--listen"], "--metrics-addr", addrs["--metrics-addr"]}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			out, err := exec.CommandContext(ctx, filepath.Join(bin, "tether"), args...).CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("tether run with %s on an address in use: %v, want a failed start\n%s", flag, err, out)
			}
			if want := flag + " " + addr + ": "; !strings.Contains(string(out), want) || !strings.Contains(string(out), "address already in use") {
				t.Errorf("the error does not name %q and the address in use:\n%s", want, out)
			}
			if _, err := os.Stat(strings.TrimSuffix(m, ".yaml") + ".status.yaml"); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a status file was written (%v):\n%s", err, out)
			}
			if _, err := os.Stat(filepath.Join(dir, ".tether", "owner.json")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("an owner record was written (%v)", err)
			}
			if _, err := os.Stat(mark); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the server was started (%v)", err)
			}
		})
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestRunStatusDirForReadOnlyTree: with --status-dir, a read-only manifest tree
// is left untouched and status files mirror it under the status directory.
func TestRunStatusDirForReadOnlyTree(t *testing.T) {
	bin := builtBinaries(t)
	dir, statusDir := t.TempDir(), t.TempDir()
	m := filepath.Join(dir, "team", "ex.yaml")
	writeFile(t, m, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, ""))
	must(t, os.Chmod(filepath.Join(dir, "team"), 0o555))
	t.Cleanup(func() { os.Chmod(filepath.Join(dir, "team"), 0o755) })
	startTether(t, dir, "--status-dir", statusDir)
	waitStatus(t, filepath.Join(statusDir, "team", "ex.yaml"), "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	entries, err := os.ReadDir(filepath.Join(dir, "team"))
	must(t, err)
	if len(entries) != 1 {
		t.Errorf("the manifest tree was written to: %v", entries)
	}
}

// TestRunRestartKeepsStatus: a restarted tether rebuilds its state from the
// files and keeps what the status said (transition times, restarts).
func TestRunRestartKeepsStatus(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	m := filepath.Join(dir, "ex.yaml")
	writeFile(t, m, stdioManifest("ex", filepath.Join(bin, "tether-example-server"), nil, fastHealth))
	tt := startTether(t, dir)
	st := waitStatus(t, m, "ex", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	must(t, syscall.Kill(st.Process.PID, syscall.SIGKILL))
	st = waitStatus(t, m, "ex", 20*time.Second, "a restart", func(s spec.ConnectionStatus) bool {
		return s.Phase == spec.PhaseConnected && s.Process.Restarts == 1
	})
	stalled := st.Conditions[2]
	tt.stop()

	startTether(t, dir)
	st2 := waitStatus(t, m, "ex", 20*time.Second, "Connected again", func(s spec.ConnectionStatus) bool {
		return s.Phase == spec.PhaseConnected && s.Process.PID != st.Process.PID
	})
	if st2.Process.Restarts != 1 {
		t.Errorf("restarts after a tether restart = %d, want 1 (a tether restart is no child restart)", st2.Process.Restarts)
	}
	if c := st2.Conditions[2]; c.Type != spec.ConditionStalled || !c.LastTransitionTime.Equal(stalled.LastTransitionTime) {
		t.Errorf("Stalled lastTransitionTime moved across a restart: %v → %v", stalled.LastTransitionTime, c.LastTransitionTime)
	}
}
