package diff

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/state"
	"github.com/tether-mcp/tether/spec"
)

func doc(name, body string) string {
	return "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: " + name + "\nspec:\n" + body
}

// entries decodes manifests (file name → content) in dir into a desired state.
func entries(t *testing.T, dir string, files map[string]string) map[string]desired.Entry {
	t.Helper()
	next, problems, _ := manifest.Resolve(nil, decoded(dir, files))
	if len(problems) > 0 {
		t.Fatalf("base: %v", problems)
	}
	return next
}

func decoded(dir string, files map[string]string) []manifest.File {
	var out []manifest.File
	for name, content := range files {
		p := filepath.Join(dir, name)
		out = append(out, manifest.File{Path: p, Docs: manifest.DecodeData(p, []byte(content))})
	}
	return out
}

var tools5 = &Catalog{Tools: []string{"add", "echo", "fail", "slow", "time"}, Complete: true}

func TestCompute(t *testing.T) {
	const dir = "/srv/m"
	stdio := "  stdio: {command: srv}\n"
	base := Base{
		Against: "test",
		Entries: entries(t, dir, map[string]string{
			"a.yaml": doc("a", stdio+"  toolPrefix: p\n"),
			"b.yaml": doc("b", stdio+"  toolPrefix: p\n"),
			"s.yaml": doc("s", stdio),
			"m.yaml": doc("m", stdio),
			"v.yaml": doc("v", stdio),
		}),
		Catalogs: map[string]*Catalog{"a": tools5, "b": tools5, "s": tools5, "m": tools5, "v": tools5},
		// b claimed p_* first: it keeps them though a sorts first.
		Owners: map[string]string{"p_add": "b", "p_echo": "b", "p_fail": "b", "p_slow": "b", "p_time": "b"},
	}
	next := decoded(dir, map[string]string{
		"a.yaml": doc("a", stdio+"  toolPrefix: p\n  tools: {deny: [echo]}\n"),
		"b.yaml": doc("b", stdio+"  toolPrefix: p\n  suspend: true\n"),
		"s.yaml": doc("s", stdio+"  bogus: 1\n"),
		"v.yaml": doc("v", "  stdio: {command: srv, env: [{name: TOKEN, value: hunter2-secret}]}\n"),
	})
	// m moved to another directory: its relative paths resolve anew.
	next = append(next, decoded("/srv/other", map[string]string{"m.yaml": doc("m", stdio)})...)
	r := Compute(base, next, Options{})

	got := map[string]Connection{}
	for _, c := range r.Connections {
		got[c.Name] = c
	}
	checks := []struct {
		name   string
		change Change
	}{{"a", InPlace}, {"b", InPlace}, {"s", Unchanged}, {"m", Reconnect}, {"v", Reconnect}}
	for _, c := range checks {
		if got[c.name].Change != c.change {
			t.Errorf("%s: %q, want %q", c.name, got[c.name].Change, c.change)
		}
	}
	if f := got["m"].ReconnectFields; !slices.Equal(f, []string{"manifest directory"}) {
		t.Errorf("m reconnects for %v", f)
	}
	if got["s"].ManifestError == "" || got["s"].Invalid || len(r.Invalid) != 1 {
		t.Errorf("s: an invalid document keeps its last valid spec: %+v, %v", got["s"], r.Invalid)
	}
	// b suspended keeps its claims and serves none: agents lose p_*,
	// a (deny echo) still loses the rest to b; p_echo was never a's.
	if n := got["b"].Tools; n == nil || len(n.Removed) != 5 || len(n.Added) != 0 {
		t.Errorf("b's tools: %+v", n)
	}
	if n := got["a"].Tools; n != nil {
		t.Errorf("a's tools: %+v, want none gained or lost", n)
	}
	if len(r.CollisionsMade) != 0 || len(r.CollisionsResolved) != 1 || r.CollisionsResolved[0] != (Collision{Name: "p_echo", Owner: "b", Loser: "a"}) {
		t.Errorf("collisions made %v resolved %v", r.CollisionsMade, r.CollisionsResolved)
	}
	if !r.Changed() || r.Summary != (Summary{InPlace: 2, Reconnect: 2, Unchanged: 1, Invalid: 1}) {
		t.Errorf("summary %+v", r.Summary)
	}
	var text, js, ym bytes.Buffer
	if err := Text(&text, r, false); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	if err := WriteYAML(&ym, r); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{text.String(), js.String(), ym.String()} {
		if strings.Contains(out, "hunter2") {
			t.Errorf("a secret value is shown:\n%s", out)
		}
	}
	if !strings.Contains(text.String(), "spec.stdio.env") || strings.Contains(text.String(), "\x1b[") {
		t.Errorf("text:\n%s", text.String())
	}
	if !strings.Contains(ym.String(), "kind: Diff") {
		t.Errorf("yaml:\n%s", ym.String())
	}
	var colored bytes.Buffer
	_ = Text(&colored, r, true)
	if !strings.Contains(colored.String(), "\x1b[33m~ reconnect") {
		t.Errorf("colour asked for and not given:\n%s", colored.String())
	}
}

