package gateway

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/exposure"
	"github.com/tether-mcp/tether/spec"
)

// idBackend is a backend with an identity: pointers to zero-size values
// (a bare fakeBackend) may compare equal.
type idBackend struct {
	fakeBackend
	id        int
	templates []*mcp.ResourceTemplate
}

func (b *idBackend) ResourceTemplates() []*mcp.ResourceTemplate { return b.templates }

// withCatalog gives b the exact resource URIs and templates.
func withCatalog(b *idBackend, uris, templates []string) *idBackend {
	b.resources, b.templates = nil, nil
	for _, u := range uris {
		b.resources = append(b.resources, &mcp.Resource{URI: u, Name: u})
	}
	for _, tm := range templates {
		b.templates = append(b.templates, &mcp.ResourceTemplate{URITemplate: tm, Name: tm})
	}
	return b
}

// The resource catalog the model draws from, and which URI each template
// matches (by hand, not by the gateway's matcher).
var (
	modelURIs      = []string{"file:///home/ada", "file:///home/ada/k", "file:///etc", "x://h/a", "mem://m"}
	modelTemplates = []string{"file:///{+p}", "file:///home/{+p}", "file:///home/{n}", "{+any}", "x://h/{a}"}
	modelMatches   = map[string][]string{
		"file:///{+p}":      {"file:///home/ada", "file:///home/ada/k", "file:///etc"},
		"file:///home/{+p}": {"file:///home/ada", "file:///home/ada/k"},
		"file:///home/{n}":  {"file:///home/ada"},
		"{+any}":            modelURIs,
		"x://h/{a}":         {"x://h/a"},
	}
)

// model is the gateway's contract on exposure, computed from scratch after
// every change: a name goes to the connection that claimed it first, and
// among claims made before the gateway settled (seq 0), to the first by
// connection name; the others lost it, and the owner kept it against each.
// A connection's claims outlast its session: while it is unavailable it
// keeps the names of its last list (not live, answered as down), unless
// it was made unavailable with another prefix. A resource URI goes to the
// claim on it that ranks first (rankClaims: an exact listing or a template
// that matches it, by hand in modelMatches), and resource collisions are
// those docs/contract.md §5 says are reported (catCollisions).
// The gateway itself only re-examines the names a change touches;
// TestIncrementalMatchesModel holds it to this.
type model struct {
	conns   map[string]*modelConn
	settled bool
	seq     uint64
}

type modelConn struct {
	c         Connection
	tools     []*mcp.Tool
	available bool
	reason    string
	prefix    string
	seqs      map[string]uint64 // exposed name → when first claimed, kept while its claims hold
	// Its resource catalog: exact URIs and templates, kept while it is
	// away (never prefixed), with when each was first offered.
	uris, templates []string
	catSeqs         map[string]uint64 // "r:"+URI, "t:"+template →
}

