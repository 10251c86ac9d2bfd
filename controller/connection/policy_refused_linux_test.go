package connection

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// TestConfineClassifiesItsErrors: each way confine fails is either a
// policy tether refuses (sandbox.RefusedError, which the supervisor holds
// until the spec changes), naming the manifest field and the path, or an
// error retried with backoff (a listed path that may yet be made, no
// temporary directory). (The policies accept less, bestEffort, so that a
// kernel before Landlock ABI 9 gets as far as the checks.)
func TestConfineClassifiesItsErrors(t *testing.T) {
	root := t.TempDir()
	tree := filepath.Join(root, "manifests")
	team := filepath.Join(tree, "team")
	state := filepath.Join(root, "state")
	for _, d := range []string{team, state, filepath.Join(tree, "shared"), filepath.Join(root, "elsewhere")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	long := t.TempDir()
	for range 20 {
		long = filepath.Join(long, strings.Repeat("d", 200))
	}
	if err := os.MkdirAll(long, 0o700); err != nil {
		t.Skipf("cannot make a long path: %v", err)
	}
	huge := make([]string, 40)
	for i := range huge {
		huge[i] = long
	}
	env := []string{"HOME=/nonexistent", "PATH=/usr/bin"}
	for _, tc := range []struct {
		name    string
		policy  spec.SandboxSpec
		tmpRoot string
		refused string // the refusal's start; "" for an error retried
		retried string // a retried error's text
	}{
		{name: "write grant holds the manifest's directory", policy: spec.SandboxSpec{Write: []string{filepath.Join(root, "elsewhere"), "."}},
			refused: "spec.stdio.sandbox.write[1]: " + team + " holds the manifest's directory"},
		{name: "write grant in the manifest tree", policy: spec.SandboxSpec{Write: []string{"../shared"}},
			refused: "spec.stdio.sandbox.write[0]: " + filepath.Join(tree, "shared") + " is in the manifest tree tether watches"},
		{name: "read grant of the state directory", policy: spec.SandboxSpec{Read: []string{state}},
			refused: "spec.stdio.sandbox.read[0]: " + state + " holds tether's state directory"},
		{name: "read grant that holds the state directory", policy: spec.SandboxSpec{Read: []string{"/bin", root}},
			refused: "spec.stdio.sandbox.read[1]: " + root + " holds tether's state directory"},
		{name: "a plan over the launcher's bound", policy: spec.SandboxSpec{Read: huge},
			refused: "spec.stdio.sandbox: the policy resolves to"},
		{name: "a listed path missing", policy: spec.SandboxSpec{Read: []string{"missing"}},
			retried: "spec.stdio.sandbox.read[0]: " + filepath.Join(team, "missing") + ": no such file or directory"},
		{name: "no temporary directory", policy: spec.SandboxSpec{Grants: []string{spec.GrantTmp}}, tmpRoot: filepath.Join(root, "gone"),
			retried: "sandbox: making the private temporary directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			policy := tc.policy
			policy.BestEffort = true
			c, _, err := confine("w", &policy, "", tc.tmpRoot, state, "/bin/true", "true", nil, team, team, manifestTree(tree), env)
			c.cleanup()
			switch {
			case err == nil:
				t.Fatal("confine: no error")
			case tc.refused != "" && (!held(err) || !strings.HasPrefix(err.Error(), tc.refused)):
				t.Errorf("confine: %v (held: %t), want a refusal starting %q", err, held(err), tc.refused)
			case tc.retried != "" && (held(err) || !strings.Contains(err.Error(), tc.retried)):
				t.Errorf("confine: %v (held: %t), want %q retried, no refusal", err, held(err), tc.retried)
			}
		})
	}
}

// TestDefaultSandboxRefusalNamesItsFile: a refusal of tether run's
// --default-sandbox names that file and its field, not the manifest's
// spec.stdio.sandbox, which the manifest does not set; a manifest's own
// policy is named by its field.
func TestDefaultSandboxRefusalNamesItsFile(t *testing.T) {
	team := t.TempDir()
	policy := &spec.SandboxSpec{Write: []string{"."}, BestEffort: true}
	c := NewConnector(ConnectorOptions{DefaultSandbox: policy, DefaultSandboxFile: "/etc/tether/policy.yaml"})
	t.Cleanup(c.Close)
	s := &Session{name: "d", conn: c, red: newRedactor(nil, nil)}
	env := []namedValue{{Name: "HOME", Value: "/nonexistent"}}
	_, err := s.startStdio(&spec.StdioSpec{Command: "/bin/true"}, team, env)
	if want := "--default-sandbox /etc/tether/policy.yaml: write[0]: " + team + " holds the manifest's directory"; err == nil || !held(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("the default policy: %v (held: %t), want a refusal starting %q", err, held(err), want)
	}
	_, err = s.startStdio(&spec.StdioSpec{Command: "/bin/true", Sandbox: policy}, team, env)
	if want := "spec.stdio.sandbox.write[0]: " + team + " holds the manifest's directory"; err == nil || !held(err) || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("the manifest's policy: %v (held: %t), want a refusal starting %q", err, held(err), want)
	}
}
