//go:build linux

package main

// The kernel sandbox of stdio servers (docs/security.md), end to end: a
// hostile server (testdata/hostileserver) tries, through the real gateway,
// what a malicious server would; under spec.stdio.sandbox the kernel
// refuses each attempt and the server keeps serving; without it the same
// attempts succeed, which is what makes the test worth something.

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/sandbox"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// requireSandbox skips a test on a kernel without what the sandbox tests
// use (Landlock ABI 6, the seccomp filter, unprivileged user namespaces),
// and fails it there under CI=true, whose machines have all three.
func requireSandbox(t testing.TB) {
	t.Helper()
	problem := ""
	if abi := sandbox.ABI(); abi < 6 {
		problem = fmt.Sprintf("the kernel's Landlock ABI is %d, the tests need 6", abi)
	} else if !sandbox.DetectKernel().Seccomp {
		problem = "the kernel does not take the launcher's seccomp filter (or there is none for " + runtime.GOARCH + ")"
	} else if out, err := exec.Command("unshare", "-U", "-n", "true").CombinedOutput(); err != nil {
		problem = fmt.Sprintf("no unprivileged user and network namespaces (unshare -U -n: %v %s)", err, out)
	}
	if problem == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(problem)
	}
	t.Skip(problem)
}

// bestEffortHere is what the tests' policies need to start on this kernel,
// and what status.sandbox then says: before Landlock ABI 9 no policy is
// enforced fully (a Unix socket file outside the grants stays open to
// connect: docs/security.md) unless the seccomp filter refuses Unix
// sockets, and before ABI 6 none is (signal scoping); there they accept
// less.
func bestEffortHere() (need bool, suffix string) {
	if k := sandbox.DetectKernel(); k.ABI >= 9 || (k.ABI >= 6 && k.Seccomp) {
		return false, ""
	}
	return true, " (best effort)"
}

// policyHere is "    sandbox: {FIELDS}\n", with bestEffort where this
// kernel needs it (bestEffortHere).
func policyHere(fields string) string {
	if need, _ := bestEffortHere(); need {
		fields = strings.TrimPrefix(fields+", bestEffort: true", ", ")
	}
	return "    sandbox: {" + fields + "}\n"
}

// hostileServer builds testdata/hostileserver once per test binary.
func hostileServer(t testing.TB) string {
	t.Helper()
	requireSandbox(t)
	return testdataServer(t, "hostileserver")
}

// listenLoopback accepts (and closes) TCP connections on a loopback port
// until the test ends, and returns the port.
func listenLoopback(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

// sandboxHome is a test HOME with a private key in ~/.ssh.
func sandboxHome(t *testing.T) (home, key string) {
	t.Helper()
	home = t.TempDir()
	must(t, os.MkdirAll(filepath.Join(home, ".ssh"), 0o700))
	key = filepath.Join(home, ".ssh", "id_ed25519")
	must(t, os.WriteFile(key, []byte("-----BEGIN OPENSSH PRIVATE KEY----- test key\n"), 0o600))
	return home, key
}

// startSandboxTether runs tether with HOME set to home and its gateway on.
func startSandboxTether(t *testing.T, dir, home string, extra ...string) (*tether, endpoints) {
	t.Helper()
	gw := testport.Free(t)
	args := append([]string{"--listen", fmt.Sprintf("127.0.0.1:%d", gw)}, extra...)
	tt := startTetherWithEnv(t, dir, []string{"HOME=" + home}, args...)
	waitTCP(t, gw, 20*time.Second)
	return tt, endpoints{gateway: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)}
}

// attempt calls tool and returns its answer text, failing the test when the
// call itself fails (the server must keep serving).
func attempt(t *testing.T, s *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := call(s, 20*time.Second, tool, args)
	if err != nil {
		t.Fatalf("%s %v: the call failed (the server should answer): %v", tool, args, err)
	}
	return textOf(res)
}

