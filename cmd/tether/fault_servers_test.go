//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// TestFaultStdioServers runs one tether in front of stdio servers that fail
// in every way a process can, side by side (docs/reliability.md, rows S1–S9):
// each must show in its own status, and none may disturb the others.
func TestFaultStdioServers(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	fs := faultServer(t)
	manifests := map[string]string{
		"crash-start": faultManifest(t, "crash-start", []string{"-exit-at-start", "3"}, quick),
		"crash-later": faultManifest(t, "crash-later", []string{"-exit-after", "1500ms", "-exit-code", "5"}, quick),
		"exit-zero":   faultManifest(t, "exit-zero", []string{"-exit-after", "1500ms", "-exit-code", "0"}, quick),
		"banner":      faultManifest(t, "banner", []string{"-banner", "Server v1.0 ready"}, quick),
		"junk-later":  faultManifest(t, "junk-later", []string{"-junk-after", "1s"}, quick),
		"flood":       faultManifest(t, "flood", []string{"-stderr-bytes", "30000000", "-stderr-line", "flood done"}, quick),
		"many":        faultManifest(t, "many", []string{"-tools", "5000"}, quick),
		// The default health check: row S8 is the frame limit, and a
		// 20 MiB answer can hold the stdout pipe past quick's probes
		// (interval 200 ms, timeout 300 ms, 2 failures) on a loaded
		// machine, which then took the server for hung and dropped it
		// before the frame limit could say why (under load: "2 health
		// checks in a row failed" instead of the limit's error).
		"big": faultManifest(t, "big", nil, quickBackoff),
		// sh stays as the wrapper: the server is tether's grandchild.
		"wrapper": stdioManifest("wrapper", "/bin/sh", []string{"-c", fs + "; echo wrapper done"}, quick),
	}
	for name, m := range manifests {
		writeFile(t, filepath.Join(dir, name+".yaml"), m)
	}
	tt, ep := startTetherServing(t, dir)
	path := func(name string) string { return filepath.Join(dir, name+".yaml") }

	t.Run("S1 crash at start", func(t *testing.T) {
		// Waiting to retry: a status written while the next attempt runs
		// (Reconnecting too) has no nextRetryTime.
		st := waitStatus(t, path("crash-start"), "crash-start", 15*time.Second, "Reconnecting after 3 attempts, waiting to retry", func(st spec.ConnectionStatus) bool {
			return st.Phase == spec.PhaseReconnecting && st.Attempt >= 3 && st.NextRetryTime != nil
		})
		for _, want := range []string{"exit code 3", "fatal: cannot start"} {
			if !strings.Contains(st.LastError, want) {
				t.Errorf("lastError %q lacks %q", st.LastError, want)
			}
		}
		if st.Process == nil || st.Process.LastExitCode == nil || *st.Process.LastExitCode != 3 ||
			!slices.Contains(st.Process.StderrTail, "fatal: cannot start (exit 3)") {
			t.Errorf("process = %+v, want exit code 3 and the server's last words", st.Process)
		}
		if r := st.Conditions[0]; r.Status != spec.ConditionFalse || r.Reason != "ConnectFailed" {
			t.Errorf("Ready = %+v, want False/ConnectFailed", r)
		}
	})

	for _, c := range []struct{ row, name, code string }{
		{"S2 crash later", "crash-later", "exit code 5"},
		{"S3 exit 0", "exit-zero", "exit code 0"},
	} {
		t.Run(c.row, func(t *testing.T) {
			st := waitStatus(t, path(c.name), c.name, 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
			first := st.Process.PID
			tt.waitLogLine(t, 15*time.Second, "connection lost", "connection="+c.name, c.code)
			st = waitStatus(t, path(c.name), c.name, 15*time.Second, "Connected again with a new child", func(st spec.ConnectionStatus) bool {
				return st.Phase == spec.PhaseConnected && st.Process.PID != first && st.Process.Restarts >= 1
			})
			if !processGone(first, 5*time.Second) {
				t.Errorf("the first child %d is still there", first)
			}
		})
	}

	t.Run("S4 non-JSON on stdout before initialize", func(t *testing.T) {
		waitStatus(t, path("banner"), "banner", 15*time.Second, "the stdout explanation",
			statusOK(spec.PhaseReconnecting, "other than JSON-RPC to stdout"))
	})

	t.Run("S5 non-JSON on stdout after initialize", func(t *testing.T) {
		waitStatus(t, path("junk-later"), "junk-later", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		tt.waitLogLine(t, 15*time.Second, "connection lost", "connection=junk-later", "other than JSON-RPC to stdout")
	})

	t.Run("S6 tens of MB on stderr", func(t *testing.T) {
		st := waitStatus(t, path("flood"), "flood", 30*time.Second, "Connected with the flood's last line", func(st spec.ConnectionStatus) bool {
			return st.Phase == spec.PhaseConnected && st.Process != nil && len(st.Process.StderrTail) > 0 &&
				st.Process.StderrTail[len(st.Process.StderrTail)-1] == "flood done"
		})
		if n := len(st.Process.StderrTail); n > 20 {
			t.Errorf("stderr tail has %d lines, want ≤ 20", n)
		}
		fi, err := os.Stat(filepath.Join(dir, "flood.status.yaml"))
		must(t, err)
		if fi.Size() > 64<<10 {
			t.Errorf("status file is %d bytes after a 30 MB stderr flood", fi.Size())
		}
		if kb := rssKB(t, tt.cmd.Process.Pid); kb > 200<<10 {
			t.Errorf("tether's RSS is %d kB after a 30 MB stderr flood", kb)
		}
	})

	t.Run("S7 thousands of tools", func(t *testing.T) {
		st := waitStatus(t, path("many"), "many", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		if st.Tools == nil || st.Tools.Count != 5000+8 || st.Tools.Exposed != st.Tools.Count {
			t.Errorf("tools = %+v, want 5008 counted and exposed", st.Tools)
		}
		s := connectClient(t, ep)
		start := time.Now()
		names := listAll(t, s)
		n := 0
		for _, name := range names {
			if strings.HasPrefix(name, "many_t") {
				n++
			}
		}
		if n != 5000 {
			t.Errorf("the gateway lists %d of the 5000 tools", n)
		}
		t.Logf("tools/list of %d tools through the gateway took %v", len(names), time.Since(start))
		res, err := call(s, 10*time.Second, "many_t04999", nil)
		if err != nil || textOf(res) != "t04999" {
			t.Errorf("many_t04999 = %v, %v", res, err)
		}
	})

	t.Run("S8 oversized message", func(t *testing.T) {
		waitStatus(t, path("big"), "big", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		s := connectClient(t, ep)
		res, err := call(s, 20*time.Second, "big_big", map[string]any{"bytes": 1 << 20})
		if err != nil || len(textOf(res)) != 1<<20 {
			t.Fatalf("a 1 MiB result did not pass: %v", err)
		}
		start := time.Now()
		res, err = call(s, 30*time.Second, "big_big", map[string]any{"bytes": 20 << 20})
		took := time.Since(start)
		if err == nil && !res.IsError {
			t.Fatalf("a 20 MiB message (over the 16 MiB frame limit) passed")
		}
		// The error names the connection, the limit and its flag (H1).
		want := "connection big: the server sent a stdio frame of more than 16777216 bytes (the limit set by --max-message-bytes)"
		if msg := callError(res, err); !strings.Contains(msg, want) {
			t.Errorf("the oversized answer failed with %q, want %q", msg, want)
		}
		if took > 10*time.Second {
			t.Errorf("the oversized answer took %v to fail", took)
		}
		t.Logf("oversized answer: %v (after %v)", err, took.Round(time.Millisecond))
		// The connection recovers and serves again.
		waitFor(t, 15*time.Second, "big_echo to answer again", func() (bool, string) {
			res, err := call(s, 5*time.Second, "big_echo", map[string]any{"text": "again"})
			return err == nil && textOf(res) == "again", fmt.Sprint(err)
		})
	})

	t.Run("S9 wrapper dies, grandchild keeps the pipes", func(t *testing.T) {
		st := waitStatus(t, path("wrapper"), "wrapper", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		sh := st.Process.PID
		grandchildren := childrenOf(sh)
		if len(grandchildren) != 1 {
			t.Fatalf("wrapper %d has children %v, want the server alone", sh, grandchildren)
		}
		killAtCleanup(t, grandchildren[0])
		must(t, syscall.Kill(sh, syscall.SIGKILL))
		waitStatus(t, path("wrapper"), "wrapper", 15*time.Second, "Connected with a new wrapper", func(st spec.ConnectionStatus) bool {
			return st.Phase == spec.PhaseConnected && st.Process.PID != sh
		})
		if !processGone(grandchildren[0], 5*time.Second) {
			t.Errorf("the grandchild %d outlived its wrapper's death", grandchildren[0])
		}
	})

	t.Run("no fault disturbed the others", func(t *testing.T) {
		// tether logs no error of its own (a reconcile that failed, a panic).
		for _, line := range strings.Split(tt.logs.String(), "\n") {
			if strings.Contains(line, "level=ERROR") {
				t.Errorf("tether logged an error: %s", line)
			}
		}
	})
}

// listAll lists every tool of the gateway, following cursors.
func listAll(t *testing.T, s *mcp.ClientSession) []string {
	t.Helper()
	var names []string
	for tool, err := range s.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatalf("tools/list: %v", err)
		}
		names = append(names, tool.Name)
	}
	return names
}

// TestFaultNpxWrapper: the real npx as a wrapper (docs/reliability.md, row
// S9): npx runs the server as its child, so killing npx leaves the server
// holding the pipes. tether notices npx's death, kills the whole process
// group and starts again.
func TestFaultNpxWrapper(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	npmPeer(t, "mcp-server-everything")
	if _, err := exec.LookPath("npx"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("npx is not on PATH: %v", err)
		}
		t.Skip("npx is not on PATH")
	}
	dir := t.TempDir()
	m := filepath.Join(dir, "npx.yaml")
	writeFile(t, m, stdioManifest("npx", "npx", []string{"--no-install", "mcp-server-everything", "stdio"},
		fmt.Sprintf("    workingDir: %s\n", filepath.Join(repoRoot(t), "hack", "peers"))+quickBackoff))
	startTether(t, dir)
	st := waitStatus(t, m, "npx", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	npx := st.Process.PID
	group := groupMembers(npx)
	if len(group) < 2 {
		t.Fatalf("npx's process group is %v: the server is not a separate process", group)
	}
	for _, pid := range group {
		killAtCleanup(t, pid)
	}
	must(t, syscall.Kill(npx, syscall.SIGKILL))
	waitStatus(t, m, "npx", 30*time.Second, "Connected through a new npx", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process.PID != npx
	})
	for _, pid := range group {
		if !processGone(pid, 10*time.Second) {
			t.Errorf("process %d of the killed npx's group is still there", pid)
		}
	}
}
