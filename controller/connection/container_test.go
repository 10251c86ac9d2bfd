package connection

import (
	"context"
	"encoding/csv"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// TestContainerArgs: the runtime's command line sets every limit, passes
// each option as --name=value (a value never passes for an option), puts
// "--" before the image, and holds the paths of the secrets, never them.
func TestContainerArgs(t *testing.T) {
	dir := t.TempDir()
	rt := &ContainerRuntime{Name: "docker", Path: "/usr/bin/docker", Owner: "0123abcd", Init: "/usr/local/bin/tether"}
	s := &Session{name: "box", conn: &Connector{containers: rt}}
	ct := &container{rt: rt, name: "tether-box-00000000", dir: filepath.Join(dir, "ct")}
	pids := 9
	c := &spec.ContainerSpec{
		Image: "srv:1", Command: []string{"/bin/server", "-v"}, Args: []string{"--flag"},
		Network: "mcp", Port: 8080, Memory: "64Mi", Pids: &pids, User: "65532",
		Mounts: []spec.Mount{{Source: "data", Target: "/data"}, {Source: ".w", Target: "/w,x", Writable: true}},
	}
	for _, d := range []string{"data", ".w"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	args, err := s.containerArgs(context.Background(), ct, c, dir, false, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"run", "--rm", "--name=tether-box-00000000", "--publish=127.0.0.1::8080/tcp", "--network=mcp",
		"--memory=67108864", "--memory-swap=67108864", "--pids-limit=9", "--cap-drop=ALL",
		"--security-opt=no-new-privileges", "--log-driver=none", "--user=65532",
		"--label=dev.tether.connection=box", "--label=dev.tether.owner=0123abcd",
		"--mount=type=bind,source=" + filepath.Join(dir, "data") + ",target=/data,readonly",
		"--mount=type=bind,source=" + filepath.Join(dir, "ct", "secrets") + ",target=/run/secrets,readonly",
		"--entrypoint=/bin/server",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %q: %q", want, args)
		}
	}
	// The writable mount: no readonly, and the comma in its target quoted.
	var writable string
	for _, a := range args {
		if strings.Contains(a, "/w,x") {
			writable = strings.TrimPrefix(a, "--mount=")
		}
	}
	fields, err := csv.NewReader(strings.NewReader(writable)).Read()
	if err != nil || !slices.Equal(fields, []string{"type=bind", "source=" + filepath.Join(dir, ".w"), "target=/w,x"}) {
		t.Errorf("writable mount %q reads as %q (%v)", writable, fields, err)
	}
	i := slices.Index(args, "--")
	if i < 0 || !slices.Equal(args[i:], []string{"--", "srv:1", "-v", "--flag"}) {
		t.Errorf("args end %q, want -- srv:1 -v --flag", args[max(i, 0):])
	}
	for _, a := range args[:max(i, 0)] {
		if !strings.HasPrefix(a, "--") && a != "run" {
			t.Errorf("option %q is not --name=value", a)
		}
	}
	if slices.Contains(args, "--interactive") {
		t.Errorf("a port server's stdin is attached: %q", args)
	}

	// A stdio server: stdin attached, nothing published; a mount that is
	// not there is reported before anything runs.
	c.Port, c.Mounts = 0, []spec.Mount{{Source: "missing", Target: "/m"}}
	if _, err := s.containerArgs(context.Background(), ct, c, dir, false, false); err == nil || !strings.Contains(err.Error(), "container.mounts: source "+filepath.Join(dir, "missing")) {
		t.Errorf("missing mount source: %v", err)
	}
	// A manifest directory given relative (tether run --dir ./m): the
	// runtime's daemon gets an absolute source all the same.
	t.Chdir(dir)
	c.Mounts = []spec.Mount{{Source: "data", Target: "/data"}}
	args, err = s.containerArgs(context.Background(), ct, c, ".", false, false)
	if err != nil || !slices.Contains(args, "--mount=type=bind,source="+filepath.Join(dir, "data")+",target=/data,readonly") {
		t.Errorf("relative manifest directory: %q (%v), want the absolute source", args, err)
	}
	c.Mounts = nil
	args, err = s.containerArgs(context.Background(), ct, c, dir, false, false)
	if err != nil || !slices.Contains(args, "--interactive") || slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--publish") }) {
		t.Errorf("stdio server args %q (%v): want --interactive and nothing published", args, err)
	}
}

