package connection

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/sandbox"
	"github.com/tether-mcp/tether/spec"
)

// TestConfineBoundsThePlan: a policy that resolves to more than the
// launcher can be given fails with a clear error, and leaves no TMPDIR.
// (The policies accept less, bestEffort, so that a kernel before Landlock
// ABI 9 gets as far as the plan's size.)
func TestConfineBoundsThePlan(t *testing.T) {
	long := t.TempDir()
	for range 20 {
		long = filepath.Join(long, strings.Repeat("d", 200))
	}
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Skipf("cannot make a long path: %v", err)
	}
	read := make([]string, 40)
	for i := range read {
		read[i] = long
	}
	before, _ := filepath.Glob(filepath.Join(os.TempDir(), "tether-sandbox-big-*"))
	_, _, err := confine("big", &spec.SandboxSpec{Read: read, BestEffort: true}, "", "", "", "/bin/true", "true", nil, "", "", nil, []string{"HOME=/nonexistent", "PATH=/usr/bin"})
	if err == nil || !strings.Contains(err.Error(), "over the 122880 the launcher can be given") {
		t.Fatalf("a huge plan: %v", err)
	}
	after, _ := filepath.Glob(filepath.Join(os.TempDir(), "tether-sandbox-big-*"))
	if len(after) != len(before) {
		t.Errorf("a TMPDIR was left behind: %v", after)
	}
	// A small one passes, with its TMPDIR in the environment.
	c, env, err := confine("small", &spec.SandboxSpec{BestEffort: true}, "", "", "", "/bin/true", "true", nil, "", "", nil, []string{"HOME=/nonexistent", "PATH=/usr/bin"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.cleanup()
	if envValue(env, "TMPDIR") != c.tmp || c.tmp == "" || !strings.HasPrefix(c.planEnv, "TETHER_SANDBOX_PLAN={") {
		t.Errorf("TMPDIR %q (made %q), plan %.40q", envValue(env, "TMPDIR"), c.tmp, c.planEnv)
	}
}

// TestWithoutNamespaceSaysWhatIsLeft: the best-effort fallback of a refused
// namespace runs with Landlock refusing every port, and status.sandbox says
// so; without Landlock at all it says there is none, not "landlock".
func TestWithoutNamespaceSaysWhatIsLeft(t *testing.T) {
	for abi, want := range map[int]string{7: "landlock fs+net (best effort)", 0: "no-new-privileges, no landlock (best effort)"} {
		c := &confinement{plan: &sandbox.Plan{Network: spec.NetworkLoopback, Namespace: true, LoopbackUp: true, BestEffort: true}}
		if err := c.withoutNamespace(abi); err != nil {
			t.Fatal(err)
		}
		if c.describe != want || c.plan.Namespace || c.plan.LoopbackUp || !c.plan.HandleTCP || !c.plan.HandleUDP {
			t.Errorf("ABI %d: status.sandbox %q, plan %+v; want %q, no namespace, every port refused", abi, c.describe, c.plan, want)
		}
	}
}

// TestConfineRefusesWritingTheManifestTree: a write grant may not lie in
// any directory tether reads manifests from: a sibling of the manifest's
// directory in the tree (write: [../shared]), or a directory outside the
// tree that a symbolic link in it names. Beneath a hidden name, or beside
// the tree, it may.
func TestConfineRefusesWritingTheManifestTree(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "manifests")
	team := filepath.Join(tree, "team")
	for _, d := range []string{team, filepath.Join(tree, "shared"), filepath.Join(tree, ".data"), filepath.Join(root, "outside"), filepath.Join(root, "elsewhere")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "outside"), filepath.Join(tree, "linked")); err != nil {
		t.Fatal(err)
	}
	start := func(write string) error {
		c, _, err := confine("w", &spec.SandboxSpec{Write: []string{write}, BestEffort: true}, "", "", "", "/bin/true", "true", nil, "", team, manifestTree(tree), []string{"HOME=/nonexistent", "PATH=/usr/bin"})
		if c != nil {
			c.cleanup()
		}
		return err
	}
	for _, w := range []string{"../shared", filepath.Join(root, "outside"), "../linked"} {
		if err := start(w); err == nil || !inManifestTree(err) {
			t.Errorf("write: [%s]: %v, want it refused as in the manifest tree", w, err)
		}
	}
	for _, w := range []string{"../.data", filepath.Join(root, "elsewhere")} {
		if err := start(w); err != nil {
			t.Errorf("write: [%s], beside the tree or beneath a hidden name: %v", w, err)
		}
	}
}
