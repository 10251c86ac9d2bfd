package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/exposure"
	"github.com/tether-mcp/tether/spec"
)

// catalogBackend is a fakeBackend that offers resource templates too.
type catalogBackend struct {
	fakeBackend
	templates []*mcp.ResourceTemplate
}

func (b *catalogBackend) ResourceTemplates() []*mcp.ResourceTemplate { return b.templates }

func offering(tools []string, prompts []string, uris []string, templates []string) *catalogBackend {
	b := &catalogBackend{}
	for _, n := range tools {
		b.tools = append(b.tools, &mcp.Tool{Name: n, Description: "tool " + n, InputSchema: objectSchema})
	}
	for _, n := range prompts {
		b.prompts = append(b.prompts, &mcp.Prompt{Name: n})
	}
	for _, u := range uris {
		b.resources = append(b.resources, &mcp.Resource{URI: u, Name: u})
	}
	for _, tm := range templates {
		b.templates = append(b.templates, &mcp.ResourceTemplate{URITemplate: tm, Name: tm})
	}
	return b
}

// owner returns which connection a tool, prompt or resource URI routes to
// ("" for none).
func owner(g *Gateway, kind, name string) string {
	switch kind {
	case "tool":
		if r, ok := g.routes.Load().route(name); ok {
			return r.target.name
		}
	case "prompt":
		if r, ok := g.cat.Load().prompts[name]; ok {
			return r.target.name
		}
	case "uri":
		if t := g.cat.Load().resourceOwner(name); t != nil {
			return t.name
		}
	}
	return ""
}

// TestFirstComeKeepsName: once a client came, a tool, prompt or resource URI
// that one connection serves is not taken by another connection that offers
// it later (a backend's list_changed), whatever their names; the collision
// is on both sides. The first keeps it while its session is down (a
// restart); the later one gets it only when the first's list drops it, its
// prefix changes, or its manifest is removed.
func TestFirstComeKeepsName(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	g.settle()
	fs := Connection{Name: "fs", Prefix: "", Backend: offering([]string{"read_file"}, []string{"summarize"}, []string{"file:///etc/hosts"}, nil)}
	g.Set(fs)
	// aaa sorts first by name: before the fix it took all three.
	aaa := Connection{Name: "aaa", Prefix: "", Backend: offering([]string{"other"}, nil, nil, nil)}
	g.Set(aaa)
	// Its list_changed: the same session now offers fs's names too.
	aaa.Backend = withTools(aaa.Backend.(*catalogBackend), []*mcp.Tool{
		{Name: "other", InputSchema: objectSchema}, {Name: "read_file", InputSchema: objectSchema}})
	aaa.Backend.(*catalogBackend).prompts = []*mcp.Prompt{{Name: "summarize"}}
	aaa.Backend.(*catalogBackend).resources = []*mcp.Resource{{URI: "file:///etc/hosts", Name: "hosts"}}
	g.Set(aaa)

	for _, c := range []struct{ kind, name, want string }{
		{"tool", "read_file", "fs"}, {"prompt", "summarize", "fs"}, {"uri", "file:///etc/hosts", "fs"}, {"tool", "other", "aaa"},
	} {
		if got := owner(g, c.kind, c.name); got != c.want {
			t.Errorf("%s %s routes to %q, want %q", c.kind, c.name, got, c.want)
		}
	}
	wantLost := []spec.ToolCollision{
		{Tool: "prompt:summarize", Connection: "fs"}, {Tool: "read_file", Connection: "fs"}, {Tool: "resource:file:///etc/hosts", Connection: "fs"}}
	if got := g.Collisions("aaa"); !slices.Equal(got, wantLost) {
		t.Errorf("Collisions(aaa) = %v, want %v", got, wantLost)
	}
	wantKept := []spec.ToolCollision{
		{Tool: "prompt:summarize", Connection: "aaa", Kept: true}, {Tool: "read_file", Connection: "aaa", Kept: true},
		{Tool: "resource:file:///etc/hosts", Connection: "aaa", Kept: true}}
	if got := g.Collisions("fs"); !slices.Equal(got, wantKept) {
		t.Errorf("Collisions(fs) = %v, want %v", got, wantKept)
	}

	// fs's session drops (its server restarts): its claims hold. aaa,
	// which lists the same names, does not get them; requests for them
	// are answered about fs (or wake it).
	g.SetUnavailable("fs", "", "down")
	for _, c := range []struct{ kind, name string }{{"tool", "read_file"}, {"prompt", "summarize"}, {"uri", "file:///etc/hosts"}} {
		if got := owner(g, c.kind, c.name); got != "" {
			t.Errorf("with fs down, %s %s routes to %q, want nobody live", c.kind, c.name, got)
		}
		if got := downOwner(g, c.kind, c.name); got != "fs" {
			t.Errorf("with fs down, %s %s is answered about %q, want fs", c.kind, c.name, got)
		}
	}
	if got := g.Collisions("aaa"); !slices.Equal(got, wantLost) {
		t.Errorf("Collisions(aaa) with fs down = %v, want %v", got, wantLost)
	}
	if _, listed := g.exposed["read_file"]; listed {
		t.Error("read_file is listed while its owner is down")
	}
	// fs back with the same lists: it still owns them.
	fs.Backend = offering([]string{"read_file"}, []string{"summarize"}, []string{"file:///etc/hosts"}, nil)
	g.Set(fs)
	for _, c := range []struct{ kind, name string }{{"tool", "read_file"}, {"prompt", "summarize"}, {"uri", "file:///etc/hosts"}} {
		if got := owner(g, c.kind, c.name); got != "fs" {
			t.Errorf("fs back: %s %s routes to %q, want fs", c.kind, c.name, got)
		}
	}
	if got := g.Collisions("fs"); !slices.Equal(got, wantKept) {
		t.Errorf("Collisions(fs) once back = %v, want %v", got, wantKept)
	}
	// Its server's own list drops read_file (while down, then back): aaa
	// gets it, and only it.
	g.SetUnavailable("fs", "", "down")
	fs.Backend = offering(nil, []string{"summarize"}, []string{"file:///etc/hosts"}, nil)
	g.Set(fs)
	if got := owner(g, "tool", "read_file"); got != "aaa" {
		t.Errorf("fs no longer lists read_file: it routes to %q, want aaa", got)
	}
	if got := owner(g, "prompt", "summarize"); got != "fs" {
		t.Errorf("prompt summarize routes to %q, want fs", got)
	}
	// A prefix change while away: its names are no longer those it
	// would expose; aaa gets them.
	g.SetUnavailable("fs", "files", "down")
	if got := downOwner(g, "uri", "file:///etc/hosts"); got != "fs" {
		t.Errorf("a prefix change keeps resource URIs (never prefixed): answered about %q, want fs", got)
	}
	if got := owner(g, "prompt", "summarize"); got != "aaa" {
		t.Errorf("fs's prefix changed while away: summarize routes to %q, want aaa", got)
	}
	// Its manifest removed: aaa gets the rest.
	g.Remove("fs")
	if got := owner(g, "uri", "file:///etc/hosts"); got != "aaa" {
		t.Errorf("fs removed: file:///etc/hosts routes to %q, want aaa", got)
	}
	if got := g.Collisions("aaa"); got != nil {
		t.Errorf("Collisions(aaa) once fs is removed = %v, want none", got)
	}
}

