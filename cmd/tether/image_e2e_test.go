//go:build linux

package main

// The container image (the Dockerfile, built by hack/build-image.sh as `make
// image` builds it) run under a real Docker daemon: docs/deploy.md.

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// imageBinaries builds tether and the example server with `make build`, as
// `make image` does (both static), with version stamped, into a directory of
// the test's.
func imageBinaries(t *testing.T, version string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("make", "--no-print-directory", "build", "BIN="+dir, "VERSION="+version)
	cmd.Dir = repoRoot(t)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	return dir
}

// buildLabel is the label that hack/build-image.sh's BUILD_LABEL puts on
// every image of a build.
const buildLabel = "dev.tether.build"

// buildImage runs hack/build-image.sh for target on base scratch (no
// registry is needed) with the binaries of bin, every image it makes
// labelled dev.tether.build=label, and removes the image at the end.
func buildImage(t *testing.T, d *dockerd, bin, tag, target, label string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(repoRoot(t), "hack", "build-image.sh"))
	cmd.Env = append(d.env(), "IMAGE="+tag, "BASE=scratch", "TARGET="+target, "BIN_DIR="+bin,
		"CONTEXT="+filepath.Join(t.TempDir(), "context"), "BUILD_LABEL="+label)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/build-image.sh (%s, target %s): %v\n%s", tag, target, err, out)
	}
	t.Cleanup(func() { _, _ = d.try("image", "rm", "--force", tag) })
}

// leavesNothing makes the test check, at its end, that it left nothing on
// the daemon, which may be shared: after the images it tagged are removed
// (by the cleanups registered after this one, which run before it), the
// images its builds labelled with label are pruned, none may be left, and
// no anonymous volume of its containers (*volumes) may be; on the test's
// own daemon, no image or volume at all may be. It returns where the
// test adds the volumes of each container it runs.
func leavesNothing(t *testing.T, d *dockerd, label string) *[]string {
	t.Helper()
	volumes := new([]string)
	t.Cleanup(func() {
		filter := "label=" + buildLabel + "=" + label
		if _, err := d.try("image", "prune", "--all", "--force", "--filter", filter); err != nil {
			t.Errorf("pruning the test's images: %v", err)
		}
		if left, err := d.try("image", "ls", "--all", "--quiet", "--filter", filter); err != nil || left != "" {
			t.Errorf("images labelled %s left on the daemon (%v): %s", filter, err, left)
		}
		for _, v := range *volumes {
			if _, err := d.try("volume", "inspect", v); err == nil {
				t.Errorf("volume %s of a test container left on the daemon", v)
				_, _ = d.try("volume", "rm", v)
			}
		}
		if d.pid == 0 {
			return
		}
		// The test's own daemon held nothing before the test.
		for _, what := range [][]string{{"image", "ls", "--all", "--quiet"}, {"volume", "ls", "--quiet"}, {"container", "ls", "--all", "--quiet"}} {
			if left, err := d.try(what...); err != nil || left != "" {
				t.Errorf("docker %s: the test left %q (%v)", strings.Join(what, " "), left, err)
			}
		}
	})
	return volumes
}

// containerVolumes adds the names of container's volumes to *volumes.
func containerVolumes(t *testing.T, d *dockerd, container string, volumes *[]string) {
	t.Helper()
	out := d.run(t, "container", "inspect", "--format", `{{range .Mounts}}{{if eq .Type "volume"}}{{.Name}} {{end}}{{end}}`, container)
	*volumes = append(*volumes, strings.Fields(out)...)
}