// setCatalog records a Set's resource catalog: what it still offers keeps
// its claim time.
func (m *model) setCatalog(name string, old map[string]uint64, uris, templates []string) {
	mc := m.conns[name]
	mc.uris, mc.templates, mc.catSeqs = uris, templates, map[string]uint64{}
	for _, k := range append(prefixed("r:", uris), prefixed("t:", templates)...) {
		if s, ok := old[k]; ok {
			mc.catSeqs[k] = s
			continue
		}
		if m.settled {
			m.seq++
			mc.catSeqs[k] = m.seq
		} else {
			mc.catSeqs[k] = 0
		}
	}
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

// modelClaim is a claim on a URI: an exact listing or a template.
type modelClaim struct {
	conn, tmpl string
	seq        uint64
}

// rankClaims: a catch-all template last; then the first offered; ties go
// to an exact listing, then the more specific template, then the
// connection name.
func rankClaims(a, b modelClaim) int {
	aAll, bAll := a.tmpl != "" && exposure.TemplateSpecificity(a.tmpl).CatchAll, b.tmpl != "" && exposure.TemplateSpecificity(b.tmpl).CatchAll
	switch {
	case aAll != bAll:
		if aAll {
			return 1
		}
		return -1
	case a.seq != b.seq:
		return cmp.Compare(a.seq, b.seq)
	case (a.tmpl == "") != (b.tmpl == ""):
		if a.tmpl == "" {
			return -1
		}
		return 1
	case a.tmpl != "" && b.tmpl != "" && a.tmpl != b.tmpl:
		if c := exposure.CompareSpecificity(exposure.TemplateSpecificity(a.tmpl), exposure.TemplateSpecificity(b.tmpl)); c != 0 {
			return c
		}
	}
	return cmp.Or(cmp.Compare(a.conn, b.conn), cmp.Compare(a.tmpl, b.tmpl))
}

// keyOwners returns, per "r:" or "t:" key, its claims in claim order
// (the same URI or template offered by several connections).
func (m *model) keyOwners() map[string][]modelClaim {
	out := map[string][]modelClaim{}
	for _, n := range m.sortedNames() {
		mc := m.conns[n]
		for k, seq := range mc.catSeqs {
			c := modelClaim{conn: n, seq: seq}
			if strings.HasPrefix(k, "t:") {
				c.tmpl = k[2:]
			}
			out[k] = append(out[k], c)
		}
	}
	for _, cl := range out {
		slices.SortFunc(cl, func(a, b modelClaim) int { return claimBefore(a.seq, a.conn, b.seq, b.conn) })
	}
	return out
}

// uriClaims returns the claims on uri ranked: every exact listing, and the
// template of each template's first claimant that matches it.
func (m *model) uriClaims(uri string) []modelClaim {
	owners := m.keyOwners()
	cl := slices.Clone(owners["r:"+uri])
	for _, tm := range modelTemplates {
		if o := owners["t:"+tm]; len(o) > 0 && slices.Contains(modelMatches[tm], uri) {
			cl = append(cl, o[0])
		}
	}
	slices.SortFunc(cl, rankClaims)
	return cl
}

// catCollisions returns the resource collisions of every connection.
func (m *model) catCollisions() map[string][]spec.ToolCollision {
	out := map[string][]spec.ToolCollision{}
	seen := map[[3]string]bool{}
	add := func(name, loser, winner string) {
		if seen[[3]string{name, loser, winner}] {
			return
		}
		seen[[3]string{name, loser, winner}] = true
		out[loser] = append(out[loser], spec.ToolCollision{Tool: name, Connection: winner})
		out[winner] = append(out[winner], spec.ToolCollision{Tool: name, Connection: loser, Kept: true})
	}
	owners := m.keyOwners()
	for _, tm := range modelTemplates {
		for _, c := range owners["t:"+tm][min(1, len(owners["t:"+tm])):] {
			add("resourceTemplate:"+tm, c.conn, owners["t:"+tm][0].conn)
		}
	}
	for _, u := range modelURIs {
		if len(owners["r:"+u]) == 0 {
			continue
		}
		cl := m.uriClaims(u)
		for _, c := range cl[1:] {
			if c.conn != cl[0].conn && (c.tmpl == "" || !exposure.TemplateSpecificity(c.tmpl).CatchAll) {
				add("resource:"+u, c.conn, cl[0].conn)
			}
		}
	}
	var ts []modelClaim
	for _, tm := range modelTemplates {
		if o := owners["t:"+tm]; len(o) > 0 {
			ts = append(ts, o[0])
		}
	}
	for _, a := range ts {
		for _, b := range ts {
			if a.conn == b.conn || exposure.TemplateSpecificity(a.tmpl).CatchAll != exposure.TemplateSpecificity(b.tmpl).CatchAll || rankClaims(a, b) >= 0 {
				continue
			}
			if strings.HasPrefix(exposure.LiteralPrefix(b.tmpl), exposure.LiteralPrefix(a.tmpl)) {
				add("resourceTemplate:"+b.tmpl, b.conn, a.conn)
			}
		}
	}
	return out
}

// set records a Set: names the connection still claims keep their claim
// time; new ones are numbered after every claim so far once settled.
func (m *model) set(name string, c Connection, tools []*mcp.Tool) {
	old := m.conns[name]
	seqs := map[string]uint64{}
	for _, t := range tools {
		if !c.Filter.Allows(t.Name) {
			continue
		}
		n := exposedName(c.Prefix, t.Name)
		if _, ok := seqs[n]; ok {
			continue
		}
		if old != nil {
			if s, ok := old.seqs[n]; ok {
				seqs[n] = s
				continue
			}
		}
		if m.settled {
			m.seq++
			seqs[n] = m.seq
		} else {
			seqs[n] = 0
		}
	}
	m.conns[name] = &modelConn{c: c, tools: tools, available: true, prefix: c.Prefix, seqs: seqs}
}

// claimants lists, for each exposed name, its claimants in claim order,
// each with the backend tool name.
func (m *model) claimants() map[string][][2]string {
	type bid struct {
		conn, tool string
		seq        uint64
	}
	bids := map[string][]bid{}
	for _, n := range m.sortedNames() {
		mc := m.conns[n]
		seen := map[string]bool{}
		for _, t := range mc.tools {
			name := exposedName(mc.c.Prefix, t.Name)
			if !mc.c.Filter.Allows(t.Name) || seen[name] {
				continue
			}
			seen[name] = true
			bids[name] = append(bids[name], bid{conn: n, tool: t.Name, seq: mc.seqs[name]})
		}
	}
	out := map[string][][2]string{}
	for name, bs := range bids {
		slices.SortStableFunc(bs, func(a, b bid) int { return claimBefore(a.seq, a.conn, b.seq, b.conn) })
		for _, b := range bs {
			out[name] = append(out[name], [2]string{b.conn, b.tool})
		}
	}
	return out
}

// owners maps each live name (its owner is available) to its owner and
// the backend tool name.
func (m *model) owners() map[string][2]string {
	out := map[string][2]string{}
	for name, cl := range m.claimants() {
		if m.conns[cl[0][0]].available {
			out[name] = cl[0]
		}
	}
	return out
}

func (m *model) sortedNames() []string {
	names := make([]string, 0, len(m.conns))
	for n := range m.conns {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// collisions returns what conn lost and kept, and how many names it
// exposes.
func (m *model) collisions(conn string) ([]spec.ToolCollision, int) {
	mc := m.conns[conn]
	if mc == nil || !mc.available {
		return nil, 0
	}
	var lost []spec.ToolCollision
	n := 0
	for name, cl := range m.claimants() {
		switch {
		case cl[0][0] == conn:
			n++
			for _, other := range cl[1:] {
				lost = append(lost, spec.ToolCollision{Tool: name, Connection: other[0], Kept: true})
			}
		case slices.ContainsFunc(cl, func(c [2]string) bool { return c[0] == conn }):
			lost = append(lost, spec.ToolCollision{Tool: name, Connection: cl[0][0]})
		}
	}
	lost = append(lost, m.catCollisions()[conn]...)
	slices.SortFunc(lost, func(a, b spec.ToolCollision) int {
		return cmp.Or(cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Connection, b.Connection), keptFirst(a.Kept, b.Kept))
	})
	return lost, n
}

// down returns which unavailable connection a call to a name that is not
// live is answered about ("" for none).
func (m *model) down(name string) string {
	if cl := m.claimants()[name]; len(cl) > 0 && !m.conns[cl[0][0]].available {
		return cl[0][0] // its owner is away and keeps it
	}
	var byPrefix string
	bestLen := 0
	for _, n := range m.sortedNames() {
		mc := m.conns[n]
		if mc.available {
			continue
		}
		if p := mc.prefix + "_"; mc.prefix != "" && strings.HasPrefix(name, p) && len(p) > bestLen {
			byPrefix, bestLen = n, len(p)
		}
	}
	return byPrefix
}

// TestIncrementalMatchesModel drives a gateway and the model through the
// same random Set/SetUnavailable/Remove sequences, with shared prefixes so
// that names collide, and compares routes, published tools, collisions and
// "not connected" answers after every step, and resource routing, exposure
// and collisions with random resource catalogs. Odd seeds settle the gateway
// (a client came) part way, so that later claims rank by arrival.
func TestIncrementalMatchesModel(t *testing.T) {
	connNames := []string{"a", "b", "c", "d", "e"}
	prefixes := []string{"", "p", "q", "p_t"}
	toolNames := []string{"t1", "t2", "t3", "t_1"}
	filters := []*spec.ToolFilter{nil, {Deny: []string{"t2"}}, {Allow: []string{"t*"}, Deny: []string{"t_*"}}}

	// All names a call could use, live or not.
	var probe []string
	for _, p := range prefixes {
		for _, tn := range append(slices.Clone(toolNames), "zz") {
			probe = append(probe, exposedName(p, tn))
		}
	}

	for seed := range uint64(40) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			g := New(Options{})
			m := &model{conns: map[string]*modelConn{}}
			for step := range 60 {
				if seed%2 == 1 && step == 10+int(seed%20) {
					g.settle()
					m.settled = true
				}
				name := connNames[rng.IntN(len(connNames))]
				var op string
				switch r := rng.IntN(10); {
				case r < 6:
					var tools []*mcp.Tool
					for _, tn := range toolNames {
						if rng.IntN(2) == 0 {
							tools = append(tools, &mcp.Tool{Name: tn, InputSchema: map[string]any{"type": "object"}})
						}
					}
					c := Connection{Name: name, Prefix: prefixes[rng.IntN(len(prefixes))], Filter: filters[rng.IntN(len(filters))]}
					mc := m.conns[name]
					if mc != nil && mc.available && rng.IntN(2) == 0 {
						// Same session, other settings (and a refreshed tool list).
						c.Backend = withTools(mc.c.Backend.(*idBackend), tools)
					} else {
						c.Backend = withTools(&idBackend{id: step}, tools)
					}
					var uris, tmpls []string
					for _, u := range modelURIs {
						if rng.IntN(3) == 0 {
							uris = append(uris, u)
						}
					}
					for _, tm := range modelTemplates {
						if rng.IntN(3) == 0 {
							tmpls = append(tmpls, tm)
						}
					}
					withCatalog(c.Backend.(*idBackend), uris, tmpls)
					op = fmt.Sprintf("Set(%s, prefix %q, %d tools, URIs %q, templates %q)", name, c.Prefix, len(tools), uris, tmpls)
					var oldCat map[string]uint64
					if mc != nil {
						oldCat = mc.catSeqs
					}
					g.Set(c)
					m.set(name, c, tools)
					m.setCatalog(name, oldCat, uris, tmpls)
				case r < 8:
					prefix := prefixes[rng.IntN(len(prefixes))]
					op = fmt.Sprintf("SetUnavailable(%s, %q)", name, prefix)
					mc := m.conns[name]
					if mc == nil {
						mc = &modelConn{}
						m.conns[name] = mc
					}
					switch {
					case prefix != mc.prefix:
						mc.tools, mc.seqs = nil, nil // its names are not those it would expose
					case rng.IntN(2) == 0:
						// The spec's filter told while away: only the
						// claims both filters allow remain.
						filter := filters[rng.IntN(len(filters))]
						op = fmt.Sprintf("SetUnavailableFiltered(%s, %q, %v)", name, prefix, filter)
						old := mc.c.Filter
						mc.tools = slices.DeleteFunc(slices.Clone(mc.tools), func(t *mcp.Tool) bool {
							return !old.Allows(t.Name) || !filter.Allows(t.Name)
						})
						mc.c.Filter = filter
						kept := map[string]bool{}
						for _, t := range mc.tools {
							kept[exposedName(mc.c.Prefix, t.Name)] = true
						}
						maps.DeleteFunc(mc.seqs, func(n string, _ uint64) bool { return !kept[n] })
						g.SetUnavailableFiltered(name, prefix, filter, "down")
						mc.available, mc.prefix, mc.reason = false, prefix, "down"
						checkAgainstModel(t, g, m, probe, fmt.Sprintf("step %d: %s", step, op))
						if t.Failed() {
							return
						}
						continue
					}
					g.SetUnavailable(name, prefix, "down")
					mc.available, mc.prefix, mc.reason = false, prefix, "down"
				default:
					op = fmt.Sprintf("Remove(%s)", name)
					g.Remove(name)
					delete(m.conns, name)
				}
				checkAgainstModel(t, g, m, probe, fmt.Sprintf("step %d: %s", step, op))
				if t.Failed() {
					return
				}
			}
		})
	}
}