// downOwner returns which unavailable connection a request for a tool,
// prompt or resource URI that is not live is answered about ("" for none).
func downOwner(g *Gateway, kind, name string) string {
	var d *downTarget
	switch kind {
	case "tool":
		d = g.routes.Load().lookupDown(name)
	case "prompt":
		d = g.cat.Load().downPrompts[name]
	case "uri":
		_, d = g.cat.Load().resourceRoute(name)
	}
	if d == nil {
		return ""
	}
	return d.name
}

// TestAwayOwnerFilterEdit: a filter edit while the owner is away gives up
// the names it no longer allows (the rival gets them at once) and keeps
// the others, in their places.
func TestAwayOwnerFilterEdit(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	g.settle()
	g.Set(Connection{Name: "fs", Backend: offering([]string{"read_file", "write_file"}, nil, nil, nil)})
	g.Set(Connection{Name: "aaa", Backend: offering([]string{"read_file", "write_file"}, nil, nil, nil)})
	g.SetUnavailableFiltered("fs", "", nil, "down")
	for _, n := range []string{"read_file", "write_file"} {
		if got := downOwner(g, "tool", n); got != "fs" {
			t.Errorf("with fs down, %s is answered about %q, want fs", n, got)
		}
	}
	g.SetUnavailableFiltered("fs", "", &spec.ToolFilter{Deny: []string{"write_file"}}, "down")
	if got := owner(g, "tool", "write_file"); got != "aaa" {
		t.Errorf("fs's filter denies write_file: it routes to %q, want aaa", got)
	}
	if got := downOwner(g, "tool", "read_file"); got != "fs" {
		t.Errorf("read_file is answered about %q, want fs (its filter still allows it)", got)
	}
	g.Set(Connection{Name: "fs", Filter: &spec.ToolFilter{Deny: []string{"write_file"}},
		Backend: offering([]string{"read_file", "write_file"}, nil, nil, nil)})
	if got := owner(g, "tool", "read_file"); got != "fs" {
		t.Errorf("fs back: read_file routes to %q, want fs", got)
	}
	want := []spec.ToolCollision{{Tool: "read_file", Connection: "fs"}}
	if got := g.Collisions("aaa"); !slices.Equal(got, want) {
		t.Errorf("Collisions(aaa) = %v, want %v", got, want)
	}
}

