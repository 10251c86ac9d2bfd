package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/tether-mcp/tether/controller/statusview"
	"github.com/tether-mcp/tether/spec"
)

func init() {
	// Another test file of this package may define -update too.
	if flag.Lookup("update") == nil {
		flag.Bool("update", false, "rewrite golden files in testdata")
	}
}

func goldenUpdate() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// getNow is the instant the golden files' AGE column is measured to.
var getNow = time.Date(2026, 11, 22, 10, 5, 0, 0, time.UTC)

// getManifestTime is the modification time given to every fixture file, so
// that a connection without status has a stable AGE (5m).
var getManifestTime = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// copyGetFixture copies testdata/get/<name> into a temporary directory and
// gives its files a fixed modification time.
func copyGetFixture(t *testing.T, name string) string {
	t.Helper()
	src := filepath.Join("testdata", "get", name)
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.WriteFile(target, data, 0o644); err != nil {
			return err
		}
		return os.Chtimes(target, getManifestTime, getManifestTime)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// runGet runs `tether get args...` in-process at getNow and returns what
// it printed and the error it returned ("" for none).
func runGet(t *testing.T, args ...string) (stdout, stderr, errText string) {
	t.Helper()
	cmd := newGetCmdWith(&getOptions{now: func() time.Time { return getNow }})
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	if err := cmd.Execute(); err != nil {
		errText = err.Error()
	}
	return out.String(), errOut.String(), errText
}

func TestGetGolden(t *testing.T) {
	tests := []struct {
		name    string
		fixture string
		args    []string // $TREE is the fixture's copy (run as a relative path)
		wantErr bool
	}{
		{"table", "tree", []string{"--dir", "$TREE"}, false},
		{"wide", "tree", []string{"--dir", "$TREE", "-o", "wide"}, false},
		{"yaml", "tree", []string{"--dir", "$TREE", "-o", "yaml"}, false},
		{"json", "tree", []string{"--dir", "$TREE", "-o", "json"}, false},
		{"names", "tree", []string{"--dir", "$TREE", "remote-api", "github"}, false},
		{"names-json", "tree", []string{"--dir", "$TREE", "-o", "json", "memory", "github"}, false},
		{"name-json", "tree", []string{"--dir", "$TREE", "-o", "json", "memory"}, false},
		{"name-yaml", "tree", []string{"--dir", "$TREE", "-o", "yaml", "github"}, false},
		{"name-unknown-json", "tree", []string{"--dir", "$TREE", "-o", "json", "nope"}, true},
		{"duplicate", "dup", []string{"--dir", "$TREE", "-o", "wide"}, false},
		{"duplicate-name-yaml", "dup", []string{"--dir", "$TREE", "-o", "yaml", "same"}, false},
		{"unknown-name", "tree", []string{"--dir", "$TREE", "github", "nope", "gone"}, true},
		{"selector", "tree", []string{"--dir", "$TREE", "-l", "team=infra,env!=dev"}, false},
		{"selector-set", "tree", []string{"--dir", "$TREE", "-l", "team in (web),env", "-o", "wide"}, false},
		{"selector-none-table", "tree", []string{"--dir", "$TREE", "-l", "team=nobody"}, false},
		{"selector-none-json", "tree", []string{"--dir", "$TREE", "-l", "team=nobody", "-o", "json"}, false},
		{"selector-none-yaml", "tree", []string{"--dir", "$TREE", "-l", "team=nobody", "-o", "yaml"}, false},
		{"selector-matches-empty", "tree", []string{"--dir", "$TREE", "-l", "env!=dev"}, false},
		{"status-dir", "split", []string{"--dir", "$TREE/manifests", "--status-dir", "$TREE/status", "-o", "wide"}, false},
		{"status-dir-not-given", "split", []string{"--dir", "$TREE/manifests"}, false},
		{"bad-output", "tree", []string{"--dir", "$TREE", "-o", "xml"}, true},
		{"bad-selector", "tree", []string{"--dir", "$TREE", "-l", "team in (web"}, true},
		{"names-and-selector", "tree", []string{"--dir", "$TREE", "-l", "team=infra", "github"}, true},
		{"missing-dir", "tree", []string{"--dir", "$TREE/nowhere"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			golden, err := filepath.Abs(filepath.Join("testdata", "get", tt.name+".golden"))
			if err != nil {
				t.Fatal(err)
			}
			// Run inside the copy, with relative paths: the table's widths
			// must not depend on the temporary directory's name.
			t.Chdir(copyGetFixture(t, tt.fixture))
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = strings.ReplaceAll(strings.ReplaceAll(a, "$TREE/", ""), "$TREE", ".")
			}
			stdout, stderr, errText := runGet(t, args...)
			if (errText != "") != tt.wantErr {
				t.Errorf("error = %q, want error: %v", errText, tt.wantErr)
			}
			var got strings.Builder
			got.WriteString("$ tether get " + strings.Join(tt.args, " ") + "\n")
			got.WriteString(stdout)
			if stderr != "" {
				got.WriteString("--- stderr\n" + stderr)
			}
			if errText != "" {
				got.WriteString("--- error\n" + errText + "\n")
			}
			text := got.String()
			for _, secret := range []string{"do-not-print-me", "hunter2", "/run/secrets"} {
				if strings.Contains(text, secret) {
					t.Errorf("output shows %q, a secret or a secret's source", secret)
				}
			}
			getCompareGolden(t, golden, text)
		})
	}
}

