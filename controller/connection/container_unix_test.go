//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// TestWriteContainerDir: the directory is 0700, what the container reads
// in it is readable by any of its users, and the env file holds the
// entries the entrypoint sets.
func TestWriteContainerDir(t *testing.T) {
	old := syscall.Umask(0o077) // the files must be readable whatever the umask
	defer syscall.Umask(old)
	parent := filepath.Join(t.TempDir(), "containers")
	dir, err := writeContainerDir(parent, "tether-x-1", []namedValue{{"A", "1"}, {"TOKEN", "s3cret"}}, []namedValue{{"api-token", "s3cret"}})
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]os.FileMode{
		parent: 0o700, dir: 0o700, filepath.Join(dir, "secrets"): 0o755,
		filepath.Join(dir, "env"): 0o444, filepath.Join(dir, "secrets", "api-token"): 0o444,
	} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, mode %v, want %v", path, err, fi.Mode().Perm(), want)
		}
	}
	var env []string
	if b, err := os.ReadFile(filepath.Join(dir, "env")); err != nil || json.Unmarshal(b, &env) != nil || !slices.Equal(env, []string{"A=1", "TOKEN=s3cret"}) {
		t.Errorf("env file: %q (%v)", env, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "secrets", "api-token")); string(b) != "s3cret" {
		t.Errorf("secret file holds %q", b)
	}
	// A name taken already fails, and leaves nothing behind.
	if _, err := writeContainerDir(parent, "tether-x-1", nil, nil); err == nil {
		t.Errorf("a second directory of the same name was made")
	}
}