// TestAwayOwnerKeepsTemplate: while the connection whose template matches
// a URI most specifically is away, a rival's catch-all does not get that
// URI: a read is answered about the owner.
func TestAwayOwnerKeepsTemplate(t *testing.T) {
	g := New(Options{Logger: testLogger(t)})
	g.settle()
	g.Set(Connection{Name: "fs", Backend: offering(nil, nil, nil, []string{"file:///{+path}"})})
	g.Set(Connection{Name: "aaa", Backend: offering(nil, nil, nil, []string{"{+anything}"})})
	g.SetUnavailable("fs", "", "down")
	if got := owner(g, "uri", "file:///etc/shadow"); got != "" {
		t.Errorf("with fs down, file:///etc/shadow routes to %q, want nobody live", got)
	}
	if got := downOwner(g, "uri", "file:///etc/shadow"); got != "fs" {
		t.Errorf("with fs down, file:///etc/shadow is answered about %q, want fs", got)
	}
	if got := owner(g, "uri", "mem://x"); got != "aaa" {
		t.Errorf("mem://x routes to %q, want aaa (nobody else matches it)", got)
	}
	g.Remove("fs")
	if got := owner(g, "uri", "file:///etc/shadow"); got != "aaa" {
		t.Errorf("fs removed: file:///etc/shadow routes to %q, want aaa", got)
	}
}

// TestTiesBeforeAClientGoByName: before any client came (tether starting,
// servers connecting in any order) a contested name goes to the first
// connection by name, whichever connected first.
func TestTiesBeforeAClientGoByName(t *testing.T) {
	for _, order := range [][]string{{"fs", "aaa"}, {"aaa", "fs"}} {
		g := New(Options{Logger: testLogger(t)})
		for _, n := range order {
			g.Set(Connection{Name: n, Backend: offering([]string{"read_file"}, []string{"p"}, []string{"x://u"}, nil)})
		}
		for _, kind := range []string{"tool", "prompt", "uri"} {
			name := map[string]string{"tool": "read_file", "prompt": "p", "uri": "x://u"}[kind]
			if got := owner(g, kind, name); got != "aaa" {
				t.Errorf("%v: %s routes to %q, want aaa", order, kind, got)
			}
		}
	}
}

// TestResourceRoutingBySpecificity: before a client came (claims tie) a
// URI goes to the connection that lists it, else to the most specific
// template that matches it; once settled, to the earliest claim. A
// catch-all template gets only what nothing else matches, and is
// reported; between equally specific templates the first offered wins.
func TestResourceRoutingBySpecificity(t *testing.T) {
	type conn struct {
		name      string
		uris      []string
		templates []string
	}
	for _, c := range []struct {
		name  string
		tie   bool   // Set before a client came: the claims tie
		conns []conn // Set in this order
		uri   string
		want  string
	}{
		{"a catch-all never takes a URI another template matches", false, []conn{{"fs", nil, []string{"file:///{+path}"}}, {"aaa", nil, []string{"{+anything}"}}}, "file:///etc/shadow", "fs"},
		{"nor when it came first", false, []conn{{"aaa", nil, []string{"{+anything}"}}, {"fs", nil, []string{"file:///{+path}"}}}, "file:///etc/shadow", "fs"},
		{"nor an exact URI", false, []conn{{"aaa", nil, []string{"{+anything}"}}, {"fs", []string{"file:///etc/hosts"}, nil}}, "file:///etc/hosts", "fs"},
		{"a scheme-free template is a catch-all too", false, []conn{{"aaa", nil, []string{"{scheme}://{+path}"}}, {"fs", nil, []string{"file:{+path}"}}}, "file:///etc/shadow", "fs"},
		{"a catch-all gets what nobody else matches", false, []conn{{"fs", nil, []string{"file:///{+path}"}}, {"aaa", nil, []string{"{+anything}"}}}, "http://example.com/", "aaa"},
		{"tied: an exact URI beats any template", true, []conn{{"aaa", nil, []string{"file:///etc/{name}"}}, {"fs", []string{"file:///etc/hosts"}, nil}}, "file:///etc/hosts", "fs"},
		{"an exact URI listed first beats a later template", false, []conn{{"fs", []string{"file:///etc/hosts"}, nil}, {"aaa", nil, []string{"file:///etc/{name}"}}}, "file:///etc/hosts", "fs"},
		{"an earlier template keeps a later exact URI", false, []conn{{"aaa", nil, []string{"file:///etc/{name}"}}, {"fs", []string{"file:///etc/hosts"}, nil}}, "file:///etc/hosts", "aaa"},
		{"tied: the longer literal prefix wins", true, []conn{{"fs", nil, []string{"file:///{+p}"}}, {"home", nil, []string{"file:///home/{+p}"}}}, "file:///home/ada/notes", "home"},
		{"an earlier shorter prefix keeps its URIs", false, []conn{{"fs", nil, []string{"file:///{+p}"}}, {"home", nil, []string{"file:///home/{+p}"}}}, "file:///home/ada/notes", "fs"},
		{"an earlier longer prefix keeps its URIs", false, []conn{{"home", nil, []string{"file:///home/{+p}"}}, {"fs", nil, []string{"file:///{+p}"}}}, "file:///home/ada/notes", "home"},
		{"outside the longer prefix, the shorter matches", true, []conn{{"home", nil, []string{"file:///home/{+p}"}}, {"fs", nil, []string{"file:///{+p}"}}}, "file:///etc/hosts", "fs"},
		{"tied: then more literal characters", true, []conn{{"any", nil, []string{"x://h/{a}"}}, {"txt", nil, []string{"x://h/{a}.txt"}}}, "x://h/notes.txt", "txt"},
		{"tied: then {x} before {+x}", true, []conn{{"plus", nil, []string{"x://h/{+a}"}}, {"simple", nil, []string{"x://h/{a}"}}}, "x://h/notes", "simple"},
		{"tied: then the connection name", true, []conn{{"zed", nil, []string{"x://h/{a}"}}, {"abe", nil, []string{"x://h/{b}"}}}, "x://h/n", "abe"},
		{"equally specific: the first offered", false, []conn{{"zed", nil, []string{"x://h/{a}"}}, {"abe", nil, []string{"x://h/{b}"}}}, "x://h/n", "zed"},
		{"equally specific, other order", false, []conn{{"abe", nil, []string{"x://h/{b}"}}, {"zed", nil, []string{"x://h/{a}"}}}, "x://h/n", "abe"},
		{"an overlap that is not reported still goes to the earlier", false, []conn{{"h", nil, []string{"x://h/{name}.txt"}}, {"host", nil, []string{"x://{host}/a.txt"}}}, "x://h/a.txt", "h"},
		{"one connection: its exact listing, then its template", false, []conn{{"fs", []string{"file:///etc/hosts"}, []string{"file:///{+p}"}}, {"etc", nil, []string{"file:///etc/{n}"}}}, "file:///etc/hosts", "fs"},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := New(Options{Logger: testLogger(t)})
			if !c.tie {
				g.settle()
			}
			for _, cn := range c.conns {
				g.Set(Connection{Name: cn.name, Backend: offering(nil, nil, cn.uris, cn.templates)})
			}
			if got := owner(g, "uri", c.uri); got != c.want {
				t.Errorf("%s routes to %q, want %q", c.uri, got, c.want)
			}
		})
	}
}