// TestImage builds the image with base scratch and runs it: `version` prints
// the stamped version; tether in a container watches a mounted manifest
// directory, connects to the example server in a second container (whose
// network it shares) over streamable HTTP, writes the status file back to the mount as user 65532
// readable by the host's users, serves /readyz and the gateway (with its
// bearer token) on published ports, and stops cleanly on `docker stop`;
// run with --user, the status files are that user's.
func TestImage(t *testing.T) {
	root := repoRoot(t)
	dependsOn(t, filepath.Join(root, "Dockerfile"), filepath.Join(root, "hack", "build-image.sh"), filepath.Join(root, "Makefile"))
	// The test gives its mounted directories to the image's user and to
	// another (chown), which takes root, whoever's daemon answers.
	if os.Geteuid() != 0 {
		dockerMissing(t, "the test gives its mounted directories to users 65532 and 4321, which needs root")
	}
	d := startDocker(t)
	suffix := randomSuffix(t)
	volumes := leavesNothing(t, d, suffix)
	version := "v0.0.0-e2e." + suffix
	bin := imageBinaries(t, version)
	tag := "tether-e2e-" + suffix + ":dev"
	examplesTag := "tether-e2e-" + suffix + ":examples"
	buildImage(t, d, bin, tag, "tether", suffix)
	buildImage(t, d, bin, examplesTag, "examples", suffix)
	if got := d.run(t, "image", "inspect", "--format", "{{index .Config.Labels \""+buildLabel+"\"}}", tag); got != suffix {
		t.Errorf("the image's label %s is %q, want the build's %q", buildLabel, got, suffix)
	}

	size, err := strconv.ParseInt(d.run(t, "image", "inspect", "--format", "{{.Size}}", tag), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("image %s (base scratch): %.1f MB", tag, float64(size)/1e6)
	if user := d.run(t, "image", "inspect", "--format", "{{.Config.User}}", tag); user != "65532:65532" {
		t.Errorf("the image runs as %q, want 65532:65532", user)
	}

	// The CA certificates that HTTPS servers and OAuth need, on scratch
	// too: the image's bundle holds certificates Go can load.
	t.Run("CA certificates", func(t *testing.T) {
		// No network: the test's own daemon has no default bridge.
		cid := d.run(t, "create", "--network", "none", tag)
		t.Cleanup(func() { _, _ = d.try("rm", "--volumes", cid) })
		containerVolumes(t, d, cid, volumes)
		// docker cp writes a tar archive of the one file.
		tr := tar.NewReader(strings.NewReader(d.run(t, "cp", cid+":/etc/ssl/certs/ca-certificates.crt", "-")))
		if _, err := tr.Next(); err != nil {
			t.Fatalf("docker cp of the CA bundle: %v", err)
		}
		bundle, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if !x509.NewCertPool().AppendCertsFromPEM(bundle) {
			t.Errorf("/etc/ssl/certs/ca-certificates.crt of %s holds no PEM certificate", tag)
		}
	})

	t.Run("version", func(t *testing.T) {
		// --rm removes the image's anonymous volumes with the container.
		out := d.run(t, "run", "--rm", "--network", "none", tag, "version")
		if !strings.Contains(out, version) {
			t.Errorf("docker run %s version printed %q, want the stamped version %s", tag, out, version)
		}
		// make build stamps the commit and date too (the Makefile's LDFLAGS).
		if head, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
			if c := strings.TrimSpace(string(head)); !strings.Contains(out, "(commit "+c+", built ") {
				t.Errorf("docker run %s version printed %q, want the commit %s and a build date", tag, out, c)
			}
		}
	})

	// The example server from the examples image, on a network of the
	// test's only, with the ports tether serves published: the tether
	// containers join its network namespace and reach it on localhost.
	// Not by its name over the bridge: the test's own daemon writes no
	// iptables rules, and on a host whose FORWARD policy is DROP with
	// bridge netfilter on (what an earlier Docker leaves), traffic between
	// two containers of a bridge is dropped. docker-proxy's published
	// ports need no rule.
	network := "tether-e2e-" + suffix
	networkID := d.run(t, "network", "create", network)
	t.Cleanup(func() { _, _ = d.try("network", "rm", network) })
	if d.pid != 0 {
		checkHostNetworkUntouched(t, d, networkID)
	}
	server := "tether-e2e-server-" + suffix
	d.run(t, "run", "--detach", "--name", server, "--network", network,
		"--publish", "127.0.0.1::8808", "--publish", "127.0.0.1::9464",
		"--entrypoint", "tether-example-server", examplesTag, "-http", "127.0.0.1:8080")
	t.Cleanup(func() { _, _ = d.try("rm", "--force", "--volumes", server) })
	containerVolumes(t, d, server, volumes)
	serverURL := "http://127.0.0.1:8080/mcp"
	gateway := "http://" + publishedAddr(t, d, server, "8808/tcp") + "/mcp"
	metrics := "http://" + publishedAddr(t, d, server, "9464/tcp")

	// The gateway's token, readable by any user the container runs as.
	token := "e2e-token-" + suffix
	secrets := t.TempDir()
	writeFile(t, filepath.Join(secrets, "token"), token+"\n")
	if err := os.Chmod(filepath.Join(secrets, "token"), 0o644); err != nil {
		t.Fatal(err)
	}

	t.Run("run", func(t *testing.T) {
		// The manifest tree, mounted at /manifests and made the image's
		// user's so that tether writes the status files beside the
		// manifests.
		manifests := t.TempDir()
		manifest := filepath.Join(manifests, "example.yaml")
		writeFile(t, manifest, httpManifest("example", serverURL, "streamable", ""))
		chown(t, manifests, 65532)

		// The image's default command: --dir /manifests, the gateway on
		// :8808 with the token of /run/secrets/tether/token, metrics on
		// :9464 (published by the server's container, whose network
		// tether shares).
		name := "tether-e2e-" + suffix
		runContainer(t, d, volumes, name, "--network", "container:"+server,
			"--volume", manifests+":/manifests",
			"--volume", secrets+":/run/secrets/tether:ro",
			tag)

		st := waitStatus(t, manifest, "example", 60*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		if st.Server == nil || st.Server.Name != "tether-example-server" {
			t.Errorf("status names server %+v, want tether-example-server", st.Server)
		}
		checkOwner(t, filepath.Join(manifests, "example.status.yaml"), 65532)

		waitHTTP(t, metrics+"/readyz", http.StatusOK, 30*time.Second)

		// A real MCP call through the gateway on its published port,
		// with the bearer token; without it the gateway refuses.
		if code := httpStatus(t, gateway, ""); code != http.StatusUnauthorized {
			t.Errorf("POST %s without the token: %d, want 401", gateway, code)
		}
		gc := connectGateway(t, &mcp.StreamableClientTransport{
			Endpoint:   gateway,
			HTTPClient: &http.Client{Transport: bearer{token: token}},
		})
		res, err := call(gc.session, 20*time.Second, "example_echo", map[string]any{"text": "through the container"})
		if err != nil {
			t.Fatalf("example_echo through the container's gateway: %v", err)
		}
		if got := textOf(res); got != "through the container" {
			t.Errorf("example_echo answered %q", got)
		}
		gc.session.Close()

		stopContainer(t, d, name, manifest)
	})

	// As docs/deploy.md says: with --user the status files are that
	// user's, given a state directory of that user's at /var/lib/tether.
	t.Run("run as the host's user", func(t *testing.T) {
		const uid = 4321
		manifests := t.TempDir()
		manifest := filepath.Join(manifests, "example.yaml")
		writeFile(t, manifest, httpManifest("example", serverURL, "streamable", ""))
		chown(t, manifests, uid)
		state := t.TempDir()
		chown(t, state, uid)

		name := "tether-e2e-user-" + suffix
		runContainer(t, d, volumes, name, "--network", "container:"+server, "--user", fmt.Sprintf("%d:%d", uid, uid),
			"--volume", manifests+":/manifests",
			"--volume", state+":/var/lib/tether",
			"--volume", secrets+":/run/secrets/tether:ro",
			tag)
		waitStatus(t, manifest, "example", 60*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		checkOwner(t, filepath.Join(manifests, "example.status.yaml"), uid)
		stopContainer(t, d, name, manifest)
	})
}

// runContainer runs a detached container named name with args (docker run
// flags, the image, its arguments), removed with its volumes at the end;
// its log is printed when the test fails.
func runContainer(t *testing.T, d *dockerd, volumes *[]string, name string, args ...string) {
	t.Helper()
	d.run(t, append([]string{"run", "--detach", "--name", name}, args...)...)
	containerVolumes(t, d, name, volumes)
	t.Cleanup(func() {
		if t.Failed() {
			// tether logs to standard error: CombinedOutput.
			out, _ := d.command(context.Background(), "logs", name).CombinedOutput()
			t.Logf("container %s logs:\n%s", name, out)
		}
		_, _ = d.try("rm", "--force", "--volumes", name)
	})
}

// checkHostNetworkUntouched checks what the test's own daemon must not do
// to the host (docker_helpers_test.go): make a default bridge, or write
// iptables rules for the test's network (bridge br-<ID>).
func checkHostNetworkUntouched(t *testing.T, d *dockerd, networkID string) {
	t.Helper()
	if _, err := d.try("network", "inspect", "bridge"); err == nil {
		t.Errorf("the test's dockerd made its default bridge network (docker0): want --bridge=none")
	}
	iptables, err := exec.LookPath("iptables")
	if err != nil {
		t.Logf("no iptables on PATH: the daemon's rules are not checked")
		return
	}
	if len(networkID) < 12 {
		t.Fatalf("network create printed %q, not an ID", networkID)
	}
	bridge := "br-" + networkID[:12]
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command(iptables, "-t", table, "-S").CombinedOutput()
		if err != nil {
			t.Logf("iptables -t %s -S: %v: %s", table, err, out)
			continue
		}
		if strings.Contains(string(out), bridge) {
			t.Errorf("the test's dockerd wrote iptables rules (table %s) for its network's bridge %s: want --iptables=false\n%s", table, bridge, out)
		}
	}
}

// stopContainer runs docker stop on a tether container and checks that
// tether stopped by itself (exit status 0: docker kills after the timeout)
// and wrote the status of the manifest's connection "example" on its way
// out.
func stopContainer(t *testing.T, d *dockerd, name, manifest string) {
	t.Helper()
	d.run(t, "stop", "--time", "30", name)
	if code := d.run(t, "inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Errorf("tether exited with status %s on docker stop, want 0", code)
	}
	st, _ := readStatus(t, manifest, "example")
	if st.Phase != spec.PhasePending || !strings.Contains(conditionMessage(st, spec.ConditionReady), "tether stopped") {
		t.Errorf("status after docker stop: phase %s, Ready %q; want Pending, \"tether stopped\"", st.Phase, conditionMessage(st, spec.ConditionReady))
	}
}

// chown gives path to uid (and the group of that number).
func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Chown(path, uid, uid); err != nil {
		t.Fatalf("giving %s to %d: %v", path, uid, err)
	}
}

