//go:build linux

package main

// The container transport (spec.container, docs/contract.md §1 and
// docs/security.md) end to end: tether runs the example server's image,
// built in the test (static binary, FROM scratch), under a real dockerd.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// exampleServerImage builds the example server (static) into an image FROM
// scratch, tagged tether-e2e-<label>:server and labelled with the build
// label leavesNothing prunes by, and removes it at the end.
func exampleServerImage(t *testing.T, d *dockerd, label string) string {
	t.Helper()
	ctxDir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(ctxDir, "server"), "./examples/server")
	build.Dir = repoRoot(t)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./examples/server: %v\n%s", err, out)
	}
	writeFile(t, filepath.Join(ctxDir, "Dockerfile"), "FROM scratch\nCOPY server /server\nENTRYPOINT [\"/server\"]\n")
	tag := "tether-e2e-" + label + ":server"
	d.run(t, "build", "--quiet", "--label", buildLabel+"="+label, "--tag", tag, ctxDir)
	t.Cleanup(func() { _, _ = d.try("image", "rm", "--force", tag) })
	return tag
}

// containerManifest is a manifest of a container server; body is the
// container's fields, indented under it.
func containerManifest(name, image, body, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: %s\nspec:\n  container:\n    image: %s\n", name, image)
	for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
		if l != "" {
			b.WriteString("    " + l + "\n")
		}
	}
	b.WriteString(extra)
	return b.String()
}

// containersOf lists the containers (all states) of connection conn.
func containersOf(t *testing.T, d *dockerd, conn string) []string {
	t.Helper()
	out := d.run(t, "ps", "--all", "--quiet", "--filter", "label=dev.tether.connection="+conn)
	return strings.Fields(out)
}