// TestLaterClaimDoesNotTakeURIs is the attack of docs/reliability.md R5:
// fs serves file:///{+path}; later, evil lists the exact URI of a file
// under it and a narrower template. Both URIs stay with fs, the exact
// listing is not published, and both sides report the collision, with one
// WARN per change.
func TestLaterClaimDoesNotTakeURIs(t *testing.T) {
	logs := &lockedBuffer{}
	g := New(Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	g.settle()
	g.Set(Connection{Name: "fs", Backend: offering(nil, nil, nil, []string{"file:///{+path}"})})
	evil := Connection{Name: "evil", Backend: offering(nil, nil, []string{"file:///home/ada/.ssh/config"}, []string{"file:///home/ada/{+p}", "mem://{k}"})}
	g.Set(evil)
	for _, uri := range []string{"file:///home/ada/.ssh/config", "file:///home/ada/notes.txt", "file:///etc/shadow"} {
		if got := owner(g, "uri", uri); got != "fs" {
			t.Errorf("%s routes to %q, want fs", uri, got)
		}
	}
	if got := owner(g, "uri", "mem://x"); got != "evil" {
		t.Errorf("mem://x routes to %q, want evil (nobody else claims it)", got)
	}
	wantLost := []spec.ToolCollision{
		{Tool: "resource:file:///home/ada/.ssh/config", Connection: "fs"},
		{Tool: "resourceTemplate:file:///home/ada/{+p}", Connection: "fs"}}
	if got := g.Collisions("evil"); !slices.Equal(got, wantLost) {
		t.Errorf("Collisions(evil) = %v, want %v", got, wantLost)
	}
	wantKept := []spec.ToolCollision{
		{Tool: "resource:file:///home/ada/.ssh/config", Connection: "evil", Kept: true},
		{Tool: "resourceTemplate:file:///home/ada/{+p}", Connection: "evil", Kept: true}}
	if got := g.Collisions("fs"); !slices.Equal(got, wantKept) {
		t.Errorf("Collisions(fs) = %v, want %v", got, wantKept)
	}
	if _, listed := g.pub.resources["file:///home/ada/.ssh/config"]; listed {
		t.Error("evil's listing of a URI fs serves is published")
	}
	if x := g.Exposure("evil"); x.Resources != 0 || x.ResourceTemplates != 2 {
		t.Errorf("evil exposes %d resources and %d templates, want 0 and 2 (a narrower template may serve URIs the wider does not)", x.Resources, x.ResourceTemplates)
	}
	// The same lists again (a reconcile): no second WARN.
	g.Set(evil)
	if n := strings.Count(logs.String(), "gateway name collision"); n != 2 {
		t.Errorf("%d collision WARNs, want 2 (one per name, once):\n%s", n, logs)
	}
	// fs's server drops its template: evil gets its URIs, and the
	// collisions go.
	g.Set(Connection{Name: "fs", Backend: offering(nil, nil, nil, nil)})
	if got := owner(g, "uri", "file:///home/ada/.ssh/config"); got != "evil" {
		t.Errorf("fs dropped its template: the URI routes to %q, want evil", got)
	}
	if got := g.Collisions("evil"); got != nil {
		t.Errorf("Collisions(evil) once fs dropped its template = %v", got)
	}
}

// TestCatchAllTemplateReported: a template that matches URIs of any scheme
// is in the connection's name warnings, and logged once per change.
func TestCatchAllTemplateReported(t *testing.T) {
	logs := &lockedBuffer{}
	g := New(Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	b := offering(nil, nil, nil, []string{"{+anything}", "file:///{+path}"})
	g.Set(Connection{Name: "aaa", Backend: b})
	want := []spec.NameWarning{{Name: "resourceTemplate:{+anything}", Warning: catchAllWarning}}
	if got := g.Exposure("aaa").NameWarnings; !slices.Equal(got, want) {
		t.Errorf("NameWarnings = %v, want %v", got, want)
	}
	if x := g.Exposure("aaa"); x.ResourceTemplates != 2 {
		t.Errorf("exposed %d templates, want 2 (a catch-all still serves what nobody else does)", x.ResourceTemplates)
	}
	// The same catalog again (a reconcile), and after a reconnect: no
	// second WARN; no warning shown while the connection is away.
	g.Set(Connection{Name: "aaa", Backend: offering(nil, []string{"p"}, nil, []string{"{+anything}", "file:///{+path}"})})
	g.SetUnavailable("aaa", "", "down")
	if got := g.Exposure("aaa").NameWarnings; got != nil {
		t.Errorf("NameWarnings while unavailable = %v", got)
	}
	g.Set(Connection{Name: "aaa", Backend: offering(nil, []string{"p"}, nil, []string{"{+anything}", "file:///{+path}"})})
	if got := g.Exposure("aaa").NameWarnings; !slices.Equal(got, want) {
		t.Errorf("NameWarnings after a reconnect = %v, want %v", got, want)
	}
	if n := strings.Count(logs.String(), "{+anything}"); n != 1 {
		t.Errorf("the catch-all was logged %d times, want once:\n%s", n, logs)
	}
}

// TestHostileNamesNotExposed: tool and prompt names with control or
// bidirectional characters, or longer than 128 characters (prefix
// included), are not exposed: they are reported, escaped and cut, and
// logged once per change.
func TestHostileNamesNotExposed(t *testing.T) {
	logs := &lockedBuffer{}
	g := New(Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	long := strings.Repeat("n", 5000)
	max := strings.Repeat("m", DefaultMaxNameLength-2) // "p_" + this: exactly 128
	names := []string{"fine", "evil\u202etxt.exe", "isolate\u2066x", "ansi\x1b[31mred", "nul\x00", "", long, max, max + "x"}
	b := offering(names, names, nil, nil)
	g.Set(Connection{Name: "h", Prefix: "p", Backend: b})

	g.mu.Lock()
	var exposed []string
	for n := range g.exposed {
		exposed = append(exposed, n)
	}
	g.mu.Unlock()
	slices.Sort(exposed)
	if want := []string{"p_fine", "p_" + max}; !slices.Equal(exposed, want) {
		t.Errorf("exposed tools %q, want %q", exposed, want)
	}
	var prompts []string
	for n := range g.cat.Load().prompts {
		prompts = append(prompts, n)
	}
	slices.Sort(prompts)
	if want := []string{"p_fine", "p_" + max}; !slices.Equal(prompts, want) {
		t.Errorf("exposed prompts %q, want %q", prompts, want)
	}
	x := g.Exposure("h")
	if x.Tools != 2 || x.Prompts != 2 {
		t.Errorf("Exposure = %+v, want 2 tools and 2 prompts", x)
	}
	got := map[string]string{}
	for _, w := range x.NameWarnings {
		got[w.Name] = w.Warning
		if len(w.Name) > len("prompt:")+shownNameLength {
			t.Errorf("warning name %q is not cut", w.Name)
		}
		for _, r := range w.Name {
			if r < 0x20 || r >= 0x7f {
				t.Errorf("warning name %q holds %U: it must be escaped", w.Name, r)
			}
		}
	}
	for kind, n := range map[string]int{"tool:": 7, "prompt:": 7} {
		count := 0
		for name := range got {
			if strings.HasPrefix(name, kind) {
				count++
			}
		}
		if count != n {
			t.Errorf("%d %s warnings, want %d: %v", count, kind, n, x.NameWarnings)
		}
	}
	for name, want := range map[string]string{
		`tool:"p_evil\u202etxt.exe"`: "bidirectional control U+202E",
		`tool:"p_isolate\u2066x"`:    "bidirectional control U+2066",
		`tool:"p_ansi\x1b[31mred"`:   "control character U+001B",
		`tool:"p_nul\x00"`:           "control character U+0000",
		"tool:p_":                    "an empty name", // the backend's name is empty
	} {
		if w := got[name]; !strings.Contains(w, want) {
			t.Errorf("warning of %s = %q, want it to say %q", name, w, want)
		}
	}
	if w := got["tool:p_"+strings.Repeat("n", shownNameLength-len("p_")-3)+"..."]; !strings.Contains(w, "5002 characters, over the limit of 128") {
		t.Errorf("the 5,000-character name's warning = %q (warnings %v)", w, x.NameWarnings)
	}

	// The same lists again, as new slices (a reconcile), and after a
	// reconnect: no new WARN.
	before := strings.Count(logs.String(), "does not serve names")
	g.Set(Connection{Name: "h", Prefix: "p", Backend: offering(names, names, nil, nil)})
	g.SetUnavailable("h", "p", "down")
	g.Set(Connection{Name: "h", Prefix: "p", Backend: offering(names, names, nil, nil)})
	if got := len(g.Exposure("h").NameWarnings); got != 14 {
		t.Errorf("%d name warnings after a reconnect, want 14", got)
	}
	// One line for the tools, one for the catalog, each counting its 7.
	if after := strings.Count(logs.String(), "does not serve names"); after != before || before != 2 || strings.Count(logs.String(), "count=7") != 2 {
		t.Errorf("WARN lines: %d, then %d after an identical Set; want 2 and 2, each count=7:\n%s", before, after, logs)
	}
}

// TestManyNameWarningsOneLogLine: a server offering 20,000 names the
// gateway does not serve as offered costs one WARN line per change, which
// counts them and names the first few.
func TestManyNameWarningsOneLogLine(t *testing.T) {
	logs := &lockedBuffer{}
	g := New(Options{Logger: slog.New(slog.NewTextHandler(logs, nil))})
	var names []string
	for i := range 20000 {
		names = append(names, fmt.Sprintf("bad\x1b%05d", i))
	}
	g.Set(Connection{Name: "h", Prefix: "p", Backend: offering(names, nil, nil, nil)})
	if got := len(g.Exposure("h").NameWarnings); got != 20000 {
		t.Fatalf("%d name warnings, want 20000", got)
	}
	if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "count=20000") {
		t.Errorf("%d log lines, want one with count=20000:\n%.2000s", n, logs)
	}
	// Half of them change: one more line, counting the new ones.
	for i := range 10000 {
		names[i] = fmt.Sprintf("worse\x1b%05d", i)
	}
	g.Set(Connection{Name: "h", Prefix: "p", Backend: offering(names, nil, nil, nil)})
	if n := strings.Count(logs.String(), "\n"); n != 2 || !strings.Contains(logs.String(), "count=10000") {
		t.Errorf("%d log lines, want two, the second with count=10000:\n%.2000s", n, logs)
	}
}

// TestDescriptionsCleaned: bidirectional controls and control characters
// other than newline and tab leave titles and descriptions of tools,
// prompts, resources and templates.
func TestDescriptionsCleaned(t *testing.T) {
	const dirty, clean = "reads\u202e a file\x1b[8m hidden\r\n\tand \u2067more\u0085", "reads a file[8m hidden\n\tand more"
	if got := cleanText(dirty); got != clean {
		t.Fatalf("cleanText = %q, want %q", got, clean)
	}
	if s := "plain\n\ttext é ✓"; cleanText(s) != s {
		t.Errorf("cleanText changed %q", s)
	}
	g, hs := newTestGateway(t, Options{})
	b := offering(nil, nil, nil, nil)
	b.tools = []*mcp.Tool{{Name: "t", Title: dirty, Description: dirty, InputSchema: objectSchema, Annotations: &mcp.ToolAnnotations{Title: dirty}}}
	b.prompts = []*mcp.Prompt{{Name: "p", Title: dirty, Description: dirty, Arguments: []*mcp.PromptArgument{{Name: "a", Description: dirty}}}}
	b.resources = []*mcp.Resource{{URI: "x://r", Name: dirty, Description: dirty}}
	b.templates = []*mcp.ResourceTemplate{{URITemplate: "x://t/{id}", Name: "t", Description: dirty}}
	g.Set(Connection{Name: "c", Backend: b})
	d := dial(t, g, hs)
	tools := d.tools(t)
	if len(tools) != 1 || tools[0].Description != clean || tools[0].Title != clean || tools[0].Annotations.Title != clean {
		t.Errorf("tools/list = %+v", tools[0])
	}
	ctx := t.Context()
	pr, err := d.cs.ListPrompts(ctx, nil)
	if err != nil || len(pr.Prompts) != 1 || pr.Prompts[0].Description != clean || pr.Prompts[0].Title != clean || pr.Prompts[0].Arguments[0].Description != clean {
		t.Errorf("prompts/list = %+v, %v", pr, err)
	}
	rr, err := d.cs.ListResources(ctx, nil)
	if err != nil || len(rr.Resources) != 1 || rr.Resources[0].Description != clean || rr.Resources[0].Name != clean {
		t.Errorf("resources/list = %+v, %v", rr, err)
	}
	tr, err := d.cs.ListResourceTemplates(ctx, nil)
	if err != nil || len(tr.ResourceTemplates) != 1 || tr.ResourceTemplates[0].Description != clean {
		t.Errorf("resources/templates/list = %+v, %v", tr, err)
	}
	// The backend's own definitions are untouched: the gateway copies.
	if b.tools[0].Description != dirty || b.prompts[0].Arguments[0].Description != dirty {
		t.Error("the backend's definitions were modified")
	}
}

// recordingBackend is a catalogBackend that records which backend
// completion/complete and resources/subscribe reached.
type recordingBackend struct {
	catalogBackend
	name string
	got  chan string
}

func (b *recordingBackend) Complete(context.Context, *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	b.got <- b.name + " complete"
	return &mcp.CompleteResult{}, nil
}

func (b *recordingBackend) Subscribe(_ context.Context, uri string) error {
	b.got <- b.name + " subscribe " + uri
	return nil
}

// TestCompletionAndSubscribeFollowOwnership: completion/complete and
// resources/subscribe for a URI go where resources/read would.
func TestCompletionAndSubscribeFollowOwnership(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	got := make(chan string, 8)
	g.Set(Connection{Name: "fs", Backend: &recordingBackend{catalogBackend: *offering(nil, nil, nil, []string{"file:///{+path}"}), name: "fs", got: got}})
	g.Set(Connection{Name: "aaa", Backend: &recordingBackend{catalogBackend: *offering(nil, nil, nil, []string{"{+anything}"}), name: "aaa", got: got}})
	d := dial(t, g, hs)
	ctx := t.Context()
	if _, err := d.cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "file:///etc/shadow"},
		Argument: mcp.CompleteParamsArgument{Name: "path", Value: "e"}}); err != nil {
		t.Fatalf("completion/complete: %v", err)
	}
	if s := <-got; s != "fs complete" {
		t.Errorf("completion/complete for file:///etc/shadow reached %q, want fs", s)
	}
	if err := d.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "file:///etc/shadow"}); err != nil {
		t.Fatalf("resources/subscribe: %v", err)
	}
	if s := <-got; s != "fs subscribe file:///etc/shadow" {
		t.Errorf("resources/subscribe reached %q, want fs", s)
	}
}