// TestContainerArgsWithEnv: with env the entrypoint is tether's own binary,
// mounted read-only, and the command is the manifest's in full after the
// env file's path, so that the env never shows in the container's
// configuration.
func TestContainerArgsWithEnv(t *testing.T) {
	rt := &ContainerRuntime{Name: "docker", Path: "/usr/bin/docker", Init: "/opt/tether"}
	s := &Session{name: "box", conn: &Connector{containers: rt}}
	ct := &container{rt: rt, name: "tether-box-1", dir: "/state/containers/tether-box-1"}
	c := &spec.ContainerSpec{Image: "srv:1", Command: []string{"server"}, Args: []string{"-x"}}
	args, err := s.containerArgs(context.Background(), ct, c, "", true, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"--mount=type=bind,source=/opt/tether,target=/.tether/init,readonly",
		"--mount=type=bind,source=/state/containers/tether-box-1/env,target=/.tether/env,readonly",
		"--entrypoint=/.tether/init",
	} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %q: %q", want, args)
		}
	}
	i := slices.Index(args, "--")
	if want := []string{"--", "srv:1", "container-init", "/.tether/env", "--", "server", "-x"}; i < 0 || !slices.Equal(args[i:], want) {
		t.Errorf("args end %q, want %q", args[max(i, 0):], want)
	}
}

func TestMergeEnv(t *testing.T) {
	got := mergeEnv([]string{"PATH=/bin", "HOME=/", "X"}, []string{"HOME=/home/s", "TOKEN=t=u"})
	if want := []string{"PATH=/bin", "HOME=/home/s", "X", "TOKEN=t=u"}; !slices.Equal(got, want) {
		t.Errorf("mergeEnv = %q, want %q", got, want)
	}
}

