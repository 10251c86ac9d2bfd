//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/diff"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// runDiffCmd runs the tether binary's diff and returns its output and exit
// status.
func runDiffCmd(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), append([]string{"diff"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		t.Fatalf("tether diff: %v", err)
	}
	return out.String(), errb.String(), code
}

// TestDiffPredictsWhatTetherDoes: a running tether on a directory; a change
// set with every kind of difference (added, removed, reconnect, in place,
// unchanged, tools gained and lost, a collision made and one resolved, an
// invalid document, a secret value changed); tether diff's prediction
// recorded; the change applied; and what the running tether then does
// (a new child process or the same, the gateway's tools/list, collisions in
// status) compared with exactly what diff predicted, for each kind.
func TestDiffPredictsWhatTetherDoes(t *testing.T) {
	bin := builtBinaries(t)
	server := filepath.Join(bin, "tether-example-server")
	root := t.TempDir()
	dir := filepath.Join(root, "m")
	must(t, os.Mkdir(dir, 0o755))
	manifests := map[string]string{
		"stable":   "",
		"prefixed": "",
		"narrowed": "",
		"envchg":   "",
		"gone":     "",
		"c1":       "  toolPrefix: c\n",
		"c2":       "  toolPrefix: c\n",
		// OnDemand: its catalog is kept in the state directory, so what a
		// wider filter exposes is known.
		"lazy": "  tools: {allow: [echo]}\n  lifecycle: {mode: OnDemand, idleTimeout: 1s}\n",
	}
	for name, extra := range manifests {
		writeFile(t, filepath.Join(dir, name+".yaml"), stdioManifest(name, server, nil, extra))
	}
	port := testport.Free(t)
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", port))
	waitTCP(t, port, 20*time.Second)
	pids := map[string]int{}
	for name := range manifests {
		if name == "lazy" {
			continue
		}
		st := waitStatus(t, filepath.Join(dir, name+".yaml"), name, 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
		pids[name] = st.Process.PID
	}
	waitStatus(t, filepath.Join(dir, "lazy.yaml"), "lazy", 30*time.Second, "Idle", phaseIs(spec.PhaseIdle))
	waitStatus(t, filepath.Join(dir, "c2.yaml"), "c2", 10*time.Second, "its collisions", func(st spec.ConnectionStatus) bool { return len(st.Collisions) == 5 })

	// The change set, in a directory of its own: tether watches dir.
	next := filepath.Join(root, "next")
	must(t, os.Mkdir(next, 0o755))
	nextManifests := map[string]string{
		"stable":   "",                                                                                // unchanged
		"prefixed": "  toolPrefix: stable\n",                                                          // in place; a collision made (stable keeps its names)
		"narrowed": "  tools: {deny: [fail]}\n",                                                       // in place; a tool lost
		"envchg":   "    env: [{name: API_TOKEN, value: s3cr3t-token-value}]\n",                       // reconnect
		"c1":       "  toolPrefix: c\n",                                                               // unchanged
		"c2":       "  toolPrefix: c2\n",                                                              // in place; a collision resolved, tools gained
		"lazy":     "  tools: {allow: [echo, add]}\n  lifecycle: {mode: OnDemand, idleTimeout: 1s}\n", // in place; a tool gained
		"added":    "",                                                                                // added
	}
	for name, extra := range nextManifests {
		writeFile(t, filepath.Join(next, name+".yaml"), stdioManifest(name, server, nil, extra))
	}
	writeFile(t, filepath.Join(next, "broken.yaml"), stdioManifest("broken", server, nil, "  bogus: 1\n"))

	text, stderr, code := runDiffCmd(t, nil, "--dir", dir, "--gateway", url, next)
	t.Logf("tether diff:\n%s", text)
	if code != 2 {
		t.Fatalf("exit status %d, want 2 (an invalid document); stderr: %s", code, stderr)
	}
	if strings.Contains(text, "s3cr3t") || strings.Contains(stderr, "s3cr3t") {
		t.Fatalf("diff printed a secret value:\n%s", text)
	}
	if strings.Contains(text, "\x1b[") {
		t.Errorf("colour in piped output:\n%s", text)
	}
	out, _, code := runDiffCmd(t, nil, "--dir", dir, "--gateway", url, "-o", "json", next)
	if code != 2 {
		t.Fatalf("-o json: exit status %d, want 2", code)
	}
	var r diff.Result
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if r.APIVersion != "tether.dev/v1alpha1" || r.Kind != "Diff" {
		t.Errorf("apiVersion %q kind %q", r.APIVersion, r.Kind)
	}
	predicted := map[string]diff.Connection{}
	for _, c := range r.Connections {
		predicted[c.Name] = c
	}
	wantChange := map[string]diff.Change{
		"stable": diff.Unchanged, "c1": diff.Unchanged,
		"prefixed": diff.InPlace, "narrowed": diff.InPlace, "c2": diff.InPlace, "lazy": diff.InPlace,
		"envchg": diff.Reconnect, "gone": diff.Removed, "added": diff.Added, "broken": diff.Added,
	}
	for name, want := range wantChange {
		if got := predicted[name].Change; got != want {
			t.Errorf("%s: diff says %q, want %q", name, got, want)
		}
	}
	if f := predicted["envchg"].ReconnectFields; !slices.Equal(f, []string{"spec.stdio.env"}) {
		t.Errorf("envchg reconnects for %v, want [spec.stdio.env]", f)
	}
	if !predicted["broken"].Invalid || len(r.Invalid) != 1 || !strings.Contains(r.Invalid[0], "spec.bogus") {
		t.Errorf("the invalid document: %+v, %v", predicted["broken"], r.Invalid)
	}
	if predicted["added"].Catalog != "unknown" || predicted["lazy"].Catalog != "known" {
		t.Errorf("catalogs: added %q, lazy %q", predicted["added"].Catalog, predicted["lazy"].Catalog)
	}
	if n := predicted["lazy"].Tools; n == nil || !slices.Equal(n.Added, []string{"lazy_add"}) || len(n.Removed) > 0 {
		t.Errorf("lazy's tools: %+v, want lazy_add gained", n)
	}
	if n := predicted["narrowed"].Tools; n == nil || !slices.Equal(n.Removed, []string{"narrowed_fail"}) || len(n.Added) > 0 {
		t.Errorf("narrowed's tools: %+v, want narrowed_fail lost", n)
	}
	if len(r.CollisionsMade) != 5 || len(r.CollisionsResolved) != 5 {
		t.Errorf("collisions made %v, resolved %v: want 5 and 5", r.CollisionsMade, r.CollisionsResolved)
	}
	for _, c := range r.CollisionsMade {
		if c.Owner != "stable" || c.Loser != "prefixed" || !strings.HasPrefix(c.Name, "stable_") {
			t.Errorf("collision made: %+v", c)
		}
	}
	for _, c := range r.CollisionsResolved {
		if c.Owner != "c1" || c.Loser != "c2" || !strings.HasPrefix(c.Name, "c_") {
			t.Errorf("collision resolved: %+v", c)
		}
	}

	// What the gateway lists now, and what diff says it will list.
	gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: url})
	before := gc.toolNames(t)
	want := slices.Clone(before)
	for _, c := range r.Connections {
		if c.Tools == nil {
			continue
		}
		want = slices.DeleteFunc(want, func(n string) bool { return slices.Contains(c.Tools.Removed, n) })
		want = append(want, c.Tools.Added...)
	}
	slices.Sort(want)

	// Apply it.
	must(t, os.Remove(filepath.Join(dir, "gone.yaml")))
	for _, f := range []string{"stable", "prefixed", "narrowed", "envchg", "c1", "c2", "lazy", "added", "broken"} {
		data, err := os.ReadFile(filepath.Join(next, f+".yaml"))
		must(t, err)
		writeFile(t, filepath.Join(dir, f+".yaml"), string(data))
	}

	// Each kind, as the running tether did it.
	waitStatus(t, filepath.Join(dir, "added.yaml"), "added", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	waitStatus(t, filepath.Join(dir, "broken.yaml"), "broken", 10*time.Second, "Invalid", phaseIs(spec.PhaseInvalid))
	st := waitStatus(t, filepath.Join(dir, "envchg.yaml"), "envchg", 30*time.Second, "a new process", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseConnected && st.Process != nil && st.Process.PID != pids["envchg"]
	})
	_ = st
	waitStatus(t, filepath.Join(dir, "prefixed.yaml"), "prefixed", 10*time.Second, "its names lost to stable", func(st spec.ConnectionStatus) bool {
		return len(st.Collisions) == 5 && st.Tools != nil && st.Tools.Exposed == 0
	})
	waitStatus(t, filepath.Join(dir, "c2.yaml"), "c2", 10*time.Second, "no collisions", func(st spec.ConnectionStatus) bool {
		return len(st.Collisions) == 0 && st.Tools != nil && st.Tools.Exposed == 5
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(dir, "gone.status.yaml")); errors.Is(err, os.ErrNotExist) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the removed connection's status file stayed")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The tools agents see: what diff predicted, plus the new connection's,
	// whose server tether had not seen (diff said so: catalog unknown).
	var after []string
	deadline = time.Now().Add(20 * time.Second)
	for {
		after = slices.DeleteFunc(gc.toolNames(t), func(n string) bool { return strings.HasPrefix(n, "added_") })
		slices.Sort(after)
		if slices.Equal(after, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway lists\n  %v\ndiff predicted\n  %v", after, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Reconnected exactly where diff said so: a new child for envchg, the
	// same child for every connection updated in place or unchanged.
	for name, pid := range pids {
		c := predicted[name]
		if c.Change == diff.Removed || c.Change == diff.Reconnect {
			continue
		}
		st, ok := readStatus(t, filepath.Join(dir, name+".yaml"), name)
		if !ok || st.Process == nil || st.Process.PID != pid {
			t.Errorf("%s (%s): its process changed (pid %d, status %+v)", name, c.Change, pid, st.Process)
		}
	}

	// Applied, the same diff against the running tether finds nothing
	// more to do but the invalid document.
	_, _, code = runDiffCmd(t, nil, "--dir", dir)
	if code != 2 {
		t.Errorf("after applying: exit status %d, want 2 (the invalid document stays)", code)
	}
	must(t, os.Remove(filepath.Join(dir, "broken.yaml")))
	must(t, os.Remove(filepath.Join(next, "broken.yaml")))
	waitStatus(t, filepath.Join(dir, "stable.yaml"), "stable", 5*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	deadline = time.Now().Add(10 * time.Second)
	for {
		out, stderr, code := runDiffCmd(t, nil, "--dir", dir, next)
		if code == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after applying: exit status %d, want 0:\n%s%s", code, out, stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDiffAgainstDirectoryAndStdin: with no tether running, a directory is
// compared with another version of itself (--against DIR), and a manifest
// read from stdin with the directory's manifests; exit 0 when nothing
// changes, 1 when something does, 2 without anything to compare with.
func TestDiffAgainstDirectoryAndStdin(t *testing.T) {
	root := t.TempDir()
	old, cur := filepath.Join(root, "old"), filepath.Join(root, "cur")
	a := stdioManifest("a", "./srv", nil, "")
	writeFile(t, filepath.Join(old, "a.yaml"), a)
	writeFile(t, filepath.Join(old, "b.yaml"), stdioManifest("b", "./srv", nil, ""))
	writeFile(t, filepath.Join(cur, "a.yaml"), stdioManifest("a", "./srv", []string{"-v"}, ""))
	out, stderr, code := runDiffCmd(t, []string{"NO_COLOR=1"}, "--dir", cur, "--against", old)
	if code != 1 || !strings.Contains(out, "~ reconnect  a") || !strings.Contains(out, "reconnects for: spec.stdio.args") || !strings.Contains(out, "- removed    b") {
		t.Fatalf("--against DIR: exit %d\n%s%s", code, out, stderr)
	}
	// The other directory is a version of --dir: the same file there is
	// unchanged, not moved.
	writeFile(t, filepath.Join(cur, "b.yaml"), stdioManifest("b", "./srv", nil, ""))
	if out, stderr, code := runDiffCmd(t, nil, "--dir", cur, "--against", old); code != 1 || !strings.Contains(out, "  unchanged  b") {
		t.Fatalf("--against DIR, b the same: exit %d\n%s%s", code, out, stderr)
	}
	if out, stderr, code := runDiffCmd(t, nil, "--dir", old, "--against", old); code != 0 || !strings.Contains(out, "0 added, 0 removed, 0 reconnect, 0 in place, 2 unchanged; 0 invalid") {
		t.Fatalf("no change: exit %d\n%s%s", code, out, stderr)
	}
	// stdin: the new state is that one file, placed in --dir.
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), "diff", "--dir", old, "-o", "yaml", "-")
	cmd.Stdin = strings.NewReader(stdioManifest("a", "./srv", nil, "  toolPrefix: z\n"))
	outb, err := cmd.Output()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("stdin: %v\n%s", err, outb)
	}
	for _, want := range []string{"kind: Diff", "change: in place", "spec.toolPrefix", "change: removed"} {
		if !strings.Contains(string(outb), want) {
			t.Errorf("stdin: no %q in\n%s", want, outb)
		}
	}
	if _, stderr, code := runDiffCmd(t, nil, "--dir", old); code != 2 || !strings.Contains(stderr, "no tether has run") {
		t.Errorf("nothing to compare with: exit %d, %s", code, stderr)
	}
}