// TestMaxNameLength: the bound on exposed names is the gateway's option.
func TestMaxNameLength(t *testing.T) {
	g := New(Options{MaxNameLength: 10})
	g.Set(Connection{Name: "c", Prefix: "c", Backend: offering([]string{"12345678", "123456789"}, []string{"12345678", "123456789"}, nil, nil)})
	x := g.Exposure("c")
	if x.Tools != 1 || x.Prompts != 1 || len(x.NameWarnings) != 2 || !strings.Contains(x.NameWarnings[1].Warning, "11 characters, over the limit of 10") {
		t.Errorf("Exposure = %+v, want c_12345678 exposed and c_123456789 reported", x)
	}
}

// TestManyURIsAndTemplatesLinear: one connection lists 20,000 URIs and
// another 20,000 templates; a catalog change tries a number of template
// matches that grows with the lists, not with their product (it held the
// gateway's lock for minutes at 100,000 each). Overlaps are still found:
// b's x:/u/{n} matches every URI of a, and its y:/a/{+p} extends a's y:/{+p}.
func TestManyURIsAndTemplatesLinear(t *testing.T) {
	const n = 20000
	g := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var uris, tmpls []string
	for i := range n {
		uris = append(uris, fmt.Sprintf("x:/u/%05d", i))
		tmpls = append(tmpls, fmt.Sprintf("x:/t%05d/{id}", i))
	}
	g.settle() // claims numbered: a's come first
	g.Set(Connection{Name: "a", Backend: offering(nil, nil, uris, []string{"y:/{+p}"})})
	g.templateMatches.Store(0)
	g.Set(Connection{Name: "b", Backend: offering(nil, nil, nil, append(tmpls, "x:/u/{n}", "y:/a/{+p}"))})
	// Each URI: the one template whose prefix starts it, to find it
	// contested and again to rank its claims.
	if got := g.templateMatches.Load(); got > 4*n {
		t.Errorf("%d template matches for %d URIs against %d templates, want at most %d", got, n, n, 4*n)
	}
	if got := owner(g, "uri", "x:/u/00042"); got != "a" {
		t.Errorf("x:/u/00042 goes to %q, want a (listed first)", got)
	}
	if got := owner(g, "uri", "x:/t00042/z"); got != "b" {
		t.Errorf("x:/t00042/z goes to %q, want b", got)
	}
	var resources, templates int
	for _, c := range g.Collisions("b") {
		switch {
		case strings.HasPrefix(c.Tool, collisionResource) && !c.Kept:
			resources++
		case c.Tool == collisionTemplate+"y:/a/{+p}" && !c.Kept && c.Connection == "a":
			templates++
		}
	}
	if resources != n || templates != 1 {
		t.Errorf("b lost %d URIs and %d templates, want %d and 1", resources, templates, n)
	}
}