// TestRunContainerInitRefuses: what the entrypoint does when it cannot
// start the server, and that it never quotes the env file.
func TestRunContainerInitRefuses(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "env")
	if err := os.WriteFile(bad, []byte("TOKEN=s3cret-not-json"), 0o600); err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(`["PATH=`+dir+`"]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{bad}, "usage: tether container-init ENVFILE -- COMMAND"},
		{[]string{bad, "server"}, "usage:"},
		{[]string{bad, "x", "server"}, "usage:"},
		{[]string{filepath.Join(dir, "none"), "--", "server"}, "no such file"},
		{[]string{bad, "--", "server"}, bad + ": invalid character"},
		{[]string{good, "--", "not-here"}, "not-here: not found on the container's PATH"},
	} {
		err := RunContainerInit(tc.args)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("RunContainerInit(%q) = %v, want an error with %q and no secret", tc.args, err, tc.want)
		}
	}
}

func TestParseTetherLabel(t *testing.T) {
	for in, want := range map[string]bool{"42-1234": true, "42": false, "x-1": false, "42-x": false, "0-5": false, "": false} {
		if _, _, ok := parseTetherLabel(in); ok != want {
			t.Errorf("parseTetherLabel(%q) ok = %v, want %v", in, ok, want)
		}
	}
	if pid, start, _ := parseTetherLabel("42-1234"); pid != 42 || start != 1234 {
		t.Errorf("parseTetherLabel(42-1234) = %d, %d", pid, start)
	}
}

// TestStaticLinuxProblem: only a static Linux executable may be mounted
// into a container as its entrypoint.
func TestStaticLinuxProblem(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if p := staticLinuxProblem(notELF); !strings.Contains(p, "not a Linux executable") {
		t.Errorf("a script: %q", p)
	}
	if runtime.GOOS != "linux" {
		return
	}
	// /bin/sh is linked dynamically on every Linux this runs on.
	if p := staticLinuxProblem("/bin/sh"); !strings.Contains(p, "linked dynamically") {
		t.Errorf("/bin/sh: %q", p)
	}
}

// TestContainerConnectWithoutRuntime: a container server without a
// runtime fails with an error that says what to do, and starts nothing.
func TestContainerConnectWithoutRuntime(t *testing.T) {
	_, err := Connect(context.Background(), Request{Name: "box", Spec: &spec.Spec{Container: &spec.ContainerSpec{Image: "srv:1"}}})
	if err == nil || !strings.Contains(err.Error(), "no container runtime: docker or podman must be on PATH (tether run --container-runtime)") {
		t.Errorf("Connect without a runtime: %v", err)
	}
	// env needs tether's binary in the container; a secret file does not.
	c := NewConnector(ConnectorOptions{Containers: &ContainerRuntime{Name: "docker", Path: "/nonexistent/docker", InitProblem: "tether is linked dynamically"}})
	defer c.Close()
	v := "s3cret"
	_, err = c.Connect(context.Background(), Request{Name: "box", Spec: &spec.Spec{Container: &spec.ContainerSpec{Image: "srv:1", Env: []spec.EnvVar{{Name: "T", Value: &v}}}}})
	if err == nil || !strings.Contains(err.Error(), "container.env cannot be set inside the container: tether is linked dynamically") {
		t.Errorf("Connect with env and no usable init: %v", err)
	}
}

// TestContainerArgsRefuseStateDir: no mount shows a container tether's
// state directory (every connection's secrets and tokens, the other
// containers' secret files): not the directory, nothing in it, nothing
// that holds it (the manifest's directory holds the default one), not
// through a symbolic link. A directory beside it is fine.
func TestContainerArgsRefuseStateDir(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, ".tether")
	for _, d := range []string{filepath.Join(state, "containers"), filepath.Join(dir, "data")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	rt := &ContainerRuntime{Name: "docker", Path: "/usr/bin/docker", StateDir: state}
	s := &Session{name: "box", conn: &Connector{containers: rt}}
	ct := &container{rt: rt, name: "tether-box-1"}
	mount := func(src string) error {
		c := &spec.ContainerSpec{Image: "srv:1", Mounts: []spec.Mount{{Source: src, Target: "/m"}}}
		_, err := s.containerArgs(context.Background(), ct, c, dir, false, false)
		return err
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(state, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	for _, src := range []string{".", dir, state, ".tether/containers", "link", filepath.Dir(dir)} {
		if err := mount(src); err == nil || !strings.Contains(err.Error(), "tether's state directory "+state) {
			t.Errorf("mount of %s: %v, want it refused for showing the state directory", src, err)
		}
	}
	if err := mount("data"); err != nil {
		t.Errorf("mount of a directory beside the state directory: %v", err)
	}
}

// TestContainerArgsRefuseWritingWhatTetherRuns: a writable mount may not be
// or hold the manifest's directory (a manifest the server writes there runs
// any command on the host) or tether's executable, nor lie in the manifest
// tree but beneath a hidden name, as a sandbox's write grant may not;
// read-only, or beside them, they are fine.
func TestContainerArgsRefuseWritingWhatTetherRuns(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "manifests")
	for _, d := range []string{filepath.Join(dir, "data", "sub"), filepath.Join(dir, ".cache", "x"), filepath.Join(root, "other")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	rt := &ContainerRuntime{Name: "docker", Path: "/usr/bin/docker"}
	s := &Session{name: "box", conn: &Connector{containers: rt}}
	ct := &container{rt: rt, name: "tether-box-1"}
	mount := func(src string, writable bool) error {
		c := &spec.ContainerSpec{Image: "srv:1", Mounts: []spec.Mount{{Source: src, Target: "/m", Writable: writable}}}
		_, err := s.containerArgs(context.Background(), ct, c, dir, false, false)
		return err
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{".", root, filepath.Dir(self)} {
		if err := mount(src, true); err == nil || !strings.Contains(err.Error(), "could change what tether runs") {
			t.Errorf("writable mount of %s: %v, want it refused", src, err)
		}
		if err := mount(src, false); err != nil {
			t.Errorf("read-only mount of %s: %v", src, err)
		}
	}
	// In the manifest tree: the server would write a manifest there.
	for _, src := range []string{"data", "data/sub"} {
		if err := mount(src, true); err == nil || !strings.Contains(err.Error(), "whose manifests tether reads") {
			t.Errorf("writable mount of %s: %v, want it refused", src, err)
		}
		if err := mount(src, false); err != nil {
			t.Errorf("read-only mount of %s: %v", src, err)
		}
	}
	for _, src := range []string{".cache", ".cache/x", filepath.Join(root, "other")} {
		if err := mount(src, true); err != nil {
			t.Errorf("writable mount of %s, beside what tether runs: %v", src, err)
		}
	}
}

// TestContainerArgsRefuseWritingTheManifestTree: a writable mount may not
// lie in a directory of the manifest tree beside the manifest's own, nor
// in one outside the tree that a symbolic link in it names.
func TestContainerArgsRefuseWritingTheManifestTree(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "manifests")
	team := filepath.Join(tree, "team")
	for _, d := range []string{team, filepath.Join(tree, "shared"), filepath.Join(root, "outside"), filepath.Join(root, "elsewhere")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(tree, "linked")); err != nil {
		t.Fatal(err)
	}
	rt := &ContainerRuntime{Name: "docker", Path: "/usr/bin/docker"}
	s := &Session{name: "box", conn: &Connector{containers: rt, manifestRoot: tree}}
	ct := &container{rt: rt, name: "tether-box-1"}
	mount := func(src string) error {
		c := &spec.ContainerSpec{Image: "srv:1", Mounts: []spec.Mount{{Source: src, Target: "/m", Writable: true}}}
		_, err := s.containerArgs(context.Background(), ct, c, team, false, false)
		return err
	}
	for _, src := range []string{"../shared", filepath.Join(root, "outside")} {
		if err := mount(src); err == nil || !inManifestTree(err) {
			t.Errorf("writable mount of %s: %v, want it refused as in the manifest tree", src, err)
		}
	}
	if err := mount(filepath.Join(root, "elsewhere")); err != nil {
		t.Errorf("writable mount beside the tree: %v", err)
	}
}

// TestContainerArgsTakeTheSourcesListing: with ManifestDirs (tether run:
// the manifest source's last listing), a connect takes the directories
// that listing found, relative ones made absolute, instead of walking the
// tree again: a directory the listing has is refused even where a walk of
// the root now would not find it.
func TestContainerArgsTakeTheSourcesListing(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "manifests")
	for _, d := range []string{tree, filepath.Join(root, "listed"), filepath.Join(root, "elsewhere")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	rt := &ContainerRuntime{Name: "docker", Path: "/usr/bin/docker"}
	s := &Session{name: "box", conn: &Connector{containers: rt, manifestRoot: tree,
		manifestDirs: func() []string { return []string{"manifests", "listed"} }}}
	ct := &container{rt: rt, name: "tether-box-1"}
	mount := func(src string) error {
		c := &spec.ContainerSpec{Image: "srv:1", Mounts: []spec.Mount{{Source: src, Target: "/m", Writable: true}}}
		_, err := s.containerArgs(context.Background(), ct, c, tree, false, false)
		return err
	}
	if err := mount(filepath.Join(root, "listed")); !inManifestTree(err) {
		t.Errorf("writable mount of a directory the source listed: %v, want it refused as in the manifest tree", err)
	}
	if err := mount(filepath.Join(root, "elsewhere")); err != nil {
		t.Errorf("writable mount beside the tree: %v", err)
	}
}

// inManifestTree reports whether err refuses a path as (in, or holding, a
// directory of) the manifest tree.
func inManifestTree(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "whose manifests tether reads") || strings.Contains(err.Error(), "holds the manifest tree tether watches"))
}