func expectPrefix(t *testing.T, what, got, prefix string) {
	t.Helper()
	if !strings.HasPrefix(got, prefix) {
		if len(got) > 200 {
			got = got[:200] + "…"
		}
		t.Errorf("%s: got %q, want it to start with %q", what, got, prefix)
	}
}

func TestSandboxRefusesAHostileServer(t *testing.T) {
	bin := hostileServer(t)
	home, key := sandboxHome(t)
	granted, other := listenLoopback(t), listenLoopback(t)
	dir := t.TempDir()
	allowed := filepath.Join(dir, ".allowed") // hidden: tether reads no manifest there
	must(t, os.Mkdir(allowed, 0o700))
	// connect needs bestEffort on a kernel before Landlock ABI 10, which
	// leaves UDP open (the test kernel has ABI 7; docs/security.md).
	confined := fmt.Sprintf("    sandbox:\n      write: [%q]\n      network: connect\n      connect: [\"%d\"]\n      bestEffort: true\n", allowed, granted)
	writeFile(t, filepath.Join(dir, "confined.yaml"), stdioManifest("confined", bin, nil, confined))
	writeFile(t, filepath.Join(dir, "offline.yaml"), stdioManifest("offline", bin, nil, policyHere("")))
	writeFile(t, filepath.Join(dir, "open.yaml"), stdioManifest("open", bin, nil, ""))
	// tether inherits the private key open as descriptor 3, as from a
	// careless parent (no close-on-exec): Landlock does not check what is
	// already open.
	keyFile, err := os.Open(key)
	must(t, err)
	defer keyFile.Close()
	gw := testport.Free(t)
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), "run", "--dir", dir, "--metrics-addr", "", "--log-level", "debug", "--listen", fmt.Sprintf("127.0.0.1:%d", gw))
	cmd.Env = append(os.Environ(), "HOME="+home)
	cmd.ExtraFiles = []*os.File{keyFile}
	startCmd(t, cmd, dir)
	waitTCP(t, gw, 20*time.Second)
	ep := endpoints{gateway: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)}
	for _, name := range []string{"confined", "offline", "open"} {
		waitStatus(t, filepath.Join(dir, name+".yaml"), name, 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	}
	s := connectClient(t, ep)
	outside := filepath.Join(home, "outside.txt")
	// A Unix socket file outside every grant (a D-Bus bus, docker.sock).
	sock := filepath.Join(t.TempDir(), "bus")
	ul, err := net.Listen("unix", sock)
	must(t, err)
	defer ul.Close()
	go func() {
		for {
			c, err := ul.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	grantedAddr, otherAddr := fmt.Sprintf("127.0.0.1:%d", granted), fmt.Sprintf("127.0.0.1:%d", other)

	// Without a sandbox, every attempt succeeds: the attempts are real.
	expectPrefix(t, "open: read ~/.ssh/id_ed25519", attempt(t, s, "open_read_file", map[string]any{"path": key}), "ok: -----BEGIN OPENSSH PRIVATE KEY")
	expectPrefix(t, "open: write outside", attempt(t, s, "open_write_file", map[string]any{"path": outside}), "ok: ")
	expectPrefix(t, "open: connect to a loopback port", attempt(t, s, "open_connect", map[string]any{"addr": otherAddr}), "ok: ")
	expectPrefix(t, "open: signal tether", attempt(t, s, "open_signal_parent", nil), "ok: ")
	expectPrefix(t, "open: send UDP", attempt(t, s, "open_send_udp", map[string]any{"addr": grantedAddr}), "ok: ")
	if got := attempt(t, s, "open_interfaces", nil); !strings.Contains(got, "lo") {
		t.Errorf("open: interfaces up = %q, want the host's, lo among them", got)
	}
	// tether's working directory (this package's, under go test) is where
	// a server without workingDir runs.
	expectPrefix(t, "open: read in tether's working directory", attempt(t, s, "open_read_file", map[string]any{"path": "sandbox_e2e_test.go"}), "ok: ")
	expectPrefix(t, "open: connect to a Unix socket file", attempt(t, s, "open_connect_unix", map[string]any{"path": sock}), "ok: ")
	expectPrefix(t, "open: set up an io_uring", attempt(t, s, "open_io_uring", nil), "ok: ")
	expectPrefix(t, "open: read a descriptor tether inherited", attempt(t, s, "open_read_fd", map[string]any{"fd": 3}), "ok: -----BEGIN OPENSSH PRIVATE KEY")
	must(t, os.Remove(outside))

	// Under the sandbox each is refused, and what is granted still works.
	expectPrefix(t, "confined: read ~/.ssh/id_ed25519", attempt(t, s, "confined_read_file", map[string]any{"path": key}), "refused: ")
	expectPrefix(t, "confined: write outside its grant", attempt(t, s, "confined_write_file", map[string]any{"path": outside}), "refused: ")
	if _, err := os.Stat(outside); !os.IsNotExist(err) {
		t.Errorf("confined: %s exists after a refused write (%v)", outside, err)
	}
	// What Landlock does not check (docs/security.md): a file's metadata.
	// The key's mode is 0600 already, so the attempt changes nothing.
	expectPrefix(t, "confined: chmod ~/.ssh/id_ed25519 (Landlock does not hold it)", attempt(t, s, "confined_chmod", map[string]any{"path": key}), "ok: ")
	expectPrefix(t, "confined: write inside its grant", attempt(t, s, "confined_write_file", map[string]any{"path": filepath.Join(allowed, "f")}), "ok: ")
	expectPrefix(t, "confined: connect to a port not granted", attempt(t, s, "confined_connect", map[string]any{"addr": otherAddr}), "refused: ")
	expectPrefix(t, "confined: connect to the granted port", attempt(t, s, "confined_connect", map[string]any{"addr": grantedAddr}), "ok: ")
	// What connect does not hold (docs/security.md): Multipath TCP, on a
	// kernel that has it enabled, which is why such a policy needs
	// bestEffort there (TestSandboxUnsupportedIsStalled).
	if sandbox.DetectKernel().MPTCP {
		expectPrefix(t, "confined: MPTCP to a port not granted (Landlock does not hold it)", attempt(t, s, "confined_connect_mptcp", map[string]any{"addr": otherAddr}), "ok: connected to "+otherAddr+" (multipath: true)")
	}
	expectPrefix(t, "confined: read a descriptor tether inherited", attempt(t, s, "confined_read_fd", map[string]any{"fd": 3}), "refused: ")
	expectPrefix(t, "offline: read a descriptor tether inherited", attempt(t, s, "offline_read_fd", map[string]any{"fd": 3}), "refused: ")
	// Before Landlock ABI 9 a socket file is out of Landlock's sight: the
	// seccomp filter refuses the socket (EACCES), and io_uring, whose
	// socket and connect operations it would not see (EPERM).
	unixWant, uringWant := "refused: ", "refused: "
	if k := sandbox.DetectKernel(); k.Seccomp {
		unixWant, uringWant = "refused: dial unix "+sock+": socket: permission denied", "refused: operation not permitted"
	} else if k.ABI < 9 {
		unixWant, uringWant = "ok: ", "ok: "
	}
	expectPrefix(t, "confined: connect to a Unix socket file", attempt(t, s, "confined_connect_unix", map[string]any{"path": sock}), unixWant)
	expectPrefix(t, "offline: connect to a Unix socket file", attempt(t, s, "offline_connect_unix", map[string]any{"path": sock}), unixWant)
	expectPrefix(t, "confined: set up an io_uring", attempt(t, s, "confined_io_uring", nil), uringWant)
	expectPrefix(t, "offline: set up an io_uring", attempt(t, s, "offline_io_uring", nil), uringWant)
	expectPrefix(t, "confined: signal tether", attempt(t, s, "confined_signal_parent", nil), "refused: ")
	expectPrefix(t, "confined: read in tether's working directory", attempt(t, s, "confined_read_file", map[string]any{"path": "sandbox_e2e_test.go"}), "refused: ")

	// Capabilities: a root tether's (CI's, a container's) are the
	// unconfined server's, CAP_SYS_MODULE included, past any Landlock
	// rule; a confined server has none, and no bounding or inheritable set
	// to regain them by an exec as uid 0, in a namespace of its own or not.
	noCaps := "ok: effective=0 permitted=0 inheritable=0 ambient=0 "
	if os.Getuid() == 0 {
		if got := attempt(t, s, "open_capabilities", nil); strings.HasPrefix(got, noCaps) {
			t.Errorf("open: capabilities as root = %q, want some (the attempt is real)", got)
		}
		noCaps += "bounding=0"
	}
	expectPrefix(t, "confined: capabilities", attempt(t, s, "confined_capabilities", nil), noCaps)
	expectPrefix(t, "offline: capabilities", attempt(t, s, "offline_capabilities", nil), noCaps)

	// network none: its own empty network namespace.
	expectPrefix(t, "offline: connect to a loopback port", attempt(t, s, "offline_connect", map[string]any{"addr": grantedAddr}), "refused: ")
	expectPrefix(t, "offline: send UDP", attempt(t, s, "offline_send_udp", map[string]any{"addr": grantedAddr}), "refused: ")
	if got := attempt(t, s, "offline_interfaces", nil); got != "ok: []" {
		t.Errorf("offline: interfaces up = %q, want none", got)
	}
	expectPrefix(t, "offline: read ~/.ssh/id_ed25519", attempt(t, s, "offline_read_file", map[string]any{"path": key}), "refused: ")

	// Every server kept serving, in its first process, and says what
	// confines it.
	_, suffix := bestEffortHere()
	for name, want := range map[string]string{"confined": "landlock fs+net", "offline": "landlock fs+netns none" + suffix, "open": ""} {
		st, _ := readStatus(t, filepath.Join(dir, name+".yaml"), name)
		if st.Phase != spec.PhaseConnected || st.Process == nil || st.Process.Restarts != 0 {
			t.Errorf("%s: phase %s, process %+v: want Connected, never restarted", name, st.Phase, st.Process)
		}
		// offline's policy is one a kernel with Landlock ABI 9 enforces
		// fully: no "(best effort)" there; confined's connect is best
		// effort where UDP or MPTCP escape Landlock.
		if !strings.HasPrefix(st.Sandbox, want) || (name != "confined" && st.Sandbox != want) {
			t.Errorf("%s: status.sandbox = %q, want %q", name, st.Sandbox, want)
		}
	}
}

// TestSandboxLoopbackLimitsAndTmp: network loopback is a namespace with
// only its own lo (the host's loopback services are out of reach); the
// limits are the server's, hard; the workingDir the manifest sets is
// readable; the private TMPDIR is writable and goes with the process.
func TestSandboxLoopbackLimitsAndTmp(t *testing.T) {
	bin := hostileServer(t)
	home, _ := sandboxHome(t)
	hostPort := listenLoopback(t)
	dir := t.TempDir()
	work := t.TempDir()
	writeFile(t, filepath.Join(work, "notes.txt"), "the working directory's\n")
	policy := fmt.Sprintf("    workingDir: %q\n", work) + policyHere("network: loopback, limits: {memory: 4Gi, processes: 4000, openFiles: 64}")
	manifest := filepath.Join(dir, "lo.yaml")
	writeFile(t, manifest, stdioManifest("lo", bin, nil, policy))
	_, ep := startSandboxTether(t, dir, home)
	st := waitStatus(t, manifest, "lo", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if _, suffix := bestEffortHere(); st.Sandbox != "landlock fs+netns loopback"+suffix {
		t.Errorf("status.sandbox = %q", st.Sandbox)
	}
	s := connectClient(t, ep)
	if got := attempt(t, s, "lo_interfaces", nil); got != "ok: [lo]" {
		t.Errorf("interfaces up = %q, want lo alone", got)
	}
	expectPrefix(t, "connect to the host's loopback", attempt(t, s, "lo_connect", map[string]any{"addr": fmt.Sprintf("127.0.0.1:%d", hostPort)}), "refused: ")
	if got, want := attempt(t, s, "lo_limits", nil), fmt.Sprintf("ok: as=%d nproc=4000 nofile=64", 4<<30); got != want {
		t.Errorf("limits = %q, want %q", got, want)
	}
	if got := attempt(t, s, "lo_read_file", map[string]any{"path": "notes.txt"}); got != "ok: the working directory's\n" {
		t.Errorf("read in the granted workingDir = %q", got)
	}
	tmp := strings.TrimPrefix(attempt(t, s, "lo_tmpdir", nil), "ok: ")
	if filepath.Dir(tmp) != filepath.Join(dir, ".tether", "sandbox-tmp") || !strings.HasPrefix(filepath.Base(tmp), "tether-sandbox-lo-") {
		t.Fatalf("TMPDIR = %q, want a private tether-sandbox-lo-* directory in the state directory", tmp)
	}
	expectPrefix(t, "write in TMPDIR", attempt(t, s, "lo_write_file", map[string]any{"path": filepath.Join(tmp, "scratch")}), "ok: ")
	expectPrefix(t, "write in the TMPDIR's parent", attempt(t, s, "lo_write_file", map[string]any{"path": filepath.Join(filepath.Dir(tmp), "escaped")}), "refused: ")

	// The connection's removal stops the server and removes its TMPDIR.
	must(t, os.Remove(manifest))
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(tmp); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists after the connection was removed", tmp)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestSandboxUnsupportedIsStalled: a policy the kernel cannot enforce fully
// (Landlock holds ports, not hosts) starts nothing: Stalled, reason
// SandboxUnsupported, saying what is missing; accepting less (bestEffort)
// starts the server and says so.
func TestSandboxUnsupportedIsStalled(t *testing.T) {
	bin := hostileServer(t)
	home, key := sandboxHome(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "h.yaml")
	policy := "    sandbox:\n      network: connect\n      connect: [\"example.com:443\"]\n"
	writeFile(t, manifest, stdioManifest("h", bin, nil, policy))
	_, ep := startSandboxTether(t, dir, home)
	st := waitStatus(t, manifest, "h", 30*time.Second, "Stalled SandboxUnsupported", func(st spec.ConnectionStatus) bool {
		c := conditionOf(st, spec.ConditionStalled)
		return c.Status == spec.ConditionTrue && c.Reason == spec.ReasonSandboxUnsupported
	})
	msg := conditionOf(st, spec.ConditionStalled).Message
	if !strings.Contains(msg, `connect "example.com:443": Landlock filters ports, not hosts`) || !strings.Contains(msg, "bestEffort: true") {
		t.Errorf("Stalled message %q: want what is missing and the way out", msg)
	}
	if sandbox.DetectKernel().MPTCP && !strings.Contains(msg, "Multipath TCP rules") {
		t.Errorf("Stalled message %q: want Multipath TCP named (this kernel has it enabled)", msg)
	}
	if st.Process != nil && st.Process.PID != 0 || st.Sandbox != "" {
		t.Errorf("process %+v, sandbox %q: nothing should run", st.Process, st.Sandbox)
	}

	writeFile(t, manifest, stdioManifest("h", bin, nil, policy+"      bestEffort: true\n"))
	st = waitStatus(t, manifest, "h", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if st.Sandbox != "landlock fs+net (best effort)" {
		t.Errorf("status.sandbox = %q, want best effort said", st.Sandbox)
	}
	if c := conditionOf(st, spec.ConditionStalled); c.Status != spec.ConditionFalse {
		t.Errorf("Stalled = %+v after bestEffort", c)
	}
	expectPrefix(t, "read ~/.ssh/id_ed25519", attempt(t, connectClient(t, ep), "h_read_file", map[string]any{"path": key}), "refused: ")
}

// TestSandboxStartsFromNothing: a policy grants only what it names: every
// grant but the command's, and the launcher cannot run it, and says why.
func TestSandboxStartsFromNothing(t *testing.T) {
	bin := hostileServer(t)
	home, _ := sandboxHome(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "n.yaml")
	writeFile(t, manifest, stdioManifest("n", bin, nil, policyHere("grants: [interpreter, libraries, workingDir, tmp, devices]")+quickBackoff))
	startSandboxTether(t, dir, home)
	waitStatus(t, manifest, "n", 30*time.Second, "the launcher's refusal", func(st spec.ConnectionStatus) bool {
		return strings.Contains(st.LastError, "tether sandbox: exec "+bin+": permission denied (does the policy grant it? grants: command)")
	})
}

// TestSandboxGuardsWhatTetherKeeps: a grant that holds tether's state
// directory (OAuth tokens) fails the start, and so does a write grant that
// holds the manifests, through which a server would write a manifest that
// runs unconfined; each names its field.
func TestSandboxGuardsWhatTetherKeeps(t *testing.T) {
	bin := hostileServer(t)
	home, _ := sandboxHome(t)
	dir := t.TempDir()
	reads, writes := filepath.Join(dir, "reads.yaml"), filepath.Join(dir, "writes.yaml")
	writeFile(t, reads, stdioManifest("reads", bin, nil, policyHere("read: [.]")))
	writeFile(t, writes, stdioManifest("writes", bin, nil, policyHere("write: [.]")))
	// A sibling directory of the tree, which tether reads too.
	sibling := filepath.Join(dir, "team", "sibling.yaml")
	must(t, os.MkdirAll(filepath.Join(dir, "shared"), 0o700))
	must(t, os.MkdirAll(filepath.Dir(sibling), 0o700))
	writeFile(t, sibling, stdioManifest("sibling", bin, nil, policyHere("write: [../shared]")))
	startSandboxTether(t, dir, home)
	for m, want := range map[string]string{
		reads:   "spec.stdio.sandbox.read[0]: " + dir + " holds tether's state directory (" + filepath.Join(dir, ".tether") + ")",
		writes:  "spec.stdio.sandbox.write[0]: " + dir + " holds the manifest's directory",
		sibling: "spec.stdio.sandbox.write[0]: " + filepath.Join(dir, "shared") + " is in the manifest tree tether watches",
	} {
		name := strings.TrimSuffix(filepath.Base(m), ".yaml")
		waitStatus(t, m, name, 30*time.Second, want, func(st spec.ConnectionStatus) bool {
			return strings.Contains(st.LastError, want) && (st.Process == nil || st.Process.PID == 0)
		})
	}
}

// TestSandboxPolicyRefusedIsStalled: a write grant into the manifest's
// directory is a policy tether refuses, which no retry changes: phase
// Refused, Ready and Stalled reason PolicyRefused naming the field and the
// path, Reconciling False, and no second attempt while the spec stays (a
// second server, started after it, connects meanwhile: with a 50ms backoff
// a retrying tether would have tried again by then). The fixed manifest
// connects at once.
func TestSandboxPolicyRefusedIsStalled(t *testing.T) {
	bin := hostileServer(t)
	home, key := sandboxHome(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "h.yaml")
	writeFile(t, manifest, stdioManifest("h", bin, nil, policyHere("write: [.]")+quickBackoff))
	tt, ep := startSandboxTether(t, dir, home)
	want := "spec.stdio.sandbox.write[0]: " + dir + " holds the manifest's directory (" + dir + ")"
	st := waitStatus(t, manifest, "h", 30*time.Second, "Stalled PolicyRefused", func(st spec.ConnectionStatus) bool {
		return conditionOf(st, spec.ConditionStalled).Reason == spec.ReasonPolicyRefused
	})
	check := func(st spec.ConnectionStatus) {
		t.Helper()
		ready, rec, stalled := conditionOf(st, spec.ConditionReady), conditionOf(st, spec.ConditionReconciling), conditionOf(st, spec.ConditionStalled)
		if st.Phase != spec.PhaseRefused || ready.Status != spec.ConditionFalse || ready.Reason != spec.ReasonPolicyRefused ||
			rec.Status != spec.ConditionFalse || stalled.Status != spec.ConditionTrue || !strings.HasPrefix(stalled.Message, want) {
			t.Errorf("phase %s, Ready %+v, Reconciling %+v, Stalled %+v; want Refused, False/PolicyRefused, False, True naming %q", st.Phase, ready, rec, stalled, want)
		}
		if st.Attempt != 1 || st.NextRetryTime != nil || !strings.Contains(st.LastError, want) || st.Process != nil && st.Process.PID != 0 {
			t.Errorf("attempt %d, nextRetryTime %v, lastError %q, process %+v; want 1 attempt, none planned, the refusal, nothing running", st.Attempt, st.NextRetryTime, st.LastError, st.Process)
		}
	}
	check(st)

	other := filepath.Join(dir, "other.yaml")
	writeFile(t, other, stdioManifest("other", bin, nil, ""))
	waitStatus(t, other, "other", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	st, _ = readStatus(t, manifest, "h")
	check(st)
	if n := strings.Count(tt.logs.String(), "tether refuses the server's confinement policy"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once (no retry)", n)
	}

	// Fixed: a write grant beneath a hidden name, which tether does not
	// read manifests from.
	must(t, os.Mkdir(filepath.Join(dir, ".data"), 0o700))
	writeFile(t, manifest, stdioManifest("h", bin, nil, policyHere("write: [.data]")+quickBackoff))
	st = waitStatus(t, manifest, "h", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if c := conditionOf(st, spec.ConditionStalled); c.Status != spec.ConditionFalse {
		t.Errorf("Stalled = %+v after the fix", c)
	}
	expectPrefix(t, "read ~/.ssh/id_ed25519", attempt(t, connectClient(t, ep), "h_read_file", map[string]any{"path": key}), "refused: ")
}

// TestDefaultSandbox: --default-sandbox confines the servers whose
// manifests set no sandbox; a bad policy file stops tether run at once,
// naming the file, line and field.
func TestDefaultSandbox(t *testing.T) {
	bin := hostileServer(t)
	home, key := sandboxHome(t)
	dir := t.TempDir()
	manifest := filepath.Join(dir, "d.yaml")
	writeFile(t, manifest, stdioManifest("d", bin, nil, ""))
	policy := filepath.Join(t.TempDir(), "policy.yaml")
	need, suffix := bestEffortHere()
	writeFile(t, policy, fmt.Sprintf("network: none\nbestEffort: %v\n", need))
	_, ep := startSandboxTether(t, dir, home, "--default-sandbox", policy)
	st := waitStatus(t, manifest, "d", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if st.Sandbox != "landlock fs+netns none"+suffix {
		t.Errorf("status.sandbox = %q, want the default's", st.Sandbox)
	}
	expectPrefix(t, "read ~/.ssh/id_ed25519", attempt(t, connectClient(t, ep), "d_read_file", map[string]any{"path": key}), "refused: ")

	writeFile(t, policy, "network: none\nlimits: {openFiles: 1}\n")
	out, err := exec.Command(filepath.Join(builtBinaries(t), "tether"), "run", "--dir", dir, "--listen", "", "--metrics-addr", "", "--default-sandbox", policy).CombinedOutput()
	if err == nil || !strings.Contains(string(out), policy+":2: limits.openFiles: must be at least 3") {
		t.Errorf("tether run with a bad policy: %v\n%s", err, out)
	}
}

// TestSandboxLauncherIsTheRunningTether: the launcher is the tether that
// planned the start, not whatever file is at its path now: after an
// upgrade replaced the executable (here, with a program that would run the
// server unconfined), a confined server's restart still runs confined.
func TestSandboxLauncherIsTheRunningTether(t *testing.T) {
	bin := hostileServer(t)
	home, key := sandboxHome(t)
	exe := filepath.Join(t.TempDir(), "tether")
	data, err := os.ReadFile(filepath.Join(builtBinaries(t), "tether"))
	must(t, err)
	must(t, os.WriteFile(exe, data, 0o755))
	dir := t.TempDir()
	m := filepath.Join(dir, "up.yaml")
	writeFile(t, m, stdioManifest("up", bin, nil, policyHere("")+quickBackoff))
	gw := testport.Free(t)
	cmd := exec.Command(exe, "run", "--dir", dir, "--metrics-addr", "", "--log-level", "debug", "--listen", fmt.Sprintf("127.0.0.1:%d", gw))
	cmd.Env = append(os.Environ(), "HOME="+home)
	startCmd(t, cmd, dir)
	waitTCP(t, gw, 20*time.Second)
	st := waitStatus(t, m, "up", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	first := st.Process.PID

	// The upgrade: a new file at tether's path, which as a launcher
	// would exec the server with nothing applied.
	next := exe + ".new"
	must(t, os.WriteFile(next, []byte("#!/bin/sh\nshift; exec \"$@\"\n"), 0o755))
	must(t, os.Rename(next, exe))
	must(t, syscall.Kill(first, syscall.SIGKILL))
	waitStatus(t, m, "up", 30*time.Second, "Connected again", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && st.Process.PID != first && st.Process.PID != 0
	})
	ep := endpoints{gateway: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)}
	expectPrefix(t, "after the upgrade: read ~/.ssh/id_ed25519", attempt(t, connectClient(t, ep), "up_read_file", map[string]any{"path": key}), "refused: ")
}

// TestSandboxKeepsProcessHandling: the launcher becomes the server, so what
// tether does with any child holds for a confined one: its secrets are
// redacted from its stderr, it leads its own process group, the plan is
// gone from its environment, and it dies with tether (Pdeathsig), even by
// SIGKILL, from inside its own user and network namespace; the next tether
// removes the TMPDIR the killed one left.
func TestSandboxKeepsProcessHandling(t *testing.T) {
	requireSandbox(t)
	const secret = "sandboxed-s3cret-value-42"
	secretFile := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(secretFile, []byte(secret+"\n"), 0o600))
	dir := t.TempDir()
	m := filepath.Join(dir, "leaky.yaml")
	writeFile(t, m, faultManifest(t, "leaky", []string{"-print-env", "FILE_SECRET"}, fmt.Sprintf(
		"    env:\n      - {name: FILE_SECRET, valueFrom: {file: %s}}\n%s", secretFile, policyHere("network: none"))))
	tt := startTether(t, dir)
	st := waitStatus(t, m, "leaky", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if _, suffix := bestEffortHere(); st.Sandbox != "landlock fs+netns none"+suffix || st.Process == nil || st.Process.PID == 0 {
		t.Fatalf("sandbox %q, process %+v", st.Sandbox, st.Process)
	}
	pid := st.Process.PID
	if tail := strings.Join(st.Process.StderrTail, "\n"); !strings.Contains(tail, "starting with FILE_SECRET=[redacted]") || strings.Contains(tail, secret) {
		t.Errorf("stderr tail %q: want the secret redacted", tail)
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	must(t, err)
	if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) < 3 || f[2] != fmt.Sprint(pid) {
		t.Errorf("process group of %d: %v, want its own", pid, f[:3])
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	must(t, err)
	if strings.Contains(string(environ), sandbox.PlanEnv) {
		t.Errorf("the server's environment holds %s", sandbox.PlanEnv) // not printed: it holds the secret
	}
	if !strings.Contains(string(environ), "FILE_SECRET=") {
		t.Error("the server's environment lacks its env FILE_SECRET")
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".tether", "sandbox-tmp", "tether-sandbox-leaky-*"))
	if len(left) != 1 {
		t.Fatalf("TMPDIRs in the state directory: %q, want the server's one", left)
	}
	must(t, tt.cmd.Process.Kill())
	if !processGone(pid, 10*time.Second) {
		t.Errorf("the confined server %d outlived a SIGKILLed tether", pid)
	}

	// The next tether on the directory removes what the killed one left.
	startTether(t, dir)
	waitStatus(t, m, "leaky", 30*time.Second, "Connected again", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && st.Process.PID != pid && st.Process.PID != 0
	})
	if _, err := os.Stat(left[0]); !os.IsNotExist(err) {
		t.Errorf("%s, left by a SIGKILLed tether, is still there (%v)", left[0], err)
	}
}
