//go:build linux

package main

// Helpers for the end-to-end tests of the container image and of container
// servers (spec.container): a real Docker daemon, either one that already
// answers (DOCKER_HOST or the default socket) or the test process's own,
// started as root by the first test that needs one, with everything of its
// own (data root, exec root, pidfile and socket under a temporary
// directory), shared by the later ones and stopped by its pid when every
// test has run (TestMain). hack/install-peers.sh installs Debian's
// docker.io under CI=true when no daemon answers.
//
// The test's own daemon leaves the host as it found it, as far as dockerd
// allows (docs/deploy.md): no iptables rules or chains (--iptables=false),
// no change to net.ipv4.ip_forward (--ip-forward=false), no docker0 bridge
// (--bridge=none; the tests' containers use a network of their own or
// none). It stops with the test process even when that dies without its
// cleanup (a go test timeout, SIGKILL): Pdeathsig. A daemon left by a
// process killed before that could act (or by an older test) is stopped
// and its directory removed by the next run.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// dockerd is a Docker daemon the tests may use, and how to reach it.
type dockerd struct {
	// host is the DOCKER_HOST value for the docker CLI; empty: the CLI's
	// own default (a daemon that already answered there).
	host string
	// pid and dir are the test's own daemon's process and directory; 0
	// and empty for a daemon that already answered.
	pid int
	dir string
}

// dockerdDirPrefix names the directories of the test's own daemons under
// os.TempDir(): the next run finds a killed run's there.
const dockerdDirPrefix = "tether-dockerd-"

// dockerMissing skips the test, or fails it under CI=true where every test
// must run (hack/install-peers.sh installs docker.io there).
func dockerMissing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("docker: %s (CI=true: hack/install-peers.sh installs docker.io)", msg)
	}
	t.Skipf("docker: %s", msg)
}

// sharedDockerd is the test process's own daemon, started by the first test
// that needs one and shared by every later one (one daemon per test
// process: starting one takes seconds); TestMain stops it.
var sharedDockerd struct {
	once sync.Once
	d    *dockerd
	logs *syncBuffer
	stop func() error
	err  error
}

// The shared daemon is stopped once every test has run (TestMain).
func init() {
	afterTests = append(afterTests, func() error {
		if stop := sharedDockerd.stop; stop != nil {
			if err := stop(); err != nil {
				return fmt.Errorf("stopping the tests' dockerd: %w", err)
			}
		}
		return nil
	})
}

// startDocker returns a Docker daemon for the test: the one the docker CLI
// reaches already if it answers, else the test process's own (as root),
// started by the first test that asks and stopped when every test has run.
// The tests that share it run one after the other (none is parallel), so
// each may still require the daemon to hold nothing of its own at its end.
func startDocker(t *testing.T) *dockerd {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		dockerMissing(t, "no docker command on PATH")
	}
	// One try: a daemon that is running answers at once.
	if sharedDockerd.d == nil {
		if err := dockerInfo(os.Environ(), 0); err == nil {
			return &dockerd{}
		}
	}
	daemon, err := exec.LookPath("dockerd")
	if err != nil {
		dockerMissing(t, "no daemon answers and there is no dockerd on PATH to start one")
	}
	if os.Geteuid() != 0 {
		dockerMissing(t, "no daemon answers and only root can start dockerd")
	}
	sharedDockerd.once.Do(func() {
		clearDockerdLeftovers(t)
		sharedDockerd.d, sharedDockerd.logs, sharedDockerd.stop, sharedDockerd.err = launchDockerd(daemon)
	})
	if sharedDockerd.err != nil {
		t.Fatal(sharedDockerd.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("dockerd log:\n%s", lastLines(sharedDockerd.logs.String(), 40))
		}
	})
	return sharedDockerd.d
}

// startOwnDocker starts the dockerd at path for the test (as root), after
// clearing what killed runs left, and stops it when the test ends.
func startOwnDocker(t *testing.T, daemon string) *dockerd {
	t.Helper()
	clearDockerdLeftovers(t)
	d, logs, stop, err := launchDockerd(daemon)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("dockerd log:\n%s", lastLines(logs.String(), 40))
		}
	})
	return d
}

