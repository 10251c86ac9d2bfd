package diff

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/state"
	"github.com/tether-mcp/tether/spec"
)

// TestAddListing: a connection's catalog is learnt from what the gateway
// lists under its prefix and filter and from the names it lost (its
// status), and is complete only when that accounts for what its status
// counts.
func TestAddListing(t *testing.T) {
	stdio := "  stdio: {command: srv}\n"
	b := Base{
		Entries: entries(t, "/srv/m", map[string]string{
			"gh.yaml":   doc("gh", stdio+"  tools: {deny: [secret]}\n"),
			"s.yaml":    doc("s", stdio+"  toolPrefix: gh\n"),
			"ghb.yaml":  doc("ghb", stdio+"  toolPrefix: gh_b\n"),
			"bare.yaml": doc("bare", stdio+"  toolPrefix: \"\"\n"),
			"od.yaml":   doc("od", stdio),
		}),
		Catalogs: map[string]*Catalog{"od": {Tools: []string{"x"}, Complete: true}},
		Owners:   map[string]string{"gh_echo": "gh", "prompt:gh_p": "gh"},
		status: map[string]status{
			"gh": {tools: &spec.Counts{Count: 3}, prompts: &spec.Counts{Count: 1}, collisions: []spec.ToolCollision{
				{Tool: "gh_echo", Connection: "s", Kept: true}, {Tool: "prompt:gh_p", Connection: "s", Kept: true}}},
			"s": {tools: &spec.Counts{Count: 1}, prompts: &spec.Counts{Count: 1}, collisions: []spec.ToolCollision{
				{Tool: "gh_echo", Connection: "gh"}, {Tool: "prompt:gh_p", Connection: "gh"}}},
			"ghb":  {tools: &spec.Counts{Count: 1}},
			"bare": {tools: &spec.Counts{Count: 1}, resources: &spec.Counts{Count: 1}},
		},
	}
	b.AddListing(Listing{Tools: []string{"gh_echo", "gh_add", "gh_b_run", "plain", "od_x"}, Prompts: []string{"gh_p"}, Resources: []string{"file:///a"}}, Options{})
	want := map[string]Catalog{
		"gh":   {Tools: []string{"add", "echo"}, Prompts: []string{"p"}},          // secret is denied: not seen, partial
		"s":    {Tools: []string{"echo"}, Prompts: []string{"p"}, Complete: true}, // all it has, lost to gh
		"ghb":  {Tools: []string{"run"}, Complete: true},                          // the longer prefix
		"bare": {Tools: []string{"plain"}},                                        // lists resources: partial
		"od":   {Tools: []string{"x"}, Complete: true},                            // kept in the state directory
	}
	for name, w := range want {
		got := b.Catalogs[name]
		if got == nil || !slices.Equal(got.Tools, w.Tools) || !slices.Equal(got.Prompts, w.Prompts) || got.Complete != w.Complete {
			t.Errorf("%s: %+v, want %+v", name, got, w)
		}
	}
}

// TestAddListingMaxNameLength: the names a known catalog exposes are found
// with the gateway's --max-name-length, so a long name it serves (allowed
// by a larger limit) stays its own and is not given to another connection.
func TestAddListingMaxNameLength(t *testing.T) {
	stdio := "  stdio: {command: srv}\n"
	long := strings.Repeat("x", 150)
	b := Base{
		Entries: entries(t, "/srv/m", map[string]string{
			"bare.yaml": doc("bare", stdio+"  toolPrefix: \"\"\n"),
			"od.yaml":   doc("od", stdio),
		}),
		Catalogs: map[string]*Catalog{"od": {Tools: []string{long}, Complete: true}},
		status:   map[string]status{"bare": {tools: &spec.Counts{Count: 1}}},
	}
	b.AddListing(Listing{Tools: []string{"od_" + long, "plain"}}, Options{MaxNameLength: 200})
	if got := b.Catalogs["bare"]; got == nil || !slices.Equal(got.Tools, []string{"plain"}) || !got.Complete {
		t.Errorf("bare: %+v, want only plain, complete", got)
	}
}

// TestFromStateFromAnotherDirectory: tether run saves its manifests' paths
// as it was given them (relative to its working directory); diff run from
// elsewhere, its --dir spelt otherwise, still sees the same manifests in
// the same directory: nothing reconnects.
func TestFromStateFromAnotherDirectory(t *testing.T) {
	work := t.TempDir() // where tether run ran, with --dir manifests
	root := filepath.Join(work, "manifests")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "sub"), 0o755))
	files := map[string]string{"a.yaml": doc("a", "  stdio: {command: ./srv}\n"), "sub/b.yaml": doc("b", "  stdio: {command: ./srv}\n")}
	for name, content := range files {
		must(os.WriteFile(filepath.Join(root, name), []byte(content), 0o644))
	}
	stateDir := filepath.Join(root, state.DirName)
	d, err := state.Open(stateDir, 0)
	must(err)
	for _, e := range entries(t, "manifests", files) { // as run saved them
		must(d.SaveSpec(e))
	}
	d.Close()
	cwd, err := os.Getwd()
	must(err)
	rel, err := filepath.Rel(cwd, root) // diff's --dir, from another directory
	must(err)
	for _, dir := range []string{root, rel} {
		b, problems, err := FromState(stateDir, dir, "", 0)
		if err != nil || len(problems) > 0 {
			t.Fatalf("%v %v", err, problems)
		}
		listed, _, err := manifest.ListFiles(dir)
		must(err)
		r := Compute(b, listed, Options{})
		if r.Changed() {
			t.Errorf("--dir %s: %+v, want nothing changed", dir, r.Connections)
		}
		if a := b.Entries["a"]; a.Origin != filepath.Join(dir, "a.yaml") || b.Entries["b"].Dir != filepath.Join(dir, "sub") {
			t.Errorf("--dir %s: a %s, b's directory %s", dir, a.Origin, b.Entries["b"].Dir)
		}
	}
}

func TestSavedRoot(t *testing.T) {
	for _, c := range []struct {
		dirs []string
		abs  string
		want string
	}{
		{[]string{"manifests", "manifests/sub"}, "/p/manifests", "manifests"},
		{[]string{"../m", "../m/x"}, "/p/m", "../m"},
		{[]string{"m/m", "m"}, "/p/m", "m"}, // a subdirectory named as the root
		{[]string{"m/m"}, "/p/m/m", "m/m"},  // the longest that fits
		{[]string{"."}, "/p/m", "."},        // run ran in the root
		{[]string{"a", "b"}, "/p/m", "."},   // none common: run's own
		{[]string{"other"}, "/p/m", "."},    // not the root's name
		{[]string{"../x"}, "/p/m", ".."},    // run ran below the root: x is a subdirectory
	} {
		if got := savedRoot(c.dirs, c.abs); got != c.want {
			t.Errorf("savedRoot(%q, %s) = %q, want %q", c.dirs, c.abs, got, c.want)
		}
	}
}