func checkAgainstModel(t *testing.T, g *Gateway, m *model, probe []string, where string) {
	t.Helper()
	owners := m.owners()
	table := g.routes.Load()
	for _, name := range probe {
		r, live := table.route(name)
		want, wantLive := owners[name]
		switch {
		case live != wantLive:
			t.Errorf("%s: %q live = %v, want %v", where, name, live, wantLive)
		case live && (r.target.name != want[0] || r.tool != want[1]):
			t.Errorf("%s: %q routes to %s/%s, want %s/%s", where, name, r.target.name, r.tool, want[0], want[1])
		case live && r.target.backend.ToolCalls != m.conns[want[0]].c.Backend:
			t.Errorf("%s: %q routes to a stale backend", where, name)
		case !live:
			got := ""
			if d := table.lookupDown(name); d != nil {
				got = d.name
			}
			if want := m.down(name); got != want {
				t.Errorf("%s: %q not live, answered as down %q, want %q", where, name, got, want)
			}
		}
	}
	g.mu.Lock()
	var published []string
	for name := range g.exposed {
		published = append(published, name)
	}
	g.mu.Unlock()
	slices.Sort(published)
	var wantPublished []string
	for name := range owners {
		wantPublished = append(wantPublished, name)
	}
	slices.Sort(wantPublished)
	if !slices.Equal(published, wantPublished) {
		t.Errorf("%s: published %v, want %v", where, published, wantPublished)
	}
	// Resources: each URI goes to the claim that ranks first, live or
	// answered as down; an exact listing is published only if its first
	// lister serves the URI.
	cat := g.cat.Load()
	owners2 := m.keyOwners()
	wantRes, wantTmpl := map[string]int{}, map[string]int{}
	for _, u := range modelURIs {
		wantConn, wantLive := "", false
		if cl := m.uriClaims(u); len(cl) > 0 {
			wantConn, wantLive = cl[0].conn, m.conns[cl[0].conn].available
			if o := owners2["r:"+u]; len(o) > 0 && o[0].conn == wantConn && wantLive {
				wantRes[wantConn]++
			}
		}
		gotConn, gotLive := "", false
		switch tg, d := cat.resourceRoute(u); {
		case tg != nil:
			gotConn, gotLive = tg.name, true
			if tg.backend.ToolCalls != m.conns[tg.name].c.Backend {
				t.Errorf("%s: %s routes to a stale backend of %s", where, u, tg.name)
			}
		case d != nil:
			gotConn = d.name
		}
		if gotConn != wantConn || gotLive != wantLive {
			t.Errorf("%s: %s routes to %q (live %v), want %q (live %v)", where, u, gotConn, gotLive, wantConn, wantLive)
		}
	}
	for _, tm := range modelTemplates {
		if o := owners2["t:"+tm]; len(o) > 0 && m.conns[o[0].conn].available {
			wantTmpl[o[0].conn]++
		}
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		x := g.Exposure(n)
		if mc := m.conns[n]; mc == nil || !mc.available {
			wantRes[n], wantTmpl[n] = 0, 0
		}
		if x.Resources != wantRes[n] || x.ResourceTemplates != wantTmpl[n] {
			t.Errorf("%s: %s exposes %d resources and %d templates, want %d and %d", where, n, x.Resources, x.ResourceTemplates, wantRes[n], wantTmpl[n])
		}
	}
	for _, n := range []string{"a", "b", "c", "d", "e"} {
		lost, exposed := m.collisions(n)
		if got := g.Collisions(n); !slices.Equal(got, lost) {
			t.Errorf("%s: Collisions(%s) = %v, want %v", where, n, got, lost)
		}
		if got := g.Exposed(n); got != exposed {
			t.Errorf("%s: Exposed(%s) = %d, want %d", where, n, got, exposed)
		}
	}
}

func keptFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}