// checkOwner checks that the status file path belongs to uid:uid and that
// every user of the host may read it.
func checkOwner(t *testing.T, path string, uid uint32) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	sys, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		t.Fatalf("%s: no owner in %T", path, fi.Sys())
	}
	if sys.Uid != uid || sys.Gid != uid {
		t.Errorf("%s is owned by %d:%d, want %d:%d", path, sys.Uid, sys.Gid, uid, uid)
	}
	if fi.Mode().Perm()&0o044 != 0o044 {
		t.Errorf("%s has mode %v: the host's users cannot read it", path, fi.Mode())
	}
}

// publishedAddr is the host address that docker published a container's
// port on (127.0.0.1:PORT).
func publishedAddr(t *testing.T, d *dockerd, container, port string) string {
	t.Helper()
	out := d.run(t, "port", container, port)
	// One line per published address; the test published on 127.0.0.1 only.
	addr, _, _ := strings.Cut(out, "\n")
	if !strings.HasPrefix(addr, "127.0.0.1:") {
		t.Fatalf("docker port %s %s: %q, want 127.0.0.1:PORT", container, port, out)
	}
	return addr
}

// waitHTTP waits until GET url answers want.
func waitHTTP(t *testing.T, url string, want int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last := "no answer"
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("GET %s never answered %d within %v; last: %s", url, want, timeout, last)
}