// TestComputeNewClaimsComeLast: a connection that starts claiming a name
// another holds loses it, whatever the names' order; the first in line
// gets a name its owner stops offering.
func TestComputeNewClaimsComeLast(t *testing.T) {
	const dir = "/srv/m"
	stdio := "  stdio: {command: srv}\n"
	base := Base{
		Entries: entries(t, dir, map[string]string{
			"z.yaml": doc("z", stdio+"  toolPrefix: q\n"),
			"a.yaml": doc("a", stdio),
		}),
		Catalogs: map[string]*Catalog{"z": {Tools: []string{"echo"}}, "a": {Tools: []string{"echo"}}},
	}
	r := Compute(base, decoded(dir, map[string]string{
		"z.yaml": doc("z", stdio+"  toolPrefix: q\n"),
		"a.yaml": doc("a", stdio+"  toolPrefix: q\n"),
	}), Options{})
	if len(r.CollisionsMade) != 1 || r.CollisionsMade[0] != (Collision{Name: "q_echo", Owner: "z", Loser: "a"}) {
		t.Errorf("collisions made %v, want q_echo kept by z", r.CollisionsMade)
	}
	// A name over --max-name-length is not exposed, as the gateway does.
	r = Compute(base, decoded(dir, map[string]string{
		"z.yaml": doc("z", stdio+"  toolPrefix: "+strings.Repeat("q", 60)+"\n"),
		"a.yaml": doc("a", stdio),
	}), Options{MaxNameLength: 60})
	for _, c := range r.Connections {
		if c.Name == "z" && (c.Tools == nil || len(c.Tools.Added) != 0 || !slices.Equal(c.Tools.Removed, []string{"q_echo"})) {
			t.Errorf("z: %+v", c.Tools)
		}
	}
}

