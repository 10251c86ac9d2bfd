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

	"github.com/tether-mcp/tether/spec"
)

// idBackend is a backend with an identity: pointers to zero-size values
// (a bare fakeBackend) may compare equal.
type idBackend struct {
	fakeBackend
	id int
}

// model is the gateway's contract on exposure, computed from scratch after
// every change: a name goes to the connection that claimed it first, and
// among claims made before the gateway settled (seq 0), to the first by
// connection name; the others lost it, and the owner kept it against each.
// A connection's claims outlast its session: while it is unavailable it
// keeps the names of its last list (not live, answered as down), unless
// it was made unavailable with another prefix.
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
	slices.SortFunc(lost, func(a, b spec.ToolCollision) int {
		return cmp.Or(cmp.Compare(a.Tool, b.Tool), cmp.Compare(a.Connection, b.Connection))
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
// "not connected" answers after every step. Odd seeds settle the gateway
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
					op = fmt.Sprintf("Set(%s, prefix %q, %d tools)", name, c.Prefix, len(tools))
					g.Set(c)
					m.set(name, c, tools)
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
		case live && r.target.backend != m.conns[want[0]].c.Backend:
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