// TestRemoveLeftoverContainers drives RemoveLeftoverContainers against a
// runtime command that is a script: it lists four containers of the owner
// label, and only those whose tether is gone (a dead pid, a label that
// does not parse) are removed; this tether's own and a running process's
// are kept. Of the directories, only an old one that no kept container
// names goes; one made since the start (a container of this tether that
// the listing may not show yet) stays.
func TestRemoveLeftoverContainers(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	self, err := startTicks(os.Getpid())
	if err != nil {
		t.Skipf("no start time of a process here: %v", err)
	}
	parent, err := startTicks(os.Getppid())
	if err != nil {
		t.Fatal(err)
	}
	// The container list the script prints for inspect: name, then the
	// tether label.
	// id0 is gone by the time it is inspected (one of this tether's own,
	// stopped meanwhile): the others are read all the same.
	listing := []string{
		"/tether-a-dead\t999999999-12345",
		"/tether-b-mine\t" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(self, 10),
		"/tether-c-parent\t" + strconv.Itoa(os.Getppid()) + "-" + strconv.FormatUint(parent, 10),
		"/tether-d-garbled\tnot-a-label",
		"/tether-e-reused\t" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatUint(self+1, 10),
	}
	var inspect strings.Builder
	for i, l := range listing {
		fmt.Fprintf(&inspect, "id%d) printf '%%s\\n' '%s' ;;\n", i+1, l)
	}
	script := filepath.Join(dir, "docker")
	writeScript(t, script, `#!/bin/sh
echo "$*" >> `+calls+`
case "$1" in
ps) printf 'id0\nid1\nid2\nid3\nid4\nid5\n' ;;
container)
	eval "id=\${$#}"
	case "$id" in
	`+inspect.String()+`
	*) echo "Error response from daemon: No such container: $id" >&2; exit 1 ;;
	esac ;;
rm) ;;
esac
`)
	containers := filepath.Join(dir, "containers")
	for _, d := range []string{"tether-a-dead", "tether-b-mine", "tether-old-gone"} {
		if err := os.MkdirAll(filepath.Join(containers, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	rt := &ContainerRuntime{Name: "docker", Path: script, Dir: containers, Owner: "0123", Started: time.Now().Add(time.Hour)}
	if err := os.MkdirAll(filepath.Join(containers, "tether-new"), 0o700); err != nil {
		t.Fatal(err)
	}
	future := time.Now().Add(2 * time.Hour)
	if err := os.Chtimes(filepath.Join(containers, "tether-new"), future, future); err != nil {
		t.Fatal(err)
	}
	removed := RemoveLeftoverContainers(context.Background(), rt, slog.New(slog.DiscardHandler))
	if want := []string{"tether-a-dead", "tether-d-garbled", "tether-e-reused"}; !slices.Equal(removed, want) {
		t.Errorf("removed %q, want %q", removed, want)
	}
	log, _ := os.ReadFile(calls)
	for _, want := range []string{"ps --all --quiet --no-trunc --filter=label=dev.tether.owner=0123", "rm --force tether-a-dead", "rm --force tether-d-garbled"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the runtime was not asked %q:\n%s", want, log)
		}
	}
	if strings.Contains(string(log), "tether-b-mine") && strings.Contains(string(log), "rm --force tether-b-mine") {
		t.Errorf("this tether's own container was removed:\n%s", log)
	}
	if strings.Contains(string(log), "rm --force tether-c-parent") {
		t.Errorf("a running tether's container was removed:\n%s", log)
	}
	entries, _ := os.ReadDir(containers)
	var left []string
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"tether-b-mine", "tether-new"}; !slices.Equal(left, want) {
		t.Errorf("directories left %q, want %q", left, want)
	}
}

func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestFindContainerRuntime: auto takes docker, else podman, from PATH; a
// runtime named and not found is an error that names it; the owner label
// is a digest of the state directory, absent without one.
func TestFindContainerRuntime(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	if _, err := FindContainerRuntime("auto", "", ""); err == nil || !strings.Contains(err.Error(), "--container-runtime auto: no docker or podman found on PATH") {
		t.Errorf("auto with neither: %v", err)
	}
	writeScript(t, filepath.Join(bin, "podman"), "#!/bin/sh\n")
	rt, err := FindContainerRuntime("auto", "/state/containers", "/state")
	if err != nil || rt.Name != "podman" || rt.Path != filepath.Join(bin, "podman") || rt.Dir != "/state/containers" || len(rt.Owner) != 16 || rt.StateDir != "/state" {
		t.Fatalf("auto with podman: %+v, %v", rt, err)
	}
	writeScript(t, filepath.Join(bin, "docker"), "#!/bin/sh\n")
	rt2, err := FindContainerRuntime("auto", "", "/other")
	if err != nil || rt2.Name != "docker" || rt2.Owner == rt.Owner || rt2.Owner == "" {
		t.Errorf("auto with both: %+v, %v (want docker, another owner)", rt2, err)
	}
	if rt3, err := FindContainerRuntime("podman", "", ""); err != nil || rt3.Name != "podman" || rt3.Owner != "" {
		t.Errorf("podman named, no state directory: %+v, %v", rt3, err)
	}
	if _, err := FindContainerRuntime("nerdctl", "", ""); err == nil || !strings.Contains(err.Error(), `--container-runtime: exec: "nerdctl": executable file not found in $PATH`) {
		t.Errorf("a runtime that is not there: %v", err)
	}
}

// TestContainerOwnerFollowsLinks: a state directory named through a
// symbolic link labels its containers as named directly (one lock, one
// owner: the containers a tether killed through one spelling are leftovers
// for the next start through the other).
func TestContainerOwnerFollowsLinks(t *testing.T) {
	bin := t.TempDir()
	t.Setenv("PATH", bin)
	writeScript(t, filepath.Join(bin, "docker"), "#!/bin/sh\n")
	real := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(real, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	direct, err := FindContainerRuntime("docker", "", real)
	if err != nil {
		t.Fatal(err)
	}
	linked, err := FindContainerRuntime("docker", "", link)
	if err != nil {
		t.Fatal(err)
	}
	if linked.Owner != direct.Owner {
		t.Errorf("owner through a link %s, directly %s: want one", linked.Owner, direct.Owner)
	}
}

// TestContainerPortServerWithScriptedRuntime runs a port server through a
// runtime command that is a script: `run` writes a megabyte to stdout (a
// server that logs there) and then runs the go-sdk's everything-server on
// a port, which `port` reports. Connect waits for the port and for HTTP,
// connects over streamable HTTP, and keeps reading stdout (unread, the
// script would block on the full pipe and the server never start); the
// stdout lines reach the tail. Close removes the container by its name.
func TestContainerPortServerWithScriptedRuntime(t *testing.T) {
	server := goEverything(t)
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	port := testport.Free(t)
	script := filepath.Join(dir, "docker")
	writeScript(t, script, `#!/bin/sh
echo "$*" >> `+calls+`
case "$1" in
run)
	head -c 1048576 /dev/zero | tr '\0' x
	echo
	echo "a line on stdout"
	exec `+server+` -http=127.0.0.1:`+strconv.Itoa(port)+` ;;
port) echo "127.0.0.1:`+strconv.Itoa(port)+`" ;;
esac
`)
	c := NewConnector(ConnectorOptions{Containers: &ContainerRuntime{Name: "docker", Path: script}})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := c.Connect(ctx, Request{Name: "box", Logger: testLogger(t),
		Spec: &spec.Spec{Container: &spec.ContainerSpec{Image: "srv:1", Network: "bridge", Port: 8080}}})
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	p := s.Process()
	if p == nil || !strings.HasPrefix(p.Container, "tether-box-") || p.Runtime != "docker" {
		t.Errorf("process = %+v, want the container and runtime", p)
	}
	if len(s.Tools()) == 0 {
		t.Errorf("no tools listed over the published port")
	}
	deadline := time.Now().Add(5 * time.Second)
	for !slices.Contains(s.Process().StderrTail, "a line on stdout") {
		if time.Now().After(deadline) {
			t.Fatalf("stdout never reached the tail: %q", s.Process().StderrTail)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	log, _ := os.ReadFile(calls)
	if !strings.Contains(string(log), "rm --force "+p.Container) || !strings.Contains(string(log), "--publish=127.0.0.1::8080/tcp") {
		t.Errorf("the runtime was not asked to publish on 127.0.0.1 and to remove the container:\n%s", log)
	}
}

// TestContainerRuntimeRefusalExplained: when the runtime's command refuses
// its options (exit 125), the error says what it said was wrong, not the
// "Run 'docker run --help'" line it ends with.
func TestContainerRuntimeRefusalExplained(t *testing.T) {
	script := filepath.Join(t.TempDir(), "docker")
	writeScript(t, script, `#!/bin/sh
case "$1" in
run)
	echo "docker: Error response from daemon: invalid mount config for type \"bind\": bind source path does not exist: /nowhere." >&2
	echo >&2
	echo "Run 'docker run --help' for more information" >&2
	exit 125 ;;
esac
`)
	c := NewConnector(ConnectorOptions{Containers: &ContainerRuntime{Name: "docker", Path: script}})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err := c.Connect(ctx, Request{Name: "box", Spec: &spec.Spec{Container: &spec.ContainerSpec{Image: "srv:1"}}})
	if err == nil || !strings.Contains(err.Error(), "stderr: docker: Error response from daemon: invalid mount config") {
		t.Errorf("Connect: %v, want the daemon's reason", err)
	}
}

// TestRuntimeCommandBounded: a runtime command that hangs is killed at its
// bound, and a process it started that holds its output (podman
// re-executes itself in a user namespace) does not hold the wait beyond
// it: output returns an error, not when that process ends.
func TestRuntimeCommandBounded(t *testing.T) {
	dir := t.TempDir()
	script, pidFile := filepath.Join(dir, "docker"), filepath.Join(dir, "pid")
	writeScript(t, script, "#!/bin/sh\nsleep 60 &\necho $! > "+pidFile+"\nexec sleep 60\n")
	t.Cleanup(func() {
		if b, err := os.ReadFile(pidFile); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	rt := &ContainerRuntime{Name: "docker", Path: script, commandTimeout: 100 * time.Millisecond}
	done := make(chan error, 1)
	go func() {
		_, err := rt.output(context.Background(), "ps")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("a hung runtime command succeeded")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the runtime command is still waited for 30s after its bound")
	}
}

// TestContainerPullWithinConnect: an image that is not there yet is pulled
// within the connect's bound, not the runtime's short one for its other
// commands (a large image takes long): the pull that outlasts the latter
// completes and the container runs.
func TestContainerPullWithinConnect(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "docker")
	writeScript(t, script, `#!/bin/sh
echo "$*" >> `+calls+`
case "$1" in
image) [ -f `+dir+`/pulled ] || { echo "Error: No such image: srv:1" >&2; exit 1; }
	printf '["/server"]\tnull\n' ;;
pull) sleep 1; touch `+dir+`/pulled ;;
run) echo "the container ran" >&2; exit 3 ;;
esac
`)
	rt := &ContainerRuntime{Name: "docker", Path: script, Init: script, commandTimeout: 200 * time.Millisecond}
	c := NewConnector(ConnectorOptions{Containers: rt})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	v := "x"
	_, err := c.Connect(ctx, Request{Name: "box", Spec: &spec.Spec{Container: &spec.ContainerSpec{Image: "srv:1", Env: []spec.EnvVar{{Name: "A", Value: &v}}}}})
	if err == nil || !strings.Contains(err.Error(), "the container ran") {
		t.Errorf("Connect: %v, want the container run after the pull", err)
	}
	log, _ := os.ReadFile(calls)
	if !strings.Contains(string(log), "pull --quiet -- srv:1") {
		t.Errorf("the image was not pulled:\n%s", log)
	}
}

// TestImageCommand: with env, tether runs the image's entrypoint and cmd
// itself, as the runtime would without env: args replace the cmd, and an
// empty args leaves it (the runtime cannot be told to drop it).
func TestImageCommand(t *testing.T) {
	script := filepath.Join(t.TempDir(), "docker")
	writeScript(t, script, "#!/bin/sh\nprintf '[\"/entry\",\"-e\"]\\t[\"serve\",\"--port=1\"]\\n'\n")
	rt := &ContainerRuntime{Name: "docker", Path: script}
	s := &Session{name: "box", conn: &Connector{containers: rt}}
	for _, tc := range []struct {
		command, args []string
		want          []string
	}{
		{nil, nil, []string{"/entry", "-e", "serve", "--port=1"}},
		{nil, []string{}, []string{"/entry", "-e", "serve", "--port=1"}},
		{nil, []string{"other"}, []string{"/entry", "-e", "other"}},
		{[]string{"/bin/x"}, nil, []string{"/bin/x"}},
		{[]string{"/bin/x"}, []string{"y"}, []string{"/bin/x", "y"}},
	} {
		got, err := s.imageCommand(context.Background(), rt, &spec.ContainerSpec{Image: "srv:1", Command: tc.command, Args: tc.args})
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("command %q args %q: %q (%v), want %q", tc.command, tc.args, got, err, tc.want)
		}
	}
}

// TestContainerSecretsRedacted: what a container server writes to stderr
// (its tail, the connect error) never shows a value of its env or of its
// secretFiles, each resolved on its own.
func TestContainerSecretsRedacted(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "docker")
	// The runtime's command prints what the server would: both values.
	writeScript(t, script, `#!/bin/sh
case "$1" in
image) printf '["/server"]\tnull\n' ;;
run) echo "env token env-s3cret-1234, file token file-s3cret-5678" >&2; exit 1 ;;
esac
`)
	c := NewConnector(ConnectorOptions{Containers: &ContainerRuntime{Name: "docker", Path: script, Init: script, Dir: filepath.Join(dir, "containers")}})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	envVal, fileVal := "env-s3cret-1234", "file-s3cret-5678"
	_, err := c.Connect(ctx, Request{Name: "box", Spec: &spec.Spec{Container: &spec.ContainerSpec{
		Image:       "srv:1",
		Env:         []spec.EnvVar{{Name: "TOKEN", Value: &envVal}},
		SecretFiles: []spec.EnvVar{{Name: "token", Value: &fileVal}},
	}}})
	if err == nil || !strings.Contains(err.Error(), "env token") {
		t.Fatalf("Connect: %v, want the server's last words", err)
	}
	var pe interface{ ProcessStatus() *spec.ProcessStatus }
	tail := ""
	if errors.As(err, &pe) && pe.ProcessStatus() != nil {
		tail = strings.Join(pe.ProcessStatus().StderrTail, "\n")
	}
	for _, v := range []string{envVal, fileVal} {
		if strings.Contains(err.Error(), v) || strings.Contains(tail, v) {
			t.Errorf("%s shows: %v\n%s", v, err, tail)
		}
	}
}

// A tether whose state directory never saw a container runs no runtime
// command at start; one whose last run started a container (the mark)
// looks for leftovers, and the mark goes with the search; a container
// start leaves it again.
func TestLeftoverSearchOnlyAfterContainers(t *testing.T) {
	dir := t.TempDir()
	calls := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "docker")
	writeScript(t, script, "#!/bin/sh\necho \"$*\" >> "+calls+"\n")
	containers := filepath.Join(dir, "containers")
	rt := &ContainerRuntime{Name: "docker", Path: script, Dir: containers, Owner: "0123", Started: time.Now().Add(time.Hour)}
	log := slog.New(slog.DiscardHandler)

	// A state directory that never had a container: no containers/ yet.
	RemoveLeftoverContainers(context.Background(), rt, log)
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("the runtime ran with no containers directory: %q", b)
	}
	if err := os.Mkdir(containers, 0o700); err != nil {
		t.Fatal(err)
	}
	RemoveLeftoverContainers(context.Background(), rt, log)
	if b, err := os.ReadFile(calls); err == nil {
		t.Fatalf("the runtime ran with no container ever started here: %q", b)
	}
	if err := os.Remove(containers); err != nil {
		t.Fatal(err)
	}

	rt.markUsed()
	if _, err := os.Stat(filepath.Join(containers, usedMark)); err != nil {
		t.Fatalf("no mark after a start: %v", err)
	}
	RemoveLeftoverContainers(context.Background(), rt, log)
	if b, _ := os.ReadFile(calls); !strings.Contains(string(b), "ps --all") {
		t.Fatalf("no search after a container was started here: %q", b)
	}
	if _, err := os.Stat(filepath.Join(containers, usedMark)); !os.IsNotExist(err) {
		t.Errorf("the mark outlived the search: %v", err)
	}
}
