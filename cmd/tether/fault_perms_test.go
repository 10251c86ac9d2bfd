//go:build unix

package main

import (
	"bytes"
	"fmt"
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

// nobody is the user the permission tests run tether as when they run as
// root, for whom file modes mean nothing.
const nobody = 65534

// unprivileged prepares a directory an unprivileged tether can use and
// returns it with the credential to run tether with (nil when the test does
// not run as root: file modes bind the test's own user then).
func unprivileged(t *testing.T) (string, *syscall.Credential) {
	t.Helper()
	if os.Getuid() != 0 {
		return t.TempDir(), nil
	}
	// t.TempDir's parent is private to root: make one nobody can reach.
	dir, err := os.MkdirTemp("", "tether-fault-perms-")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chown(dir, nobody, nobody))
	// The built binaries live in a private temporary directory too.
	must(t, os.Chmod(builtBinaries(t), 0o755))
	return dir, &syscall.Credential{Uid: nobody, Gid: nobody}
}

// mkdirAs creates a directory owned by the user tether runs as.
func mkdirAs(t *testing.T, path string, cred *syscall.Credential) {
	t.Helper()
	must(t, os.MkdirAll(path, 0o755))
	if cred != nil {
		must(t, os.Chown(path, int(cred.Uid), int(cred.Gid)))
	}
}

// startTetherAs is startTether as another user (cred may be nil).
func startTetherAs(t *testing.T, cred *syscall.Credential, dir string, extra ...string) *tether {
	t.Helper()
	bin := builtBinaries(t)
	args := append([]string{"run", "--dir", dir, "--listen", "", "--log-level", "debug"}, extra...)
	cmd := exec.Command(filepath.Join(bin, "tether"), args...)
	if cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	}
	tt := startCmd(t, cmd, dir)
	return tt
}

// TestFaultUnreadableFile: a manifest tether may not read (docs/
// reliability.md, row F12). A working connection whose file becomes
// unreadable keeps running on its last valid spec and says why; a file that
// was never readable is reported; tether carries on.
func TestFaultUnreadableFile(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	base, cred := unprivileged(t)
	dir := filepath.Join(base, "manifests")
	mkdirAs(t, dir, cred)
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, faultManifest(t, "good", nil, quickBackoff))
	tt := startTetherAs(t, cred, dir, "--metrics-addr", "")
	st := waitStatus(t, good, "good", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid := st.Process.PID

	must(t, os.Chmod(good, 0o000))
	st = waitStatus(t, good, "good", 10*time.Second, "manifestError", func(st spec.ConnectionStatus) bool { return st.ManifestError != "" })
	if !strings.Contains(st.ManifestError, "permission denied") || !strings.Contains(st.ManifestError, "good.yaml") {
		t.Errorf("manifestError %q does not say the file cannot be read", st.ManifestError)
	}
	if st.Phase != spec.PhaseConnected || st.Process.PID != pid {
		t.Errorf("an unreadable file disturbed the connection: %s, pid %d→%d", st.Phase, pid, st.Process.PID)
	}

	never := filepath.Join(dir, "never.yaml")
	writeFile(t, never, faultManifest(t, "never", nil, ""))
	must(t, os.Chmod(never, 0o000))
	tt.waitLogLine(t, 10*time.Second, "invalid manifest", "never.yaml", "permission denied")

	must(t, os.Chmod(good, 0o644))
	st = waitStatus(t, good, "good", 10*time.Second, "manifestError cleared", func(st spec.ConnectionStatus) bool { return st.ManifestError == "" })
	if st.Process.PID != pid {
		t.Errorf("a readable file again reconnected: pid %d→%d", pid, st.Process.PID)
	}
	must(t, os.Chmod(never, 0o644))
	waitStatus(t, never, "never", 10*time.Second, "Connected", phaseIs(spec.PhaseConnected))
}

