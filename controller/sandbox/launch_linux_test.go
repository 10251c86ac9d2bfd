package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/tether-mcp/tether/spec"
)

// TestMain makes the test binary a launcher too, as cmd/tether is.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == LauncherArg {
		os.Exit(Launch(os.Args[2:]))
	}
	if len(os.Args) > 1 && os.Args[1] == probeArg {
		probe()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestLaunchSetsLimitsLast: the limits are the server's, not the
// launcher's: openFiles 4, which /bin/true lives with (one library open at
// a time), leaves the launcher descriptors enough for its ruleset and a
// path's.
func TestLaunchSetsLimitsLast(t *testing.T) {
	files := 4
	p, err := Build(&spec.SandboxSpec{Network: spec.NetworkAll, Limits: &spec.SandboxLimits{OpenFiles: &files}}, Inputs{Command: "/bin/true", Path: os.Getenv("PATH")})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := p.Encode()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], LauncherArg, "/bin/true", "true")
	cmd.Env = append(os.Environ(), PlanEnv+"="+enc)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("launching /bin/true with openFiles 4: %v\n%s", err, out)
	}
}

// TestRulesRights: each plan right is the exact Landlock access set (read
// does not execute; write makes no device nodes), cut to the rights that
// apply to a file for a file.
func TestRulesRights(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	plan := &Plan{Paths: []PathRule{{dir, RightRead}, {dir, RightExec}, {dir, RightWrite}, {file, RightWrite}, {file, RightDevice}}, ConnectTCP: []uint16{443}, ConnectUDP: []uint16{53}}
	rs, err := rules(plan)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSReadDir, dir).String(),
		landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSReadDir|ll.AccessFSExecute, dir).String(),
		landlock.PathAccess(writeRights, dir).String(),
		landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSWriteFile|ll.AccessFSTruncate, file).String(),
		landlock.PathAccess(ll.AccessFSReadFile|ll.AccessFSWriteFile|ll.AccessFSTruncate, file).String(),
		landlock.ConnectTCP(443).String(),
		landlock.ConnectSendUDP(53).String(),
	}
	if len(rs) != len(want) {
		t.Fatalf("%d rules, want %d", len(rs), len(want))
	}
	for i, r := range rs {
		if got := r.(interface{ String() string }).String(); got != want[i] {
			t.Errorf("rule %d = %s, want %s", i, got, want[i])
		}
	}
	if writeRights&(ll.AccessFSMakeChar|ll.AccessFSMakeBlock|ll.AccessFSExecute) != 0 {
		t.Error("write grants device nodes or execution")
	}
	if _, err := rules(&Plan{Paths: []PathRule{{dir, "x"}}}); err == nil || !strings.Contains(err.Error(), `unknown rights "x"`) {
		t.Errorf("unknown rights: %v", err)
	}
	if _, err := rules(&Plan{Paths: []PathRule{{filepath.Join(dir, "gone"), RightRead}}}); err == nil {
		t.Error("a path that vanished before the launch: no error")
	}
	// A link made beneath a write grant after the plan was built, to
	// outside it: the launcher checks again.
	out := t.TempDir()
	link := filepath.Join(dir, "config")
	if err := os.Symlink(out, link); err != nil {
		t.Fatal(err)
	}
	if _, err := rules(&Plan{Paths: []PathRule{{dir, RightWrite}, {link, RightRead}}}); err == nil || !strings.Contains(err.Error(), "granting "+link+": "+link+" is beneath the write grant") {
		t.Errorf("a link out of a write grant at launch: %v", err)
	}
}

// TestLaunchRefusesWithoutAPlan: a launcher without its plan or program
// says so and exits 126, running nothing.
func TestLaunchRefusesWithoutAPlan(t *testing.T) {
	t.Setenv(PlanEnv, "{not json")
	if err := launch([]string{"/bin/true", "true"}); err == nil || !strings.Contains(err.Error(), "reading the sandbox plan") {
		t.Errorf("a bad plan: %v", err)
	}
	t.Setenv(PlanEnv, `{"paths":[],"network":"none","seccomp":"strict"}`)
	if err := launch([]string{"/bin/true", "true"}); err == nil || !strings.Contains(err.Error(), `unknown field "seccomp"`) {
		t.Errorf("a plan with a rule this launcher does not know: %v", err)
	}
	t.Setenv(PlanEnv, `{"paths":[]} {}`)
	if err := launch([]string{"/bin/true", "true"}); err == nil || !strings.Contains(err.Error(), "more than one JSON value") {
		t.Errorf("a plan followed by more: %v", err)
	}
	if err := launch([]string{"/bin/true"}); err == nil || !strings.Contains(err.Error(), "want PROGRAM ARGV0") {
		t.Errorf("no argv0: %v", err)
	}
}
