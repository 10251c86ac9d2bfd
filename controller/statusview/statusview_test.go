package statusview

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/tether-mcp/tether/spec"
)

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	// Temp file and rename, as tether writes status files.
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func manifestYAML(name, labels string) string {
	return "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: " + name +
		"\n  labels: {" + labels + "}\nspec:\n  stdio:\n    command: srv\n"
}

func status(name string, phase spec.Phase) string {
	return "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: " + name +
		"\nstatus:\n  phase: " + string(phase) + "\n  conditions: []\n  attempt: 0\n  lastError: \"\"\n  nextRetryTime: null\n  manifestError: \"\"\n"
}

func TestLoadJoinsManifestsAndStatus(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), manifestYAML("a", "x: '1'")+"---\n"+manifestYAML("b", ""))
	// b's status only; a stale document for a name no manifest declares.
	write(t, filepath.Join(dir, "a.status.yaml"), status("b", spec.PhaseConnected)+"---\n"+status("gone", spec.PhaseConnected))
	write(t, filepath.Join(dir, "sub", "c.yml"), manifestYAML("c", ""))
	write(t, filepath.Join(dir, "sub", "c.status.yaml"), "status: [not, a, map\n")

	snap, err := Load(Source{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Connection{}
	var order []string
	for _, c := range snap.Connections {
		got[c.Name] = c
		order = append(order, c.Name)
	}
	if strings.Join(order, ",") != "a,b,c" {
		t.Fatalf("connections = %v, want a,b,c (sorted, no stale status)", order)
	}
	tests := []struct {
		name     string
		phase    spec.Phase
		observed bool
	}{
		{"a", spec.PhasePending, false},
		{"b", spec.PhaseConnected, true},
		{"c", spec.PhasePending, false}, // its status file does not parse
	}
	for _, tt := range tests {
		c := got[tt.name]
		if c.Status.Status.Phase != tt.phase || c.Observed != tt.observed {
			t.Errorf("%s: phase %s observed %v, want %s %v", tt.name, c.Status.Status.Phase, c.Observed, tt.phase, tt.observed)
		}
	}
	if r := got["a"].Ready(); r == nil || r.Status != spec.ConditionUnknown || r.Reason != ReasonNoStatus {
		t.Errorf("a's Ready condition = %+v, want Unknown/NoStatus", r)
	}
	if len(snap.Warnings) != 1 || !strings.Contains(snap.Warnings[0], "c.status.yaml") {
		t.Errorf("warnings = %q, want one about c.status.yaml", snap.Warnings)
	}
}

func TestSelect(t *testing.T) {
	snap := Snapshot{Connections: []Connection{
		{Name: "a", Spec: &spec.Spec{}, Labels: map[string]string{"team": "infra"}},
		{Name: "b", Spec: &spec.Spec{}, Labels: map[string]string{"team": "web"}},
		{Name: "bad"}, // does not decode: no labels
	}}
	tests := []struct {
		name        string
		names       []string
		selector    string
		want        string
		notFound    string
		unmatchable string
	}{
		{name: "all", want: "a,b,bad"},
		{name: "names keep snapshot order", names: []string{"b", "a"}, want: "a,b"},
		{name: "unknown names, each once", names: []string{"a", "x", "x", "y"}, want: "a", notFound: `connections "x", "y" not found in d`},
		{name: "equality", selector: "team=infra", want: "a", unmatchable: "bad"},
		{name: "matches the empty set", selector: "team!=infra", want: "b,bad"},
		{name: "exists", selector: "team", want: "a,b", unmatchable: "bad"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel := Selection{Names: tt.names}
			if tt.selector != "" {
				var err error
				if sel.Selector, err = labels.Parse(tt.selector); err != nil {
					t.Fatal(err)
				}
			}
			conns, err := Select(snap, sel, "d")
			var got []string
			for _, c := range conns {
				got = append(got, c.Name)
			}
			if strings.Join(got, ",") != tt.want {
				t.Errorf("selected %v, want %s", got, tt.want)
			}
			if (err == nil && tt.notFound != "") || (err != nil && err.Error() != tt.notFound) {
				t.Errorf("error = %v, want %q", err, tt.notFound)
			}
			if u := strings.Join(Unmatchable(snap, sel), ","); u != tt.unmatchable {
				t.Errorf("unmatchable = %q, want %q", u, tt.unmatchable)
			}
		})
	}
}

