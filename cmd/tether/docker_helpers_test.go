//go:build linux

package main

// Helpers for the container image's end-to-end tests: a real Docker daemon,
// either one that already answers (DOCKER_HOST or the default socket) or one
// the test starts as root with everything of its own (data root, exec root,
// pidfile and socket under a temporary directory) and stops by its pid at
// the end. hack/install-peers.sh installs Debian's docker.io under CI=true
// when no daemon answers.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// dockerd is a Docker daemon the tests may use, and how to reach it.
type dockerd struct {
	// host is the DOCKER_HOST value for the docker CLI; empty: the CLI's
	// own default (a daemon that already answered there).
	host string
}

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

// startDocker returns a Docker daemon for the test: the one the docker CLI
// reaches already if it answers, else one started for this test (as root),
// stopped when the test ends.
func startDocker(t *testing.T) *dockerd {
	t.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		dockerMissing(t, "no docker command on PATH")
	}
	// One try: a daemon that is running answers at once.
	if err := dockerInfo(os.Environ(), 0); err == nil {
		return &dockerd{}
	}
	daemon, err := exec.LookPath("dockerd")
	if err != nil {
		dockerMissing(t, "no daemon answers and there is no dockerd on PATH to start one")
	}
	if os.Geteuid() != 0 {
		dockerMissing(t, "no daemon answers and only root can start dockerd")
	}

	// A short path of its own: the socket's path must fit in a sockaddr_un
	// (108 bytes), which t.TempDir's long names may not.
	dir, err := os.MkdirTemp("", "tether-dockerd-")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "docker.sock")
	host := "unix://" + sock
	logs := &syncBuffer{}
	cmd := exec.Command(daemon,
		"--data-root", filepath.Join(dir, "data"),
		"--exec-root", filepath.Join(dir, "exec"),
		"--pidfile", filepath.Join(dir, "docker.pid"),
		"--host", host,
	)
	cmd.Stdout, cmd.Stderr = logs, logs
	// Its own process group, so that a Ctrl-C meant for go test reaches
	// dockerd only through the cleanup below, in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		t.Fatalf("starting dockerd: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		// dockerd stops its containers and its containerd on SIGTERM.
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			t.Errorf("dockerd (pid %d) did not stop within 60s of SIGTERM; killed", cmd.Process.Pid)
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("dockerd log:\n%s", lastLines(logs.String(), 40))
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("removing dockerd's directory: %v", err)
		}
	})
	env := append(os.Environ(), "DOCKER_HOST="+host)
	if err := dockerInfo(env, 60*time.Second); err != nil {
		select {
		case <-exited:
			err = errors.New("dockerd exited")
		default:
		}
		t.Fatalf("dockerd started but never answered docker info: %v\n%s", err, lastLines(logs.String(), 40))
	}
	return &dockerd{host: host}
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