// waitNoContainers waits until connection conn has no container left.
func waitNoContainers(t *testing.T, d *dockerd, conn string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := containersOf(t, d, conn)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containers of %s still there after %v: %v", conn, timeout, left)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// tetherEnv is what tether needs to reach the daemon d.
func tetherEnv(d *dockerd) []string {
	if d.host == "" {
		return []string{}
	}
	return []string{"DOCKER_HOST=" + d.host}
}

// TestContainerServer runs the example server's image as a container
// server: tether connects and serves its tools, status names the container
// and the sandbox, env and a secret file reach the server while the secret
// appears in no `docker inspect`, command line, log or status; a killed
// container is started again (a new one), and a deleted manifest leaves no
// container and no secrets directory. It also measures the start-up of the
// same server as a container and as a stdio child.
func TestContainerServer(t *testing.T) {
	// The test reads the server's environment and files through /proc
	// (the server runs as the image's user, root in a scratch image).
	if os.Geteuid() != 0 {
		dockerMissing(t, "the test reads the container's environment through /proc, which needs root")
	}
	d := startDocker(t)
	suffix := randomSuffix(t)
	leavesNothing(t, d, suffix)
	image := exampleServerImage(t, d, suffix)

	dir := t.TempDir()
	secret := "s3cret-" + randomSuffix(t) + randomSuffix(t)
	writeFile(t, filepath.Join(dir, "secrets", "token"), secret+"\n")
	data := filepath.Join(dir, "data")
	writeFile(t, filepath.Join(data, "hello.txt"), "hello\n")
	// Writable: beneath a hidden name, which tether does not read manifests
	// from (a writable data/ would let the server write one).
	writeFile(t, filepath.Join(dir, ".scratch", "keep"), "")
	manifest := filepath.Join(dir, "box.yaml")
	// --dir relative, as a person types it: the runtime's daemon still gets
	// absolute mount sources (the secrets directory, a relative mount).
	gw, mp := testport.Free(t), testport.Free(t)
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), "run", "--dir", filepath.Base(dir),
		"--listen", fmt.Sprintf("127.0.0.1:%d", gw), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", mp),
		"--log-level", "debug", "--container-runtime", "docker")
	cmd.Dir = filepath.Dir(dir)
	cmd.Env = append(os.Environ(), tetherEnv(d)...)
	tt := startCmd(t, cmd, dir)
	waitTCP(t, gw, 20*time.Second)
	ep := endpoints{gateway: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)}

	began := time.Now()
	writeFile(t, manifest, containerManifest("box", image, `
env:
  - {name: API_TOKEN, valueFrom: {file: secrets/token}}
  - {name: EXAMPLE_SERVER_LOG_LEVEL, value: debug}
secretFiles:
  - {name: api-token, valueFrom: {file: secrets/token}}
mounts:
  - {source: data, target: /data}
  - {source: .scratch, target: /scratch, writable: true}
memory: 64Mi
pids: 32
`, ""))
	st := waitStatus(t, manifest, "box", 2*time.Minute, "Connected", phaseIs(spec.PhaseConnected))
	containerStart := time.Since(began)
	p := st.Process
	if p == nil || p.Container == "" || p.Runtime != "docker" || p.PID == 0 {
		t.Fatalf("status.process = %+v, want the container's name, runtime docker and the runtime command's pid", p)
	}
	if want := "container docker network=none"; st.Sandbox != want {
		t.Errorf("status.sandbox = %q, want %q", st.Sandbox, want)
	}
	name := p.Container

	// The gateway serves its tools, and a call reaches the container.
	s := connectClient(t, ep)
	res, err := call(s, 30*time.Second, "box_echo", map[string]any{"text": "from a container"})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "from a container") {
		t.Fatalf("box_echo through the gateway: %v %+v", err, res)
	}

	// What docker shows of the container: the limits, the labels, the
	// mounts read-only unless marked writable, and never the secret.
	inspect := d.run(t, "container", "inspect", name)
	if strings.Contains(inspect, secret) {
		t.Errorf("docker inspect %s shows the secret:\n%s", name, inspect)
	}
	var info []struct {
		Config struct {
			Env    []string
			Labels map[string]string
		}
		HostConfig struct {
			NetworkMode string
			Memory      int64
			PidsLimit   *int64
			CapDrop     []string
			SecurityOpt []string
		}
		Mounts []struct {
			Source, Destination string
			RW                  bool
		}
		State struct{ Pid int }
	}
	if err := json.Unmarshal([]byte(inspect), &info); err != nil || len(info) != 1 {
		t.Fatalf("docker inspect: %v\n%s", err, inspect)
	}
	ci := info[0]
	if ci.HostConfig.NetworkMode != "none" || ci.HostConfig.Memory != 64<<20 || ci.HostConfig.PidsLimit == nil || *ci.HostConfig.PidsLimit != 32 ||
		strings.Join(ci.HostConfig.CapDrop, ",") != "ALL" || strings.Join(ci.HostConfig.SecurityOpt, ",") != "no-new-privileges" {
		t.Errorf("host config: %+v; want network none, memory 64Mi, pids 32, every capability dropped, no new privileges", ci.HostConfig)
	}
	if ci.Config.Labels["dev.tether.connection"] != "box" || ci.Config.Labels["dev.tether.owner"] == "" {
		t.Errorf("labels %v: want dev.tether.connection=box and dev.tether.owner", ci.Config.Labels)
	}
	for _, e := range ci.Config.Env {
		if strings.HasPrefix(e, "API_TOKEN=") || strings.HasPrefix(e, "EXAMPLE_SERVER_LOG_LEVEL=") {
			t.Errorf("the container's configured env has %s: the manifest's env must not be in it", strings.SplitN(e, "=", 2)[0])
		}
	}
	mounts := map[string]bool{} // destination → writable
	for _, m := range ci.Mounts {
		mounts[m.Destination] = m.RW
	}
	for dest, rw := range map[string]bool{"/data": false, "/scratch": true, "/run/secrets": false, "/.tether/init": false, "/.tether/env": false} {
		if got, ok := mounts[dest]; !ok || got != rw {
			t.Errorf("mount %s: present %v, writable %v; want writable %v (mounts %+v)", dest, ok, got, rw, ci.Mounts)
		}
	}

	// Yet the server has them: its environment (the process in the
	// container, seen from the host) and its secret file.
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", ci.State.Pid))
	if err != nil {
		t.Fatal(err)
	}
	vars := strings.Split(string(environ), "\x00")
	if !contains(vars, "API_TOKEN="+secret) || !contains(vars, "EXAMPLE_SERVER_LOG_LEVEL=debug") {
		t.Errorf("the server's environment lacks API_TOKEN or EXAMPLE_SERVER_LOG_LEVEL: %d variables", len(vars))
	}
	if got, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/run/secrets/api-token", ci.State.Pid)); err != nil || string(got) != secret {
		t.Errorf("the server's /run/secrets/api-token: %v (matches: %v)", err, string(got) == secret)
	}
	if got, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/data/hello.txt", ci.State.Pid)); err != nil || string(got) != "hello\n" {
		t.Errorf("the server's /data/hello.txt: %q, %v", got, err)
	}
	// The runtime's command line (tether's child) holds no secret either.
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p.PID))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cmdline), secret) || !strings.Contains(string(cmdline), name) {
		t.Errorf("the runtime's command line (pid %d) shows the secret or does not name the container: %q", p.PID, strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	// The secrets directory is tether's alone.
	secretsDir := filepath.Join(dir, ".tether", "containers", name)
	if fi, err := os.Stat(secretsDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("the container's directory %s: %v, mode %v; want 0700", secretsDir, err, fi.Mode())
	}

	// Killed, the container is replaced by a new one.
	d.run(t, "kill", name)
	st = waitStatus(t, manifest, "box", 2*time.Minute, "a new container, connected", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && st.Process.Container != "" && st.Process.Container != name
	})
	if st.Process.Restarts < 1 {
		t.Errorf("restarts = %d after the container was killed, want at least 1", st.Process.Restarts)
	}
	res, err = call(s, 30*time.Second, "box_echo", map[string]any{"text": "again"})
	if err != nil || res.IsError || !strings.Contains(textOf(res), "again") {
		t.Fatalf("box_echo after the container was killed: %v %+v", err, res)
	}
	if _, err := d.try("container", "inspect", name); err == nil {
		t.Errorf("the killed container %s is still there", name)
	}
	if _, err := os.Stat(secretsDir); !os.IsNotExist(err) {
		t.Errorf("the killed container's directory %s: %v, want it removed", secretsDir, err)
	}

	// The same server as a container without env (no image inspect, no
	// entrypoint of tether's) and as a stdio child, for the start-up figure.
	bare := filepath.Join(dir, "bare.yaml")
	began = time.Now()
	writeFile(t, bare, containerManifest("bare", image, "", ""))
	waitStatus(t, bare, "bare", 2*time.Minute, "Connected", phaseIs(spec.PhaseConnected))
	bareStart := time.Since(began)
	stdio := filepath.Join(dir, "plain.yaml")
	began = time.Now()
	writeFile(t, stdio, stdioManifest("plain", filepath.Join(builtBinaries(t), "tether-example-server"), nil, ""))
	waitStatus(t, stdio, "plain", time.Minute, "Connected", phaseIs(spec.PhaseConnected))
	t.Logf("start-up to Connected (manifest written → status file): container with env %v, container %v, stdio %v", containerStart, bareStart, time.Since(began))
	if err := os.Remove(bare); err != nil {
		t.Fatal(err)
	}
	waitNoContainers(t, d, "bare", time.Minute)

	// Its status (after a crash: lastError, the stderr tail of two
	// containers) holds no secret.
	if b, err := os.ReadFile(filepath.Join(dir, "box.status.yaml")); err != nil || strings.Contains(string(b), secret) {
		t.Errorf("box's status file shows the secret, or cannot be read: %v", err)
	}

	// Deleted, the connection leaves no container and no directory.
	last := st.Process.Container
	if err := os.Remove(manifest); err != nil {
		t.Fatal(err)
	}
	waitNoContainers(t, d, "box", time.Minute)
	deadline := time.Now().Add(30 * time.Second)
	for {
		entries, _ := os.ReadDir(filepath.Join(dir, ".tether", "containers"))
		// The mark that a container was started here stays until the next
		// tether's search for leftovers (docs/contract.md §2): it is not
		// a container's directory.
		entries = slices.DeleteFunc(entries, func(e os.DirEntry) bool { return e.Name() == ".started" })
		if len(entries) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the containers' directories are still there after the manifest was deleted: %v (last container %s)", entries, last)
		}
		time.Sleep(20 * time.Millisecond)
	}

	tt.stop()
	if strings.Contains(tt.logs.String(), secret) {
		t.Errorf("tether's log shows the secret")
	}
}