// httpStatus POSTs an MCP initialize to url with token (none when empty)
// and returns the status code.
func httpStatus(t *testing.T, url, token string) int {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", url, err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// bearer adds a bearer token to every request.
type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// conditionMessage is the message of the condition of type typ, empty when
// there is none.
func conditionMessage(st spec.ConnectionStatus, typ string) string {
	for _, c := range st.Conditions {
		if c.Type == typ {
			return c.Message
		}
	}
	return ""
}

// randomSuffix names the test's images, containers and network apart from
// any other run's on a shared daemon.
func randomSuffix(t *testing.T) string {
	t.Helper()
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// dockerdHelperEnv makes TestImageDockerdStopsWithTheTest, run again by
// itself in a child process, start its own dockerd and wait to be killed.
const dockerdHelperEnv = "TETHER_E2E_DOCKERD_HELPER"

// TestImageDockerdStopsWithTheTest kills (SIGKILL: no cleanup runs, as
// after a go test timeout) a test process that started its own dockerd:
// the daemon and its containerd stop all the same (Pdeathsig), and the next
// run's start removes the directory the killed one left.
func TestImageDockerdStopsWithTheTest(t *testing.T) {
	if os.Getenv(dockerdHelperEnv) != "" {
		daemon, err := exec.LookPath("dockerd")
		if err != nil {
			t.Fatal(err)
		}
		d := startOwnDocker(t, daemon)
		fmt.Printf("dockerd %d %s\n", d.pid, d.dir)
		select {} // until the parent kills this process
	}
	if _, err := exec.LookPath("dockerd"); err != nil {
		dockerMissing(t, "no dockerd on PATH")
	}
	if os.Geteuid() != 0 {
		dockerMissing(t, "only root can start dockerd")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestImageDockerdStopsWithTheTest$", "-test.v")
	child.Env = append(os.Environ(), dockerdHelperEnv+"=1")
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	child.Stderr = logs
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	var pid int
	var dir string
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if n, _ := fmt.Sscanf(sc.Text(), "dockerd %d %s", &pid, &dir); n == 2 {
			break
		}
	}
	if pid == 0 {
		_ = child.Process.Kill()
		_ = child.Wait()
		t.Fatalf("the child test never started its dockerd:\n%s", logs.String())
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	containerd := processesNaming(dir, pid)
	t.Logf("the child's dockerd: pid %d, in %s; processes of that directory besides it: %v", pid, dir, containerd)

	if err := child.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()

	deadline := time.Now().Add(60 * time.Second)
	for (alive(pid) || len(processesNaming(dir, 0)) > 0) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := processesNaming(dir, 0); alive(pid) || len(left) > 0 {
		t.Errorf("dockerd (pid %d; alive %v) or processes of its directory %v outlived the killed test by 60 s", pid, alive(pid), left)
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed test's directory %s: %v (it cannot have removed it)", dir, err)
	}
	clearDockerdLeftovers(t)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the next run left the killed test's directory %s in place (%v)", dir, err)
	}
}

// processesNaming is the processes, but except, whose command line names
// dir (dockerd's containerd and shims).
func processesNaming(dir string, except int) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == except || pid == os.Getpid() || !alive(pid) {
			continue
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), dir) {
			pids = append(pids, pid)
		}
	}
	return pids
}