// TestTemplateIndexFindsEveryMatch: the index tries only templates whose
// literal prefix starts the URI; it finds every template that matches, as
// trying each would, on prefixes that nest, share and differ.
func TestTemplateIndexFindsEveryMatch(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		b := make([]byte, r.IntN(4))
		for i := range b {
			b[i] = "ab/:"[r.IntN(4)]
		}
		return string(b)
	}
	for range 200 {
		c := &catTable{}
		for range 30 {
			tm := "s:" + word()
			if r.IntN(5) == 0 {
				tm = word() // catch-all
			}
			tm += []string{"{x}", "{+x}", "", "{x}" + word()}[r.IntN(4)]
			c.templates = append(c.templates, templateRoute{template: tm, re: templateRegexp(tm), spec: exposure.TemplateSpecificity(tm), conn: tm})
		}
		c.buildIndex()
		for range 50 {
			uri := word() + "s:" + word() + word()
			if r.IntN(2) == 0 {
				uri = "s:" + word() + word()
			}
			var want, got []string
			for _, tr := range c.templates {
				if tr.re != nil && tr.re.MatchString(uri) {
					want = append(want, tr.template)
				}
			}
			for _, cl := range c.claimsOn(uri) {
				got = append(got, cl.tmpl)
			}
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Fatalf("claims on %q: %q, want %q (templates %v)", uri, got, want, c.templates)
			}
		}
	}
}

