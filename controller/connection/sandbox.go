package connection

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/sandbox"
	"github.com/tether-mcp/tether/spec"
)

// maxPlanBytes bounds the encoded plan: it travels as one environment
// string, which Linux caps at 128 KiB (MAX_ARG_STRLEN); past it the exec of
// the launcher would fail with a bare "argument list too long".
const maxPlanBytes = 120 << 10

// confinement is how a sandboxed child is started: tether itself as the
// launcher (controller/sandbox), which applies the plan and execs the
// server.
type confinement struct {
	launcher string   // tether's own executable
	args     []string // LauncherArg, the program, argv[0], its arguments
	planEnv  string   // PlanEnv=<the plan>
	plan     *sandbox.Plan
	describe string // status.sandbox
	tmp      string // the private temporary directory, removed after the child
}

// cleanup removes what the confinement made for one start.
func (c *confinement) cleanup() {
	if c != nil && c.tmp != "" {
		_ = os.RemoveAll(c.tmp)
	}
}

// PrepareSandboxTemp empties root, which holds the private TMPDIRs of this
// tether's sandboxed servers (what a tether killed with SIGKILL left there
// goes), and makes it again, mode 0700. tether run keeps it in the state
// directory, which is its alone.
func PrepareSandboxTemp(root string) error {
	if err := os.RemoveAll(root); err != nil {
		return fmt.Errorf("sandbox: emptying %s: %w", root, err)
	}
	if err := os.Mkdir(root, 0o700); err != nil {
		return fmt.Errorf("sandbox: making %s: %w", root, err)
	}
	return nil
}

// confine resolves policy for starting program (argv0, args) in dir with
// env, and says what the kernel cannot enforce: an error the status calls
// SandboxUnsupported unless the policy accepts less (bestEffort). env gets
// TMPDIR when the policy grants the private temporary directory, made in
// tmpRoot ("": the system's). No grant may hold stateDir, no write grant
// tether's executable, the manifest's directory or a directory of the
// manifest tree (tree).
//
// Its errors are classified for the supervisor: a policy tether will not
// run (sandbox.RefusedError: a grant that reaches what it protects, a plan
// over the launcher's bound) waits for a new spec; one the kernel cannot
// enforce is sandbox.UnsupportedError; the rest (its own executable not
// found, no temporary directory, a listed path missing, which may be made)
// are retried with backoff.
func confine(name string, policy *spec.SandboxSpec, origin, tmpRoot, stateDir, program, argv0 string, args []string, dir, manifestDir string, tree []string, env []string) (*confinement, []string, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, nil, fmt.Errorf("sandbox: finding tether's own executable (the launcher): %w", err)
	}
	c := &confinement{launcher: launcherPath(self)}
	if policy.Granted(spec.GrantTmp) {
		tmp, err := os.MkdirTemp(tmpRoot, "tether-sandbox-"+name+"-")
		if err != nil {
			return nil, nil, fmt.Errorf("sandbox: making the private temporary directory: %w", err)
		}
		c.tmp = tmp
		env = setEnv(env, "TMPDIR", tmp)
	}
	// Only a working directory the manifest names is granted: tether's own
	// (where a child without one runs) may be / or a home directory.
	plan, err := sandbox.Build(policy, sandbox.Inputs{
		Command:     program,
		WorkingDir:  dir,
		ManifestDir: manifestDir,
		Home:        envValue(env, "HOME"),
		Path:        envValue(env, "PATH"),
		Tmp:         c.tmp,
		Protected:   protected(self, manifestDir, stateDir, tree),
		Origin:      origin,
	})
	if err != nil {
		c.cleanup()
		return nil, nil, err
	}
	kernel := sandbox.DetectKernel()
	missing := sandbox.Check(plan, kernel)
	if len(missing) > 0 && !plan.BestEffort {
		c.cleanup()
		return nil, nil, &sandbox.UnsupportedError{Missing: missing}
	}
	c.plan = plan
	c.describe = plan.Describe(missing, kernel.ABI)
	encoded, err := plan.Encode()
	if err != nil {
		c.cleanup()
		return nil, nil, err
	}
	if len(encoded) > maxPlanBytes {
		c.cleanup()
		return nil, nil, &sandbox.RefusedError{Field: sandbox.PolicyField(origin, ""),
			Problem: fmt.Sprintf("the policy resolves to %d bytes of paths and rules, over the %d the launcher can be given (one environment string); grant directories rather than many files", len(encoded), maxPlanBytes)}
	}
	c.planEnv = sandbox.PlanEnv + "=" + encoded
	c.args = append([]string{sandbox.LauncherArg, program, argv0}, args...)
	return c, env, nil
}

// protected are what no write grant may hold: tether's executable (the
// launcher), the manifest's directory and every directory of the manifest
// tree (a grant may not lie in one either, but beneath a hidden name), and
// the state directory, which no grant may hold.
func protected(self, manifestDir, stateDir string, tree []string) []sandbox.Protected {
	p := []sandbox.Protected{
		{Path: self, What: "tether's executable, the sandbox launcher"},
		{Path: manifestDir, What: "the manifest's directory", Tree: true},
		{Path: stateDir, What: "tether's state directory", Read: true},
	}
	for _, d := range tree {
		p = append(p, sandbox.Protected{Path: d, What: "the manifest tree tether watches", Tree: true})
	}
	return p
}

// manifestTree is the directories tether reads manifests from: the
// source's last listing (ManifestDirs) when there is one, else the tree at
// the manifest root, listed now.
func (c *Connector) manifestTree() []string {
	if c.manifestDirs != nil {
		if d := c.manifestDirs(); d != nil {
			// As listed from a root given relative (--dir .), relative.
			abs := make([]string, len(d))
			for i, dir := range d {
				if a, err := filepath.Abs(dir); err == nil {
					dir = a
				}
				abs[i] = dir
			}
			return abs
		}
	}
	return manifestTree(c.manifestRoot)
}

// manifestTree lists the directories tether reads manifests from, now:
// every directory of the tree at root, and those behind its symbolic
// links. A tree that cannot be listed is at least its root.
func manifestTree(root string) []string {
	if root == "" {
		return nil
	}
	t, err := manifest.ListTree(root)
	if err != nil {
		return []string{root}
	}
	return t.Dirs
}

// setEnv sets name in env ("NAME=value" entries).
func setEnv(env []string, name, value string) []string {
	for i, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			env[i] = name + "=" + value
			return env
		}
	}
	return append(env, name+"="+value)
}