// TestContainerPortServer runs the example server's image serving
// streamable HTTP on a port, published on 127.0.0.1 only, on a network of
// the test's own (the test's dockerd has no default bridge). Then tether
// is killed (SIGKILL): the container, which listens on a port and not on
// its stdin, outlives it, and the next tether on the same state directory
// removes it before it starts its own.
func TestContainerPortServer(t *testing.T) {
	d := startDocker(t)
	suffix := randomSuffix(t)
	leavesNothing(t, d, suffix)
	image := exampleServerImage(t, d, suffix)
	network := "tether-e2e-" + suffix
	d.run(t, "network", "create", network)
	t.Cleanup(func() {
		// Its bridge would outlive the daemon: a container left on it
		// (the test failed) goes first.
		if ids, err := d.try("container", "ls", "--all", "--quiet", "--filter", "network="+network); err == nil && ids != "" {
			_, _ = d.try(append([]string{"container", "rm", "--force"}, strings.Fields(ids)...)...)
		}
		if _, err := d.try("network", "rm", network); err != nil {
			t.Errorf("removing the test's network: %v", err)
		}
	})

	dir := t.TempDir()
	manifest := filepath.Join(dir, "web.yaml")
	writeFile(t, manifest, containerManifest("web", image, `
args: ["-http", ":8080"]
network: `+network+`
port: 8080
`, ""))
	bin := builtBinaries(t)
	cmd := exec.Command(filepath.Join(bin, "tether"), "run", "--dir", dir, "--listen", "", "--metrics-addr", "", "--log-level", "debug", "--container-runtime", "docker")
	cmd.Env = append(os.Environ(), tetherEnv(d)...)
	first := startCmd(t, cmd, dir)
	st := waitStatus(t, manifest, "web", 2*time.Minute, "Connected", phaseIs(spec.PhaseConnected))
	if st.Process == nil || st.Process.Container == "" {
		t.Fatalf("status.process = %+v, want the container", st.Process)
	}
	name := st.Process.Container
	if want := "container docker network=" + network; st.Sandbox != want {
		t.Errorf("status.sandbox = %q, want %q", st.Sandbox, want)
	}
	ports := d.run(t, "port", name)
	if !strings.HasPrefix(ports, "8080/tcp -> 127.0.0.1:") || strings.Count(ports, "\n") != 0 {
		t.Errorf("docker port %s: %q, want 8080/tcp on 127.0.0.1 only", name, ports)
	}

	// Killed outright: nothing stops the container.
	_ = first.cmd.Process.Signal(syscall.SIGKILL)
	<-first.done
	if state := d.run(t, "container", "inspect", "--format", "{{.State.Running}}", name); state != "true" {
		t.Fatalf("the container after tether was killed: running %s; the test proves nothing unless it outlives tether", state)
	}

	second := startTetherWithEnv(t, dir, tetherEnv(d), "--container-runtime", "docker")
	// Waiting for the new container's connection is not enough: the old
	// one must be gone, removed by the new tether.
	waitStatus(t, manifest, "web", 2*time.Minute, "a new container, connected", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && st.Process.Container != name
	})
	deadline := time.Now().Add(time.Minute)
	for {
		if _, err := d.try("container", "inspect", name); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the container %s a killed tether left is still there a minute after the next start", name)
		}
		time.Sleep(50 * time.Millisecond)
	}
	second.stop()
	waitNoContainers(t, d, "web", time.Minute)
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// TestContainerRuntimeNamedButMissing: a --container-runtime that names a
// command that is not there stops tether run at once, saying so (auto
// without a runtime only makes container servers fail to connect).
func TestContainerRuntimeNamedButMissing(t *testing.T) {
	bin := builtBinaries(t)
	// Bounded: a tether that does not refuse runs until it is stopped.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "tether"), "run", "--dir", t.TempDir(), "--metrics-addr", "", "--listen", "",
		"--container-runtime", "/nonexistent/docker")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("tether ran with a container runtime that is not there:\n%s", out)
	}
	if !strings.Contains(string(out), "--container-runtime: exec: \"/nonexistent/docker\": stat /nonexistent/docker: no such file or directory") {
		t.Errorf("the refusal does not say why:\n%s", out)
	}
}