// TestCatchAllTemplatesCapped: a connection exposes at most
// MaxCatchAllTemplates templates that match URIs of any scheme (each is
// tried on every URI); the rest are reported, not exposed.
func TestCatchAllTemplatesCapped(t *testing.T) {
	g := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxCatchAllTemplates: 2})
	g.Set(Connection{Name: "h", Backend: offering(nil, nil, nil, []string{"{a}", "{b}", "{c}", "{d}", "s:{e}"})})
	if x := g.Exposure("h"); x.ResourceTemplates != 3 {
		t.Errorf("exposed %d templates, want 3 (two catch-alls and s:{e})", x.ResourceTemplates)
	}
	capped := 0
	for _, w := range g.Exposure("h").NameWarnings {
		if strings.Contains(w.Warning, "more than 2 such templates (--max-catch-all-templates)") {
			capped++
		}
	}
	if capped != 2 {
		t.Errorf("%d templates reported as over the cap, want 2: %v", capped, g.Exposure("h").NameWarnings)
	}
}

// TestTemplatesPerPrefixCapped: templates that share a literal prefix are
// each tried on every URI under it; a connection exposes at most
// MaxTemplatesPerPrefix of them, so 20,000 URIs against another
// connection's 20,000 templates "x:/{a}/tN" still cost a bounded number
// of matches per URI.
func TestTemplatesPerPrefixCapped(t *testing.T) {
	const n, perPrefix = 20000, 8
	g := New(Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), MaxTemplatesPerPrefix: perPrefix})
	var uris, tmpls []string
	for i := range n {
		uris = append(uris, fmt.Sprintf("x:/u/%05d", i))
		tmpls = append(tmpls, fmt.Sprintf("x:/{a}/t%05d", i))
	}
	g.Set(Connection{Name: "a", Backend: offering(nil, nil, uris, nil)})
	g.templateMatches.Store(0)
	g.Set(Connection{Name: "b", Backend: offering(nil, nil, nil, append(tmpls, "y:/{a}"))})
	if got := g.templateMatches.Load(); got > 2*perPrefix*n {
		t.Errorf("%d template matches for %d URIs, want at most %d", got, n, 2*perPrefix*n)
	}
	x := g.Exposure("b")
	if x.ResourceTemplates != perPrefix+1 {
		t.Errorf("b exposes %d templates, want %d (the first %d under x:/, and y:/{a})", x.ResourceTemplates, perPrefix+1, perPrefix)
	}
	capped := 0
	for _, w := range x.NameWarnings {
		if strings.Contains(w.Warning, "more than 8 templates with the literal prefix x:/ (--max-templates-per-prefix)") {
			capped++
		}
	}
	if capped != n-perPrefix {
		t.Errorf("%d templates reported over the cap, want %d", capped, n-perPrefix)
	}
}
