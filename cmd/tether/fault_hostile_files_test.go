//go:build unix

package main

// Hostile files (docs/reliability.md, rows HF1–HF6): files planted in the
// watched tree, its status files and the state directory that are not what
// tether expects (a FIFO, a link to /dev/zero, a directory others can
// write). Each is refused with an error naming it, never a hang or a read
// without end, and never stops the rest.

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// hangGuard bounds a command that must return promptly: if the bug is back
// it hangs, and the test fails instead of the test binary timing out. It
// is no assertion of speed.
const hangGuard = time.Minute

func mkfifo(t *testing.T, path string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, syscall.Mkfifo(path, 0o644))
}

func symlinkDevZero(t *testing.T, path string) {
	t.Helper()
	must(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must(t, os.Symlink("/dev/zero", path))
}

// waitReady waits for /readyz to answer 200.
func waitReady(t *testing.T, ep endpoints) {
	t.Helper()
	waitFor(t, 20*time.Second, "/readyz 200", func() (bool, string) {
		code, body, err := get(ep.metrics + "/readyz")
		return code == 200, body + errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return " " + err.Error()
}

// runTetherCmd runs the tether binary with args, bounded by hangGuard, and
// returns its exit code and output.
func runTetherCmd(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(builtBinaries(t), "tether"), args...).CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("tether %s hung (killed after %v):\n%s", strings.Join(args, " "), hangGuard, out)
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// TestHostileIgnoreFiles (HF1): a .tetherignore that is a FIFO hung
// start-up (nothing connected, /readyz 503, nothing logged) and tether
// validate; one linked to /dev/zero was read without end. Now each is
// logged as unusable, its directory is listed without its rules, the other
// manifests connect, /readyz turns ready, tether get warns and validate
// reports both.
func TestHostileIgnoreFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, ".tetherignore")
	zero := filepath.Join(dir, "team", ".tetherignore")
	mkfifo(t, fifo)
	symlinkDevZero(t, zero)
	root := filepath.Join(dir, "root.yaml")
	team := filepath.Join(dir, "team", "team.yaml")
	writeFile(t, root, faultManifest(t, "root", nil, quickBackoff))
	writeFile(t, team, faultManifest(t, "team", nil, quickBackoff))

	tt, ep := startTetherServing(t, dir)
	for _, f := range []struct{ file, what string }{{fifo, "a named pipe"}, {zero, "a device"}} {
		tt.waitLogLine(t, 20*time.Second, "cannot use an ignore file", f.file, "not a regular file ("+f.what+")")
	}
	waitStatus(t, root, "root", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	waitStatus(t, team, "team", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	waitReady(t, ep)

	code, out := runTetherCmd(t, "get", "--dir", dir)
	if code != 0 || !strings.Contains(out, fifo+": cannot use this ignore file: not a regular file (a named pipe)") {
		t.Errorf("tether get exited %d, without a warning about %s:\n%s", code, fifo, out)
	}

	code, out = runTetherCmd(t, "validate", dir)
	if code != 1 {
		t.Errorf("tether validate exited %d, want 1:\n%s", code, out)
	}
	for _, want := range []string{
		fifo + ": cannot use this ignore file: not a regular file (a named pipe)",
		zero + ": cannot use this ignore file: not a regular file (a device)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("tether validate does not say %q:\n%s", want, out)
		}
	}
}

// TestHostileStatusFiles (HF2): a status file linked to /dev/zero (or a
// FIFO) was read without end (or forever) by tether run's first write
// and by tether get. tether run now replaces it with the real status;
// tether get shows the connection and says what is wrong with the file.
func TestHostileStatusFiles(t *testing.T) {
	t.Run("tether run", func(t *testing.T) {
		dir := t.TempDir()
		zeroM := filepath.Join(dir, "zero.yaml")
		fifoM := filepath.Join(dir, "fifo.yaml")
		writeFile(t, zeroM, faultManifest(t, "zero", nil, quickBackoff))
		writeFile(t, fifoM, faultManifest(t, "fifo", nil, quickBackoff))
		symlinkDevZero(t, filepath.Join(dir, "zero.status.yaml"))
		mkfifo(t, filepath.Join(dir, "fifo.status.yaml"))
		_, ep := startTetherServing(t, dir)
		for _, m := range []string{zeroM, fifoM} {
			status := strings.TrimSuffix(m, ".yaml") + ".status.yaml"
			// Not read until it is a regular file: the test's own reader
			// would meet the same /dev/zero.
			waitFor(t, 20*time.Second, status+" replaced by a regular file", func() (bool, string) {
				fi, err := os.Lstat(status)
				return err == nil && fi.Mode().IsRegular(), ""
			})
			name := strings.TrimSuffix(filepath.Base(m), ".yaml")
			waitStatus(t, m, name, 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		}
		waitReady(t, ep)
	})
	t.Run("tether get", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "zero.yaml"), stdioManifest("zero", "srv", nil, ""))
		writeFile(t, filepath.Join(dir, "fifo.yaml"), stdioManifest("fifo", "srv", nil, ""))
		symlinkDevZero(t, filepath.Join(dir, "zero.status.yaml"))
		mkfifo(t, filepath.Join(dir, "fifo.status.yaml"))
		code, out := runTetherCmd(t, "get", "--dir", dir)
		if code != 0 {
			t.Errorf("tether get exited %d:\n%s", code, out)
		}
		for _, want := range []string{
			filepath.Join(dir, "zero.status.yaml") + ": cannot read status file: not a regular file (a device)",
			filepath.Join(dir, "fifo.status.yaml") + ": cannot read status file: not a regular file (a named pipe)",
			"zero ", "fifo ",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("tether get does not say %q:\n%s", want, out)
			}
		}
	})
}