func TestEndpointShowsNoSecrets(t *testing.T) {
	tests := []struct {
		name string
		spec spec.Spec
		want string
	}{
		{"command and args", spec.Spec{Stdio: &spec.StdioSpec{Command: "npx", Args: []string{"-y", "pkg@1"}}}, "npx -y pkg@1"},
		{"quoted args", spec.Spec{Stdio: &spec.StdioSpec{Command: "./bin/srv", Args: []string{"a b", "it's", ""}}}, `./bin/srv 'a b' 'it'\''s' ''`},
		{"env values never", spec.Spec{Stdio: &spec.StdioSpec{Command: "srv", Env: []spec.EnvVar{{Name: "TOKEN", Value: ptr("s3cr3t")}}}}, "srv"},
		{"url", spec.Spec{HTTP: &spec.HTTPSpec{URL: "https://h.example/mcp"}}, "https://h.example/mcp"},
		{"password", spec.Spec{HTTP: &spec.HTTPSpec{URL: "https://u:s3cr3t@h.example/mcp"}}, "https://u:xxxxx@h.example/mcp"},
		{"credential query", spec.Spec{HTTP: &spec.HTTPSpec{URL: "https://h.example/mcp?access_token=s3cr3t&Api-Key=s3cr3t&x=1"}}, "https://h.example/mcp?Api-Key=xxxxx&access_token=xxxxx&x=1"},
		{"plain query untouched", spec.Spec{HTTP: &spec.HTTPSpec{URL: "https://h.example/mcp?b=2&a=1"}}, "https://h.example/mcp?b=2&a=1"},
		{"header values never", spec.Spec{HTTP: &spec.HTTPSpec{URL: "http://h/mcp", Headers: []spec.EnvVar{{Name: "Authorization", Value: ptr("Bearer s3cr3t")}}}}, "http://h/mcp"},
		{"container image, its env never", spec.Spec{Container: &spec.ContainerSpec{Image: "ghcr.io/x/srv:1", Env: []spec.EnvVar{{Name: "TOKEN", Value: ptr("s3cr3t")}}}}, "container ghcr.io/x/srv:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Connection{Spec: &tt.spec}
			if got := c.Endpoint(); got != tt.want {
				t.Errorf("Endpoint() = %q, want %q", got, tt.want)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func TestRowCells(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := Connection{Name: "n", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: "http://h/mcp", Transport: "sse"}}}
	c.Status.Status = spec.ConnectionStatus{
		Phase:     spec.PhaseReconnecting,
		Attempt:   7,
		LastError: "line one\n\tline two",
		Conditions: []spec.Condition{
			{Type: spec.ConditionStalled, Status: "False", Message: "not this one", LastTransitionTime: now.Add(-time.Hour)},
			{Type: spec.ConditionReady, Status: "False", Message: "a\tb", LastTransitionTime: now.Add(-90 * time.Second)},
		},
	}
	tests := []struct {
		wide bool
		want string
	}{
		{false, "n|sse|Reconnecting|<none>|90s|a b"},
		{true, "n|sse|Reconnecting|<none>|90s|7|http://h/mcp|<none>|a b|line one line two"},
	}
	for _, tt := range tests {
		tab := NewTable(nil, tt.wide, nil)
		if got := strings.Join(tab.Row(&c, now), "|"); got != tt.want {
			t.Errorf("wide=%v: row %q, want %q", tt.wide, got, tt.want)
		}
		if len(tab.Row(&c, now)) != len(tab.Columns()) {
			t.Errorf("wide=%v: row and header differ in length", tt.wide)
		}
	}
	// The sandbox in force has its own column in wide.
	c.Status.Status.Sandbox = "landlock fs+net"
	if got := strings.Join(NewTable(nil, true, nil).Row(&c, now), "|"); got != "n|sse|Reconnecting|<none>|90s|7|http://h/mcp|landlock fs+net|a b|line one line two" {
		t.Errorf("wide row with a sandbox: %q", got)
	}
	// No Ready condition: AGE is unknown and MESSAGE empty.
	c.Status.Status.Conditions = nil
	if got := strings.Join(NewTable(nil, false, nil).Row(&c, now), "|"); got != "n|sse|Reconnecting|<none>|<unknown>|" {
		t.Errorf("row without Ready: %q", got)
	}
}

func TestTableRemembersWidths(t *testing.T) {
	var b strings.Builder
	now := func() time.Time { return time.Time{} }
	tab := NewTable(&b, false, now)
	short := Connection{Name: "a", Spec: &spec.Spec{Stdio: &spec.StdioSpec{Command: "x"}}}
	long := Connection{Name: "a-much-longer-name", Spec: short.Spec}
	if err := tab.Write([]Connection{short}, true); err != nil {
		t.Fatal(err)
	}
	if err := tab.Write([]Connection{short}, false); err != nil {
		t.Fatal(err)
	}
	if err := tab.Write([]Connection{long, short}, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("got %d lines:\n%s", len(lines), b.String())
	}
	col := func(l string) int { return strings.Index(l, "stdio") }
	if h := strings.Index(lines[0], "TRANSPORT"); col(lines[1]) != h || col(lines[2]) != h {
		t.Errorf("rows not aligned with the header:\n%s", b.String())
	}
	// A wider name widens the column for the rows after it.
	if col(lines[3]) != col(lines[4]) || col(lines[3]) <= col(lines[2]) {
		t.Errorf("widened rows not aligned with each other:\n%s", b.String())
	}
	for _, l := range lines {
		if strings.HasSuffix(l, " ") {
			t.Errorf("trailing blanks in %q", l)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": FormatTable, "table": FormatTable, "wide": FormatWide, "yaml": FormatYAML, "json": FormatJSON} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("JSON"); err == nil {
		t.Error("ParseFormat(JSON) accepted a format kubectl would not")
	}
}

// TestWatchStatusDirCreatedLater watches a tree whose --status-dir does not
// exist yet: tether creates it (and a subdirectory) on its first write, and
// the change must arrive by events, not by the resync.
func TestWatchStatusDirCreatedLater(t *testing.T) {
	root := t.TempDir()
	dir, statusDir := filepath.Join(root, "manifests"), filepath.Join(root, "state", "status")
	write(t, filepath.Join(dir, "sub", "a.yaml"), manifestYAML("a", ""))

	var mu sync.Mutex
	var calls [][]string
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Watch(ctx, Source{Dir: dir, StatusDir: statusDir}, Selection{},
			WatchOptions{Debounce: 10 * time.Millisecond, Resync: time.Hour},
			func(changed []Connection) error {
				var phases []string
				for _, c := range changed {
					phases = append(phases, c.Name+"="+string(c.Status.Status.Phase))
				}
				mu.Lock()
				calls = append(calls, phases)
				mu.Unlock()
				return nil
			})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Watch: %v", err)
		}
	}()
	waitCalls := func(n int) [][]string {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			got := append([][]string(nil), calls...)
			mu.Unlock()
			if len(got) >= n {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for call %d; calls so far: %v", n, got)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	if got := waitCalls(1); strings.Join(got[0], " ") != "a=Pending" {
		t.Fatalf("first call: %v", got[0])
	}
	// state/ exists only now, then state/status/sub/ and the file: each
	// new directory must be watched in time to see the next one.
	if err := os.Mkdir(filepath.Join(root, "state"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(statusDir, "sub", "a.status.yaml"), status("a", spec.PhaseConnecting))
	got := waitCalls(2)
	if last := strings.Join(got[len(got)-1], " "); last != "a=Connecting" {
		t.Fatalf("calls: %v", got)
	}
	write(t, filepath.Join(statusDir, "sub", "a.status.yaml"), status("a", spec.PhaseConnected))
	got = waitCalls(len(got) + 1)
	if last := strings.Join(got[len(got)-1], " "); last != "a=Connected" {
		t.Fatalf("calls: %v", got)
	}
}

// TestCellKeepsEscapesFromTheTerminal: a server's name and errors reach the
// table; its control characters (ANSI/OSC escapes) must not reach the
// terminal, and line breaks must not break the row.
func TestCellKeepsEscapesFromTheTerminal(t *testing.T) {
	for in, want := range map[string]string{
		"plain message":                "plain message",
		"two\nlines\tand tab":          "two lines and tab",
		"evil \x1b[2J\x1b]0;title\x07": "evil ?[2J?]0;title?",
		"bell\x07 and del\x7f":         "bell? and del?",
	} {
		if got := cell(in); got != want {
			t.Errorf("cell(%q) = %q, want %q", in, got, want)
		}
	}
}