func getCompareGolden(t *testing.T, path, got string) {
	t.Helper()
	if goldenUpdate() {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update and review the diff)\n--- got\n%s--- want\n%s", path, got, want)
	}
}

// getBuffer is a bytes.Buffer that a running command writes while the
// test reads it.
type getBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *getBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *getBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor polls cond until it holds or the deadline passes.
func getWaitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// writeGetStatusFile replaces a status file the way tether does: a temp file
// renamed over it.
func writeGetStatusFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp-test")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func freshStatus(phase, ready, reason, msg string) string {
	return `apiVersion: tether.dev/v1alpha1
kind: McpConnection
metadata:
  name: fresh
status:
  phase: ` + phase + `
  conditions:
    - type: Ready
      status: "` + ready + `"
      reason: ` + reason + `
      message: ` + msg + `
      lastTransitionTime: "2026-11-22T10:04:30Z"
  attempt: 0
  lastError: ""
  nextRetryTime: null
  manifestError: ""
`
}

// TestGetWatchPrintsPhaseChanges runs `tether get -w` and changes the
// status of one connection twice, as tether would: each change prints one
// new row for that connection and nothing for the others.
func TestGetWatchPrintsPhaseChanges(t *testing.T) {
	tree := copyGetFixture(t, "tree")
	out, errOut := &getBuffer{}, &getBuffer{}
	cmd := newGetCmdWith(&getOptions{
		now: func() time.Time { return getNow },
		// A resync far beyond the test's deadlines: the rows must come
		// from fsnotify events, not from polling.
		watchOpts: statusview.WatchOptions{Debounce: 20 * time.Millisecond, Resync: time.Hour},
	})
	cmd.SetOut(out)
	cmd.SetErr(errOut)
	cmd.SetArgs([]string{"--dir", tree, "-w"})
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("get -w returned %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("get -w did not return after its context ended")
		}
	}()

	lines := func() []string { return strings.Split(strings.TrimRight(out.String(), "\n"), "\n") }
	// The header and one row per connection of the tree.
	const initial = 1 + 8
	getWaitFor(t, "the initial table", 10*time.Second, func() bool { return len(lines()) >= initial })
	if l := lines(); !strings.HasPrefix(l[0], "NAME ") || !strings.Contains(out.String(), "fresh        stdio        Pending") {
		t.Fatalf("initial table:\n%s", out.String())
	}

	statusPath := filepath.Join(tree, "team", "fresh.status.yaml")
	for i, step := range []struct{ phase, ready, reason, msg string }{
		{"Connecting", "False", "Connecting", "connecting"},
		{"Connected", "True", "Connected", "connected to everything 2.0.0, 13 tools"},
	} {
		writeGetStatusFile(t, statusPath, freshStatus(step.phase, step.ready, step.reason, step.msg))
		want := initial + i + 1
		getWaitFor(t, "a row for "+step.phase, 10*time.Second, func() bool { return len(lines()) >= want })
		row := lines()[want-1]
		if f := strings.Fields(row); len(f) < 3 || f[0] != "fresh" || f[2] != step.phase {
			t.Errorf("row after the change to %s = %q", step.phase, row)
		}
		if !strings.HasSuffix(row, step.msg) {
			t.Errorf("row %q does not end with the Ready message %q", row, step.msg)
		}
		// Rows stay aligned with the header.
		if got, want := strings.Index(row, step.phase), strings.Index(lines()[0], "PHASE"); got != want {
			t.Errorf("PHASE at column %d, header at %d:\n%s", got, want, out.String())
		}
	}
	// Writing the same status again is no change.
	writeGetStatusFile(t, statusPath, freshStatus("Connected", "True", "Connected", "connected to everything 2.0.0, 13 tools"))
	// A change of another connection proves the rewrite above was read
	// and printed nothing.
	writeGetStatusFile(t, filepath.Join(tree, "flaky.status.yaml"), strings.Replace(freshStatus("Connected", "True", "Connected", "back"), "name: fresh", "name: flaky", 1))
	want := initial + 3
	getWaitFor(t, "a row for flaky", 10*time.Second, func() bool { return len(lines()) >= want })
	if l := lines(); len(l) != want || !strings.HasPrefix(l[want-1], "flaky ") {
		t.Errorf("after rewriting fresh unchanged and changing flaky:\n%s", out.String())
	}
	if s := errOut.String(); !strings.Contains(s, "noname.yaml") {
		t.Errorf("stderr does not warn about the document without a name: %q", s)
	}
}