// TestFaultStatusDirReadOnly: a status directory tether cannot write to
// (docs/reliability.md, row F13): reported in the log and in
// tether_reconcile_total{result="error"}, retried with backoff, never fatal
// (the connection runs, the gateway serves it), and written once it can be:
// the Invalid status of a rejected document too, which no reconcile retries.
func TestFaultStatusDirReadOnly(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	base, cred := unprivileged(t)
	dir, statusDir := filepath.Join(base, "manifests"), filepath.Join(base, "status")
	mkdirAs(t, dir, cred)
	mkdirAs(t, statusDir, cred)
	must(t, os.Chmod(statusDir, 0o555))
	writeFile(t, filepath.Join(dir, "ro.yaml"), faultManifest(t, "ro", nil, ""))
	mp := testport.Free(t)
	tt := startTetherAs(t, cred, dir, "--status-dir", statusDir, "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mp))
	waitTCP(t, mp, 20*time.Second)
	ep := endpoints{metrics: fmt.Sprintf("http://127.0.0.1:%d", mp)}

	tt.waitLogLine(t, 10*time.Second, "reconcile failed", "connection=ro", "permission denied")
	// A second file declaring ro: its Invalid status document has no
	// reconcile to retry it, only the status writer itself.
	writeFile(t, filepath.Join(dir, "twin.yaml"), faultManifest(t, "ro", nil, ""))
	tt.waitLogLine(t, 10*time.Second, "writing the status of rejected manifest documents", "permission denied")
	waitFor(t, 10*time.Second, "the connection up and the failed writes counted", func() (bool, string) {
		body := scrape(t, ep)
		up, _ := metricValue(body, `tether_connection_up{connection="ro"}`)
		errs, _ := metricValue(body, `tether_reconcile_total{result="error"}`)
		return up == 1 && errs >= 2, fmt.Sprintf("up %v, reconcile errors %v", up, errs)
	})
	select {
	case <-tt.done:
		t.Fatalf("tether exited: %v", tt.err)
	default:
	}

	must(t, os.Chmod(statusDir, 0o755))
	start := time.Now()
	waitStatus(t, filepath.Join(statusDir, "ro.yaml"), "ro", 35*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	t.Logf("status written %v after the directory became writable", time.Since(start).Round(time.Millisecond))
	st := waitStatus(t, filepath.Join(statusDir, "twin.yaml"), "ro", 35*time.Second, "Invalid", phaseIs(spec.PhaseInvalid))
	if !strings.Contains(st.ManifestError, "is already declared in") {
		t.Errorf("the rejected document's manifestError %q does not say why", st.ManifestError)
	}
	t.Logf("rejected document's status written %v after the directory became writable", time.Since(start).Round(time.Millisecond))
}

// TestFaultUnreadableDirectory: a directory of the tree tether may not list
// (docs/reliability.md, row F14): a root-owned lost+found at start, and a
// team directory that turns unreadable while its connection runs. Neither
// makes the tree look empty: the rest connects, the running connection keeps
// its child.
func TestFaultUnreadableDirectory(t *testing.T) {
	t.Parallel()
	base, cred := unprivileged(t)
	if cred == nil {
		t.Skip("needs root, to run tether as a user the directory modes bind")
	}
	dir := filepath.Join(base, "manifests")
	mkdirAs(t, dir, cred)
	must(t, os.Mkdir(filepath.Join(dir, "lost+found"), 0o700)) // root's, as mkfs leaves it
	team := filepath.Join(dir, "team")
	mkdirAs(t, team, cred)
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(team, "b.yaml")
	writeFile(t, a, faultManifest(t, "a", nil, quickBackoff))
	writeFile(t, b, faultManifest(t, "b", nil, quickBackoff))
	tt := startTetherAs(t, cred, dir, "--metrics-addr", "")
	waitStatus(t, a, "a", 15*time.Second, "Connected beside an unreadable lost+found", phaseIs(spec.PhaseConnected))
	st := waitStatus(t, b, "b", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	pid := st.Process.PID

	must(t, os.Chmod(team, 0o000))
	t.Cleanup(func() { os.Chmod(team, 0o755) })
	// Make tether re-list: a change elsewhere in the tree.
	writeFile(t, filepath.Join(dir, "c.yaml"), faultManifest(t, "c", nil, quickBackoff))
	waitStatus(t, filepath.Join(dir, "c.yaml"), "c", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	tt.waitLogLine(t, 10*time.Second, "cannot list a directory", "team")
	if !processAlive(pid) {
		t.Errorf("the child of b (pid %d) was stopped when its directory became unreadable", pid)
	}
	if st, _ := readStatus(t, a, "a"); st.Phase != spec.PhaseConnected {
		t.Errorf("a is %s after another directory became unreadable", st.Phase)
	}
}

// processAlive reports whether pid runs (exists and is no zombie).
func processAlive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}