// TestHostileSecretFile (HF3): a valueFrom.file that is a FIFO held the
// connection in Connecting until --connect-timeout (here far longer than
// the test waits). Now the attempt fails at once with an error naming the
// file, and the connection beside it connects.
func TestHostileSecretFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "secrets", "token")
	mkfifo(t, fifo)
	victim := filepath.Join(dir, "victim.yaml")
	writeFile(t, victim, faultManifest(t, "victim", nil,
		"    env: [{name: TOKEN, valueFrom: {file: secrets/token}}]\n"+quickBackoff))
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, faultManifest(t, "good", nil, quickBackoff))
	_, ep := startTetherServing(t, dir, "--connect-timeout", "10m")
	want := "valueFrom.file: open " + fifo + ": not a regular file (a named pipe)"
	waitStatus(t, victim, "victim", 20*time.Second, "the FIFO refused", func(st spec.ConnectionStatus) bool {
		return st.Phase != spec.PhaseConnecting && strings.Contains(st.LastError, want)
	})
	waitStatus(t, good, "good", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	waitReady(t, ep)
}

// TestHostileStateDir (HF4): a pre-created state directory that others can
// write, holding a planted specs/victim.json whose command makes a marker
// file, while victim.yaml is invalid. The planted spec was taken as the
// last valid one and its command ran. Now the directory is refused with an
// error naming it, victim is Invalid (no spec is taken from it), and the
// marker never appears.
func TestHostileStateDir(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(t.TempDir(), "planted-command-ran")
	state := filepath.Join(dir, ".tether")
	must(t, os.MkdirAll(filepath.Join(state, "specs"), 0o777))
	must(t, os.Chmod(state, 0o777))
	planted := stdioManifest("victim", "/bin/sh", []string{"-c", "touch " + marker + "; exec " + faultServer(t)}, "")
	writeFile(t, filepath.Join(state, "specs", "victim.json"),
		`{"origin":"`+filepath.Join(dir, "victim.yaml")+`","index":0,"dir":"`+dir+`","manifest":`+jsonString(planted)+`}`)
	victim := filepath.Join(dir, "victim.yaml")
	writeFile(t, victim, stdioManifest("victim", "srv", nil, "  helthCheck: {interval: 1s}\n"))
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, faultManifest(t, "good", nil, quickBackoff))

	tt, ep := startTetherServing(t, dir)
	tt.waitLogLine(t, 20*time.Second, "running without a state directory", "state directory "+state+" is refused",
		"writable by group or others (mode 0777)")
	// With the planted spec taken, victim would run it and show Connected.
	// Its status says what kept it from a last valid spec.
	waitStatus(t, victim, "victim", 20*time.Second, "Invalid, naming the refused state directory", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseInvalid && containsAll(st.ManifestError, "spec.helthCheck: unknown field",
			"(no last valid spec is kept: state directory "+state+" is refused", "writable by group or others (mode 0777)")
	})
	waitStatus(t, good, "good", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	waitReady(t, ep)
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("the planted command ran: %s exists", marker)
	}
}