// launchDockerd starts the dockerd at path (as root) with everything of its
// own under a new directory, waits until it answers, and returns it, its
// log and what stops it and removes its directory.
func launchDockerd(daemon string) (*dockerd, *syncBuffer, func() error, error) {
	// A short path of its own: the socket's path must fit in a sockaddr_un
	// (108 bytes), which t.TempDir's long names may not.
	dir, err := os.MkdirTemp("", dockerdDirPrefix)
	if err != nil {
		return nil, nil, nil, err
	}
	// Whose it is: the next run leaves alone the directory of a test
	// process that still runs.
	if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, err
	}
	sock := filepath.Join(dir, "docker.sock")
	host := "unix://" + sock
	logs := &syncBuffer{}
	cmd := exec.Command(daemon,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"),
		"--host", host,
		// Leave the host's network as it is: see the top of this file.
		"--iptables=false", "--ip-forward=false", "--bridge=none",
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group, so that a Ctrl-C meant for go test reaches
	// dockerd only through the stop below, in order. Pdeathsig: dockerd
	// gets SIGTERM (and stops its containers and containerd) when the
	// test process dies without that stop. The kernel sends it when the
	// thread that forked dies, not the process: the fork happens on a
	// thread locked for it, and the Go runtime never ends a thread that
	// is unlocked again.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	runtime.LockOSThread()
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("starting dockerd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	env := append(os.Environ(), "DOCKER_HOST="+host)
	stop := func() error {
		// A network's bridge (br-<id>) outlives a dockerd that stops with
		// the network still there, and its directory is removed below:
		// the networks go first (their containers before them), as a
		// test that failed half-way may have left them.
		err := removeNetworks(env)
		// dockerd stops its containers and its containerd on SIGTERM.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			err = errors.Join(err, fmt.Errorf("dockerd (pid %d) did not stop within 60s of SIGTERM; killed", cmd.Process.Pid))
			_ = cmd.Process.Kill()
			<-exited
		}
		if rerr := os.RemoveAll(dir); rerr != nil && err == nil {
			err = fmt.Errorf("removing dockerd's directory: %v", rerr)
		}
		return err
	}
	if err := dockerInfo(env, 60*time.Second); err != nil {
		select {
		case <-exited:
			err = errors.New("dockerd exited")
		default:
		}
		_ = stop()
		return nil, nil, nil, fmt.Errorf("dockerd started but never answered docker info: %v\n%s", err, lastLines(logs.String(), 40))
	}
	return &dockerd{host: host, pid: cmd.Process.Pid, dir: dir}, logs, stop, nil
}

// removeNetworks removes the networks of the daemon env reaches that are
// not its own (none, host) and every container, which would keep a network
// in use; an error names what stayed.
func removeNetworks(env []string) error {
	docker := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "docker", args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("docker %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
		}
		return strings.TrimSpace(string(out)), nil
	}
	networks, err := docker("network", "ls", "--quiet", "--filter", "type=custom")
	if err != nil || networks == "" {
		return err
	}
	if containers, err := docker("container", "ls", "--all", "--quiet"); err != nil {
		return err
	} else if containers != "" {
		if _, err := docker(append([]string{"container", "rm", "--force"}, strings.Fields(containers)...)...); err != nil {
			return err
		}
	}
	_, err = docker(append([]string{"network", "rm"}, strings.Fields(networks)...)...)
	return err
}

// clearDockerdLeftovers stops the daemons that killed test runs left and
// removes their directories: those whose owner (owner.pid) is gone, or,
// from before owner.pid, whose dockerd is gone or was left to init.
func clearDockerdLeftovers(t testing.TB) {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(os.TempDir(), dockerdDirPrefix+"*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		daemon := readPid(filepath.Join(dir, "docker.pid"))
		if owner := readPid(filepath.Join(dir, "owner.pid")); owner != 0 {
			// This process's too: another test's daemon, still in use.
			if alive(owner) {
				continue
			}
		} else if alive(daemon) && parentPid(daemon) != 1 {
			continue
		}
		if alive(daemon) && processName(daemon) == "dockerd" {
			t.Logf("stopping dockerd (pid %d) that a killed test left in %s", daemon, dir)
			_ = syscall.Kill(daemon, syscall.SIGTERM)
			deadline := time.Now().Add(60 * time.Second)
			for alive(daemon) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
			if alive(daemon) {
				_ = syscall.Kill(daemon, syscall.SIGKILL)
			}
		}
		// A daemon killed outright leaves its mounts (overlays, the
		// exec root's): unmount them, deepest first, or nothing below
		// them can be removed.
		for _, m := range mountsUnder(dir) {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Logf("unmounting %s: %v", m, err)
			}
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing a killed test's dockerd directory: %v", err)
		}
	}
}

// readPid is the process id in file; 0 when there is none.
func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// procStat is the fields of /proc/PID/stat after the command's name: the
// state first, then the parent's pid; nil when there is no such process.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	// The name is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// alive reports whether process pid runs (a zombie does not).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	st := procStat(pid)
	return len(st) > 0 && st[0] != "Z" && st[0] != "X"
}

// parentPid is the parent of process pid; 0 when unknown.
func parentPid(pid int) int {
	st := procStat(pid)
	if len(st) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(st[1])
	return ppid
}

// processName is the command name of process pid.
func processName(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return strings.TrimSpace(string(b))
}

// mountsUnder is the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var ms []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && strings.HasPrefix(f[4], dir+"/") {
			ms = append(ms, f[4])
		}
	}
	slices.SortFunc(ms, func(a, b string) int { return len(b) - len(a) })
	return ms
}

// dockerInfo waits until `docker info` succeeds with env, for at most
// timeout (0: one try).
func dockerInfo(env []string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		cmd := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}")
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// env is the environment of a docker command for this daemon.
func (d *dockerd) env() []string {
	env := os.Environ()
	if d.host != "" {
		env = append(env, "DOCKER_HOST="+d.host)
	}
	return env
}

// command is a docker command against this daemon.
func (d *dockerd) command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = d.env()
	return cmd
}

// run runs docker with args and returns its standard output, trimmed; it
// fails the test when docker fails.
func (d *dockerd) run(t testing.TB, args ...string) string {
	t.Helper()
	out, err := d.try(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// try runs docker with args (bounded by five minutes: a build) and returns
// its standard output, trimmed, or an error with its standard error.
func (d *dockerd) try(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := d.command(ctx, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("docker %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.Bytes())
	}
	return strings.TrimSpace(string(out)), nil
}

// lastLines is the end of s, at most n lines.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
