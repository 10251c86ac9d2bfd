package connection

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/sandbox"
	"github.com/tether-mcp/tether/spec"
)

// TestContainerStartClassifiesItsErrors: each way a container's start
// fails before its runtime runs it is either a policy tether refuses
// (sandbox.RefusedError, held until the spec changes), naming the mount's
// field and its source (a relative one, too, when there is no directory to
// resolve it against), or an error retried with backoff: no runtime, a
// source missing, an image the runtime cannot
// inspect or pull, a source that reaches what tether protects only through
// a symbolic link (which may change with no new spec).
func TestContainerStartClassifiesItsErrors(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("the fake runtime is a shell script")
	}
	root := t.TempDir()
	tree := filepath.Join(root, "manifests")
	team := filepath.Join(tree, "team")
	state := filepath.Join(root, "state")
	for _, d := range []string{team, filepath.Join(state, "containers"), filepath.Join(tree, "shared"), filepath.Join(root, "data")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"to-team": team, "to-state": state} {
		if err := os.Symlink(to, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	// A runtime that knows no image and cannot pull one.
	fake := filepath.Join(root, "docker")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho \"Error: No such image: $*\" >&2\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	rt := &ContainerRuntime{Name: "docker", Path: fake, StateDir: state}
	s := &Session{name: "box", conn: &Connector{containers: rt, manifestRoot: tree}}
	ct := &container{rt: rt, name: "tether-box-1"}
	data := spec.Mount{Source: filepath.Join(root, "data"), Target: "/data", Writable: true}
	for _, tc := range []struct {
		name        string
		mount       spec.Mount
		manifestDir string
		env         bool
		refused     string // the refusal's start; "" for an error retried
		retried     string // a retried error's text
	}{
		{name: "writable mount of the manifest's directory", mount: spec.Mount{Source: ".", Target: "/m", Writable: true},
			refused: "spec.container.mounts[1]: " + team + " (writable) holds the manifest's directory"},
		{name: "writable mount in the manifest tree", mount: spec.Mount{Source: "../shared", Target: "/m", Writable: true},
			refused: "spec.container.mounts[1]: " + filepath.Join(tree, "shared") + " (writable) is in the manifest tree tether watches"},
		{name: "mount in the state directory", mount: spec.Mount{Source: filepath.Join(state, "containers"), Target: "/m"},
			refused: "spec.container.mounts[1]: " + filepath.Join(state, "containers") + " is in tether's state directory"},
		{name: "mount that holds the state directory", mount: spec.Mount{Source: root, Target: "/m"},
			refused: "spec.container.mounts[1]: " + root + " holds tether's state directory"},
		{name: "writable mount that reaches the manifest's directory through a link", mount: spec.Mount{Source: filepath.Join(root, "to-team"), Target: "/m", Writable: true},
			retried: "spec.container.mounts[1]: " + filepath.Join(root, "to-team") + " (writable) holds the manifest's directory"},
		{name: "mount that reaches the state directory through a link", mount: spec.Mount{Source: filepath.Join(root, "to-state"), Target: "/m"},
			retried: "spec.container.mounts[1]: " + filepath.Join(root, "to-state") + " holds tether's state directory"},
		{name: "a source missing", mount: spec.Mount{Source: "missing", Target: "/m"},
			retried: "container.mounts: source " + filepath.Join(team, "missing")},
		{name: "a relative source, no manifest directory", mount: spec.Mount{Source: "rel", Target: "/m"}, manifestDir: "-",
			refused: "spec.container.mounts[0]: source \"rel\" is relative but the manifest's directory is unknown"},
		{name: "an image that cannot be pulled", mount: spec.Mount{Source: filepath.Join(root, "data"), Target: "/m"}, env: true,
			retried: "docker pull: Error: No such image"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := team
			if tc.manifestDir == "-" {
				dir = ""
			}
			c := &spec.ContainerSpec{Image: "srv:1", Mounts: []spec.Mount{data, tc.mount}}
			if dir == "" {
				c.Mounts = c.Mounts[1:]
			}
			_, err := s.containerArgs(context.Background(), ct, c, dir, tc.env, false)
			switch {
			case err == nil:
				t.Fatal("containerArgs: no error")
			case tc.refused != "" && (!held(err) || !strings.HasPrefix(err.Error(), tc.refused)):
				t.Errorf("containerArgs: %v (held: %t), want a refusal starting %q", err, held(err), tc.refused)
			case tc.retried != "" && (held(err) || !strings.Contains(err.Error(), tc.retried)):
				t.Errorf("containerArgs: %v (held: %t), want %q retried, no refusal", err, held(err), tc.retried)
			}
		})
	}

	// No runtime on PATH: retried (one may be installed).
	none := &Session{name: "box", conn: &Connector{}}
	_, err := none.startContainer(context.Background(), &spec.ContainerSpec{Image: "srv:1"}, team, nil, nil)
	if err == nil || held(err) {
		t.Errorf("no runtime: %v, want an error retried", err)
	}
}

// held reports whether err is a refusal the supervisor holds until the
// spec changes (a sandbox.RefusedError whose PolicyRefused says so).
func held(err error) bool {
	var refused *sandbox.RefusedError
	return errors.As(err, &refused) && refused.PolicyRefused()
}
