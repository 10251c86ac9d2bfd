//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// billionLaughs is a manifest whose aliases expand to 10^10 strings.
func billionLaughs(name string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata: {name: %s}\n", name)
	b.WriteString("a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 10), ", "))
	}
	b.WriteString("spec: {stdio: {command: srv, args: *a9}}\n")
	return b.String()
}

// manifestErrors returns tether_manifest_errors for a file, or -1 when the
// series is absent.
func manifestErrors(t testing.TB, ep endpoints, file string) float64 {
	t.Helper()
	v, ok := metricValue(scrape(t, ep), fmt.Sprintf("tether_manifest_errors{file=%q}", file))
	if !ok {
		return -1
	}
	return v
}

// TestFaultHostileFiles drops every kind of bad file beside a working
// connection (docs/reliability.md, rows F1–F6): each is reported in status
// (when a connection name can be read from it), in the log and in
// tether_manifest_errors, within a second or two; the working connection
// keeps its child throughout, and tether keeps taking new manifests.
func TestFaultHostileFiles(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, faultManifest(t, "good", nil, quickBackoff))
	tt, ep := startTetherServing(t, dir)
	st := waitStatus(t, good, "good", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid := st.Process.PID

	rows := []struct {
		row, file, content string
		// name is the connection the file names, when it can be read; its
		// status then says Invalid with manifestError containing want.
		name string
		want string // in the log line and manifestError
	}{
		{"F1 invalid YAML", "syntax.yaml", "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: syntax\nspec: {stdio: [unclosed\n",
			"syntax", "syntax.yaml"},
		{"F2 unknown field", "unknown.yaml", stdioManifest("unknown", "srv", nil, "  helthCheck: {interval: 1s}\n"),
			"unknown", "spec.helthCheck: unknown field"},
		{"F3 billion laughs", "laughs.yaml", billionLaughs("laughs"), "laughs", "unknown field"},
		{"F4 multi-MB file", "huge.yaml", stdioManifest("huge", "srv", nil, "") + strings.Repeat("# padding padding padding\n", 5<<20/26),
			"", "over the limit"},
		{"F5 binary junk", "junk.yaml", "\x7fELF\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x03\x00>\x00", "", "not a text file"},
		{"F6 duplicate name across files", "dup.yaml", faultManifest(t, "good", []string{"-stderr-line", "the impostor"}, ""),
			"good", "is already declared in"},
	}
	for _, r := range rows {
		t.Run(r.row, func(t *testing.T) {
			path := filepath.Join(dir, r.file)
			start := time.Now()
			writeFile(t, path, r.content)
			line := tt.waitLogLine(t, 10*time.Second, "invalid manifest", r.file, r.want)
			if r.name != "" {
				st := waitStatus(t, path, r.name, 10*time.Second, "Invalid", phaseIs(spec.PhaseInvalid))
				if !strings.Contains(st.ManifestError, r.file) || !strings.Contains(st.ManifestError, r.want) {
					t.Errorf("manifestError %q does not name the file and the problem", st.ManifestError)
				}
				if c := st.Conditions[2]; c.Type != spec.ConditionStalled || c.Status != spec.ConditionTrue {
					t.Errorf("Stalled = %+v, want True", c)
				}
			}
			waitFor(t, 10*time.Second, "tether_manifest_errors for the file", func() (bool, string) {
				v := manifestErrors(t, ep, path)
				return v >= 1, fmt.Sprint(v)
			})
			t.Logf("reported within %v: %s", time.Since(start).Round(time.Millisecond), line[strings.Index(line, "err="):])
		})
	}

	t.Run("the working connection never noticed", func(t *testing.T) {
		st, _ := readStatus(t, good, "good")
		if st.Phase != spec.PhaseConnected || st.Process.PID != pid || st.ManifestError != "" {
			t.Errorf("good is %s, pid %d→%d, manifestError %q", st.Phase, pid, st.Process.PID, st.ManifestError)
		}
		for _, l := range st.Process.StderrTail {
			if strings.Contains(l, "impostor") {
				t.Errorf("the duplicate's server replaced the original")
			}
		}
	})

	t.Run("tether still takes new manifests", func(t *testing.T) {
		after := filepath.Join(dir, "after.yaml")
		writeFile(t, after, faultManifest(t, "after", nil, ""))
		waitStatus(t, after, "after", 10*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	})

	t.Run("removing the bad files clears every report", func(t *testing.T) {
		for _, r := range rows {
			must(t, os.Remove(filepath.Join(dir, r.file)))
		}
		for _, r := range rows {
			path := filepath.Join(dir, r.file)
			waitFor(t, 10*time.Second, "tether_manifest_errors of "+r.file+" gone", func() (bool, string) {
				v := manifestErrors(t, ep, path)
				return v <= 0, fmt.Sprint(v)
			})
			if r.name != "" {
				waitFor(t, 10*time.Second, "the status file of "+r.file+" gone", func() (bool, string) {
					_, err := os.Stat(strings.TrimSuffix(path, ".yaml") + ".status.yaml")
					return os.IsNotExist(err), fmt.Sprint(err)
				})
			}
		}
	})
}

// TestFaultFileStorms: 500 manifests moved in at once and removed at once,
// and 50 rapid edits of one file (docs/reliability.md, rows F7–F8).
func TestFaultFileStorms(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	dir, staging := t.TempDir(), t.TempDir()
	rapid := filepath.Join(dir, "rapid.yaml")
	version := func(i int) string {
		return faultManifest(t, "rapid", []string{"-stderr-line", fmt.Sprintf("version %d", i)}, quickBackoff)
	}
	writeFile(t, rapid, version(0))
	tt := startTether(t, dir)
	waitStatus(t, rapid, "rapid", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))

	t.Run("F7 500 files moved in at once", func(t *testing.T) {
		const n = 500
		for i := range n {
			writeFile(t, filepath.Join(staging, fmt.Sprintf("m%03d.yaml", i)),
				stdioManifest(fmt.Sprintf("m%03d", i), "srv", nil, "  suspend: true\n"))
		}
		start := time.Now()
		for i := range n {
			name := fmt.Sprintf("m%03d.yaml", i)
			must(t, os.Rename(filepath.Join(staging, name), filepath.Join(dir, name)))
		}
		for i := range n {
			waitStatus(t, filepath.Join(dir, fmt.Sprintf("m%03d.yaml", i)), fmt.Sprintf("m%03d", i), 30*time.Second,
				"Suspended", phaseIs(spec.PhaseSuspended))
		}
		t.Logf("%d moved-in manifests had status within %v", n, time.Since(start).Round(time.Millisecond))

		start = time.Now()
		for i := range n {
			must(t, os.Remove(filepath.Join(dir, fmt.Sprintf("m%03d.yaml", i))))
		}
		waitFor(t, 30*time.Second, "every status file of the removed manifests gone", func() (bool, string) {
			left, _ := filepath.Glob(filepath.Join(dir, "m*.status.yaml"))
			return len(left) == 0, fmt.Sprintf("%d left", len(left))
		})
		t.Logf("%d removals were reflected within %v", n, time.Since(start).Round(time.Millisecond))
	})

	t.Run("F8 50 rapid edits of one file", func(t *testing.T) {
		for i := 1; i <= 50; i++ {
			writeFile(t, rapid, version(i))
		}
		last := spec.DecodeFile(rapid, []byte(version(50)))[0].Conn.Spec.Hash()
		st := waitStatus(t, rapid, "rapid", 30*time.Second, "Connected with the last edit", func(st spec.ConnectionStatus) bool {
			return st.Phase == spec.PhaseConnected && st.ObservedSpecHash == last && st.Process != nil &&
				len(st.Process.StderrTail) > 0 && st.Process.StderrTail[len(st.Process.StderrTail)-1] == "version 50"
		})
		// Exactly one child runs for the connection: no attempt of an older
		// edit was left behind.
		waitFor(t, 10*time.Second, "one child for rapid", func() (bool, string) {
			var kids []int
			for _, c := range childrenOf(tt.cmd.Process.Pid) {
				b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", c))
				if strings.Contains(string(b), "-stderr-line") {
					kids = append(kids, c)
				}
			}
			return len(kids) == 1 && kids[0] == st.Process.PID, fmt.Sprintf("children %v, status pid %d", kids, st.Process.PID)
		})
	})
}