// TestReadPathsBounded: stdin and files are read with the daemon's limits.
func TestReadPathsBounded(t *testing.T) {
	dir := t.TempDir()
	big := strings.Repeat("#", spec.MaxFileSize+1)
	files, err := ReadPaths([]string{"-"}, strings.NewReader(big), dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || len(files[0].Docs) != 1 || !strings.Contains(files[0].Docs[0].Errors[0].Error(), "over the limit") {
		t.Fatalf("oversized stdin: %+v", files)
	}
	p := filepath.Join(t.TempDir(), "big.yaml")
	if err := os.WriteFile(p, []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	files, err = ReadPaths([]string{p}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	if files[0].Path != filepath.Join(dir, "big.yaml") || !strings.Contains(files[0].Docs[0].Errors[0].Error(), "over the limit") {
		t.Fatalf("oversized file: %s %+v", files[0].Path, files[0].Docs)
	}
}

// TestFromStateWritesNothing: diff reads a running tether's state directory
// and never makes one.
func TestFromStateWritesNothing(t *testing.T) {
	dir := t.TempDir()
	_, _, err := FromState(filepath.Join(dir, state.DirName), dir, "", 0)
	if err == nil || !strings.Contains(err.Error(), "no state directory") {
		t.Fatalf("err %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, state.DirName)); !os.IsNotExist(err) {
		t.Fatalf("a state directory was made: %v", err)
	}
	d, err := state.Open(filepath.Join(dir, state.DirName), 0)
	if err != nil {
		t.Fatal(err)
	}
	e := entries(t, dir, map[string]string{"a.yaml": doc("a", "  stdio: {command: srv}\n")})["a"]
	if err := d.SaveSpec(e); err != nil {
		t.Fatal(err)
	}
	d.Close()
	b, problems, err := FromState(filepath.Join(dir, state.DirName), dir, "", 0)
	if err != nil || len(problems) > 0 || b.Entries["a"].Conn == nil {
		t.Fatalf("%v %v %+v", err, problems, b.Entries)
	}
}

// BenchmarkCompute1000: a diff of 1,000 connections of 5 tools each, every
// one changing its prefix.
func BenchmarkCompute1000(b *testing.B) {
	files := map[string]string{}
	next := map[string]string{}
	cats := map[string]*Catalog{}
	for i := range 1000 {
		n := fmt.Sprintf("c%d", i)
		files[n+".yaml"] = doc(n, "  stdio: {command: srv}\n")
		next[n+".yaml"] = doc(n, "  stdio: {command: srv}\n  toolPrefix: p\n")
		cats[n] = tools5
	}
	base0, _, _ := manifest.Resolve(nil, decoded("/srv/m", files))
	base := Base{Entries: base0, Catalogs: cats}
	nf := decoded("/srv/m", next)
	b.ResetTimer()
	for b.Loop() {
		Compute(base, nf, Options{})
	}
}

// TestTextSaysWhatIsNotKnown: names diff cannot know are said to be missing,
// in the words of the change.
func TestTextSaysWhatIsNotKnown(t *testing.T) {
	stdio := "  stdio: {command: srv}\n"
	base := Base{Entries: entries(t, "/srv/m", map[string]string{"r.yaml": doc("r", stdio)})}
	r := Compute(base, decoded("/srv/m", map[string]string{"n.yaml": doc("n", stdio)}), Options{})
	var out bytes.Buffer
	if err := Text(&out, r, false); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- removed    r  (/srv/m/r.yaml)", "names it stops exposing are not shown", "+ added      n  (/srv/m/n.yaml)", "names it will expose are not shown",
		"1 added, 1 removed, 0 reconnect, 0 in place, 0 unchanged; 0 invalid"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in\n%s", want, out.String())
		}
	}
	// Headings of what there is none of are left out.
	for _, none := range []string{"reconnects for", "in place:", "collisions made", "collisions resolved", "invalid documents"} {
		if strings.Contains(out.String(), none) {
			t.Errorf("%q in\n%s", none, out.String())
		}
	}
}

// TestComputeEdges: a document invalid before and after changes nothing, one
// that turns valid starts; a manifest directory named relatively or
// absolutely is the same directory; Changed counts every change but
// unchanged.
func TestComputeEdges(t *testing.T) {
	stdio := "  stdio: {command: srv}\n"
	bad := doc("x", stdio+"  bogus: 1\n")
	base := FromFiles("test", decoded("/srv/m", map[string]string{"x.yaml": bad, "y.yaml": bad}), "", "")
	r := Compute(base, decoded("/srv/m", map[string]string{"x.yaml": bad, "y.yaml": doc("y", stdio)}), Options{})
	if r.Connections[0].Change != Unchanged || !r.Connections[0].Invalid || r.Connections[1].Change != Added || r.Connections[1].Invalid {
		t.Errorf("invalid before: %+v", r.Connections)
	}
	if r.Summary != (Summary{Added: 1, Unchanged: 1, Invalid: 1}) {
		t.Errorf("summary %+v", r.Summary)
	}

	t.Chdir(t.TempDir())
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel := Base{Entries: entries(t, "m", map[string]string{"a.yaml": doc("a", stdio)})}
	r = Compute(rel, decoded(filepath.Join(wd, "m"), map[string]string{"a.yaml": doc("a", stdio)}), Options{})
	if r.Connections[0].Change != Unchanged || r.Changed() {
		t.Errorf("m and %s/m: %+v", wd, r.Connections[0])
	}

	for _, s := range []Summary{{Added: 1}, {Removed: 1}, {Reconnect: 1}, {InPlace: 1}} {
		if !(&Result{Summary: s}).Changed() {
			t.Errorf("%+v is no change", s)
		}
	}
	if (&Result{Summary: Summary{Unchanged: 3, Invalid: 1}}).Changed() {
		t.Error("unchanged and invalid is a change")
	}
}

// TestReadPathsNames: a file in --dir keeps its place there, one outside
// is placed in it, a directory's files are named as --dir's.
func TestReadPathsNames(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(dir, "sub", "a.yaml"), filepath.Join(other, "b.yaml"), filepath.Join(other, "tree", "deep", "c.yaml")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(doc(strings.TrimSuffix(filepath.Base(p), ".yaml"), "  stdio: {command: srv}\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	files, err := ReadPaths([]string{filepath.Join(dir, "sub", "a.yaml"), filepath.Join(other, "b.yaml"), filepath.Join(other, "tree")}, nil, dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	want := []string{filepath.Join(dir, "sub", "a.yaml"), filepath.Join(dir, "b.yaml"), filepath.Join(dir, "deep", "c.yaml")}
	if !slices.Equal(got, want) {
		t.Errorf("names %v, want %v", got, want)
	}
	if _, err := ReadPaths([]string{filepath.Join(other, "missing.yaml")}, nil, dir); err == nil {
		t.Error("a missing path is no error")
	}
}

// TestComputePrefixMove: a prefix change gains the new names and loses the
// old ones in one line.
func TestComputePrefixMove(t *testing.T) {
	stdio := "  stdio: {command: srv}\n"
	base := Base{Entries: entries(t, "/srv/m", map[string]string{"a.yaml": doc("a", stdio)}), Catalogs: map[string]*Catalog{"a": {Tools: []string{"echo"}, Complete: true}}}
	r := Compute(base, decoded("/srv/m", map[string]string{"a.yaml": doc("a", stdio+"  toolPrefix: q\n")}), Options{})
	if n := r.Connections[0].Tools; n == nil || !slices.Equal(n.Added, []string{"q_echo"}) || !slices.Equal(n.Removed, []string{"a_echo"}) {
		t.Errorf("tools %+v", n)
	}
}

// TestComputeResourceRules: URIs and templates follow the gateway's rules
// (exposure.ClaimRank, exposure.TemplateCaps): an earlier template of
// another connection keeps a URI a new connection lists, a catch-all does
// not; a later template under an earlier one's literal prefix is reported
// as losing to it yet stays exposed; templates beyond the caps are not
// exposed.
func TestComputeResourceRules(t *testing.T) {
	const dir = "/srv/m"
	stdio := "  stdio: {command: srv}\n"
	base := Base{
		Entries: entries(t, dir, map[string]string{"t.yaml": doc("t", stdio), "c.yaml": doc("c", stdio)}),
		Catalogs: map[string]*Catalog{
			"t": {Templates: []string{"file:///{+path}"}, Complete: true},
			"c": {Templates: []string{"{+any}"}, Complete: true},
			"u": {Resources: []string{"file:///x", "mem://y"}, Templates: []string{"file:///docs/{p}", "{+u}"}, Complete: true},
		},
	}
	r := Compute(base, decoded(dir, map[string]string{"t.yaml": doc("t", stdio), "c.yaml": doc("c", stdio), "u.yaml": doc("u", stdio)}), Options{})
	var u Connection
	for _, c := range r.Connections {
		if c.Name == "u" {
			u = c
		}
	}
	// file:///x goes to t's earlier template; mem://y only c's catch-all
	// matches, and a catch-all never takes a listed URI.
	if u.Resources == nil || !slices.Equal(u.Resources.Added, []string{"mem://y"}) {
		t.Errorf("u gains resources %+v, want mem://y only", u.Resources)
	}
	// Both its templates are exposed (a catch-all too, by default).
	if u.ResourceTemplates == nil || !slices.Equal(u.ResourceTemplates.Added, []string{"file:///docs/{p}", "{+u}"}) {
		t.Errorf("u gains templates %+v, want file:///docs/{p} and {+u}", u.ResourceTemplates)
	}
	want := []Collision{
		{Name: "resource:file:///x", Owner: "t", Loser: "u"},
		{Name: "resourceTemplate:file:///docs/{p}", Owner: "t", Loser: "u"},
		{Name: "resourceTemplate:{+u}", Owner: "c", Loser: "u"}, // catch-alls pair with catch-alls
	}
	if !slices.Equal(r.CollisionsMade, want) {
		t.Errorf("collisions made %v, want %v", r.CollisionsMade, want)
	}

	// The caps, counted in the server's order, each template once.
	base.Catalogs["v"] = &Catalog{Templates: []string{"{+a}", "{+b}", "{+a}", "{+c}", "x:/{a}/1", "x:/{a}/2", "x:/{a}/3", "y:/{a}"}, Complete: true}
	r = Compute(base, decoded(dir, map[string]string{"t.yaml": doc("t", stdio), "c.yaml": doc("c", stdio), "v.yaml": doc("v", stdio)}),
		Options{MaxCatchAllTemplates: 2, MaxTemplatesPerPrefix: 2})
	for _, c := range r.Connections {
		if c.Name == "v" && (c.ResourceTemplates == nil || !slices.Equal(c.ResourceTemplates.Added, []string{"x:/{a}/1", "x:/{a}/2", "y:/{a}", "{+a}", "{+b}"})) {
			t.Errorf("v gains templates %+v", c.ResourceTemplates)
		}
	}
}

// TestComputeContainer: tether diff predicts a container server's changes
// as tether run acts on them: any container field reconnects (named), a
// default written out changes nothing, the rest applies in place.
func TestComputeContainer(t *testing.T) {
	const dir = "/srv/m"
	box := "  container: {image: srv:1}\n"
	base := Base{Against: "test", Entries: entries(t, dir, map[string]string{
		"image.yaml":   doc("image", box),
		"secret.yaml":  doc("secret", box),
		"default.yaml": doc("default", box),
		"timeout.yaml": doc("timeout", box),
	})}
	r := Compute(base, decoded(dir, map[string]string{
		"image.yaml":   doc("image", "  container: {image: srv:2}\n"),
		"secret.yaml":  doc("secret", "  container: {image: srv:1, secretFiles: [{name: t, valueFrom: {file: t}}]}\n"),
		"default.yaml": doc("default", "  container: {image: srv:1, network: none, memory: 512Mi, pids: 256}\n"),
		"timeout.yaml": doc("timeout", box+"  callTimeout: 5s\n"),
	}), Options{})
	got := map[string]Connection{}
	for _, c := range r.Connections {
		got[c.Name] = c
	}
	for _, c := range []struct {
		name   string
		change Change
		fields []string
	}{
		{"image", Reconnect, []string{"spec.container.image"}},
		{"secret", Reconnect, []string{"spec.container.secretFiles"}},
		{"default", Unchanged, nil},
		{"timeout", InPlace, nil},
	} {
		if g := got[c.name]; g.Change != c.change || (c.fields != nil && !slices.Equal(g.ReconnectFields, c.fields)) {
			t.Errorf("%s: %q %v, want %q %v", c.name, g.Change, g.ReconnectFields, c.change, c.fields)
		}
	}
}