func TestGetWatchUnknownNameFailsAtOnce(t *testing.T) {
	tree := copyGetFixture(t, "tree")
	_, _, errText := runGet(t, "--dir", tree, "-w", "nope")
	if !strings.Contains(errText, `connection "nope" not found`) {
		t.Fatalf("error = %q", errText)
	}
}

// TestGetWatchStructured runs get -w -o json and -o yaml: each prints
// every selected status document, then each changed one, on its own.
func TestGetWatchStructured(t *testing.T) {
	for _, format := range []string{"json", "yaml"} {
		t.Run(format, func(t *testing.T) {
			tree := copyGetFixture(t, "tree")
			out := &getBuffer{}
			cmd := newGetCmdWith(&getOptions{
				now:       func() time.Time { return getNow },
				watchOpts: statusview.WatchOptions{Debounce: 20 * time.Millisecond, Resync: time.Hour},
			})
			cmd.SetOut(out)
			cmd.SetErr(&getBuffer{})
			cmd.SetArgs([]string{"--dir", tree, "-w", "-o", format, "fresh", "github"})
			cmd.SilenceErrors, cmd.SilenceUsage = true, true
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- cmd.ExecuteContext(ctx) }()
			defer func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("get -w -o %s: %v", format, err)
				}
			}()
			docs := func() []spec.StatusDocument { return decodeStream(t, format, out.String()) }
			getWaitFor(t, "two documents", 10*time.Second, func() bool { return len(docs()) >= 2 })
			writeGetStatusFile(t, filepath.Join(tree, "team", "fresh.status.yaml"), freshStatus("Connected", "True", "Connected", "up"))
			getWaitFor(t, "a third document", 10*time.Second, func() bool { return len(docs()) >= 3 })
			var got []string
			for _, d := range docs() {
				got = append(got, d.Metadata.Name+"="+string(d.Status.Phase))
			}
			if want := "fresh=Pending,github=Connected,fresh=Connected"; strings.Join(got, ",") != want {
				t.Errorf("documents %v, want %s", got, want)
			}
		})
	}
}

// decodeStream reads a stream of indented JSON objects or of YAML
// documents each introduced by "---".
func decodeStream(t *testing.T, format, text string) []spec.StatusDocument {
	t.Helper()
	var out []spec.StatusDocument
	if format == "json" {
		dec := json.NewDecoder(strings.NewReader(text))
		for {
			var d spec.StatusDocument
			if err := dec.Decode(&d); err != nil {
				return out // io.EOF, or a document still being written
			}
			out = append(out, d)
		}
	}
	parts := strings.Split(text, "---\n")
	for i, p := range parts {
		if strings.TrimSpace(p) == "" {
			continue
		}
		if i == len(parts)-1 && !strings.HasSuffix(p, "manifestError: \"\"\n") {
			break // the last document may still be being written
		}
		var d spec.StatusDocument
		if err := yaml.UnmarshalStrict([]byte(p), &d); err != nil {
			t.Fatalf("document %d of the stream: %v\n%s", i, err, p)
		}
		out = append(out, d)
	}
	return out
}

// TestGetHelpNamesEveryPhase: the PHASE column's help lists every phase
// tether writes.
func TestGetHelpNamesEveryPhase(t *testing.T) {
	help := newGetCmd().Long
	for _, p := range spec.Phases {
		if !strings.Contains(help, string(p)) {
			t.Errorf("tether get's help does not name phase %s", p)
		}
	}
}