// TestStaleTemporaries (HF5): the temporaries a tether killed while it
// wrote leaves (atomicfile's exact pattern) are removed at start, in the
// status directories and the state directory; files that merely look like
// them are left alone.
func TestStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, faultManifest(t, "good", nil, quickBackoff))
	state := filepath.Join(dir, ".tether")
	must(t, os.MkdirAll(filepath.Join(state, "specs"), 0o700))
	stale := []string{
		filepath.Join(dir, ".good.status.yaml.tmp-2984351012"),
		filepath.Join(dir, "team", ".x.status.yaml.tmp-7"),
		filepath.Join(state, "specs", ".good.json.tmp-123"),
	}
	foreign := []string{
		filepath.Join(dir, ".good.status.yaml.tmp-2984351012.orig"),
		filepath.Join(dir, ".good.yaml.tmp-55"), // an editor's, not tether's
		filepath.Join(dir, "team", ".x.status.yaml.tmp-7x"),
		filepath.Join(state, "specs", ".good.json.tmp-99999999999"),
	}
	for _, p := range append(append([]string{}, stale...), foreign...) {
		writeFile(t, p, "partial")
	}
	must(t, os.Chmod(filepath.Join(state, "specs", ".good.json.tmp-123"), 0o600))
	tt, _ := startTetherServing(t, dir)
	tt.waitLogLine(t, 20*time.Second, "removed temporary status files a previous tether left")
	tt.waitLogLine(t, 20*time.Second, "removed temporary files a previous tether left in the state directory")
	waitStatus(t, good, "good", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	for _, p := range stale {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("stale temporary %s is still there", p)
		}
	}
	for _, p := range foreign {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s is not tether's and was removed: %v", p, err)
		}
	}
}

func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestHostileGroupRecord (HF4): a record planted in an accepted state
// directory's groups/ that names a living process group of tether's user,
// as a previous tether's leftover would be named, but that group or others
// may write (or another user owns) is ignored and removed, with a warning
// naming it: tether does not stop that group at start.
func TestHostileGroupRecord(t *testing.T) {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Skip("no /proc/sys/kernel/random/boot_id")
	}
	gone := exec.Command("true") // plays the tether that recorded the group, gone
	must(t, gone.Run())
	dir := t.TempDir()
	groups := filepath.Join(dir, ".tether", "groups")
	must(t, os.MkdirAll(groups, 0o700))
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, faultManifest(t, "good", nil, quickBackoff))

	var victims []int
	plant := func(fix func(path string) error) {
		c := exec.Command("sleep", "300")
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		must(t, c.Start())
		pid := c.Process.Pid
		done := make(chan struct{})
		go func() { _ = c.Wait(); close(done) }()
		t.Cleanup(func() { _ = syscall.Kill(-pid, syscall.SIGKILL); <-done })
		rec, err := json.Marshal(map[string]any{
			"pgid": pid, "leaderStart": procStartTicks(t, pid), "bootID": strings.TrimSpace(string(boot)),
			"tether": gone.Process.Pid, "recordedTicks": procUptimeTicks(t),
		})
		must(t, err)
		p := filepath.Join(groups, strconv.Itoa(pid)+".json")
		writeFile(t, p, string(rec))
		must(t, fix(p))
		victims = append(victims, pid)
	}
	plant(func(p string) error { return os.Chmod(p, 0o620) })
	want := []string{"writable by group or others (mode 0620)"}
	if os.Geteuid() == 0 {
		plant(func(p string) error { return os.Chmod(p, 0o600) })
		must(t, os.Chown(filepath.Join(groups, strconv.Itoa(victims[1])+".json"), 4242, -1))
		want = append(want, "owned by uid 4242")
	}

	tt, _ := startTetherServing(t, dir)
	for _, w := range want {
		tt.waitLogLine(t, 20*time.Second, "ignoring an unreadable process-group record", w)
	}
	// The leftovers are stopped before anything starts: once good runs,
	// tether has judged every record.
	waitStatus(t, good, "good", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	for _, pid := range victims {
		if err := syscall.Kill(-pid, 0); err != nil {
			t.Errorf("the process group %d named by an untrusted record was stopped: %v", pid, err)
		}
	}
}

// procStartTicks is pid's start time in clock ticks after boot, field 22
// of /proc/PID/stat (after the command name, which may hold spaces).
func procStartTicks(t *testing.T, pid int) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	must(t, err)
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	n, err := strconv.ParseUint(f[19], 10, 64)
	must(t, err)
	return n
}

// procUptimeTicks is the time since boot in clock ticks (USER_HZ, 100).
func procUptimeTicks(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/uptime")
	must(t, err)
	secs, err := strconv.ParseFloat(strings.Fields(string(b))[0], 64)
	must(t, err)
	return uint64(secs * 100)
}
