package gateway

import (
	"cmp"
	"fmt"
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
// every change: connections claim names in name order, the first claimant
// owns a name, the others lost it. The gateway itself only re-examines the
// names a change touches; TestIncrementalMatchesModel holds it to this.
type model struct {
	conns map[string]*modelConn
}

type modelConn struct {
	c         Connection
	tools     []*mcp.Tool
	available bool
	reason    string
	prefix    string
	lastNames []string
}

// owners maps each exposed name to its owner and the backend tool name.
func (m *model) owners() map[string][2]string {
	out := map[string][2]string{}
	for _, n := range m.sortedNames() {
		mc := m.conns[n]
		if !mc.available {
			continue
		}
		for _, t := range mc.tools {
			if !mc.c.Filter.Allows(t.Name) {
				continue
			}
			name := exposedName(mc.c.Prefix, t.Name)
			if _, taken := out[name]; !taken {
				out[name] = [2]string{n, t.Name}
			}
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

// collisions returns what conn lost and how many names it exposes.
func (m *model) collisions(conn string, owners map[string][2]string) ([]spec.ToolCollision, int) {
	mc := m.conns[conn]
	if mc == nil || !mc.available {
		return nil, 0
	}
	var lost []spec.ToolCollision
	n := 0
	seen := map[string]bool{}
	for _, t := range mc.tools {
		name := exposedName(mc.c.Prefix, t.Name)
		if !mc.c.Filter.Allows(t.Name) || seen[name] {
			continue
		}
		seen[name] = true
		if o := owners[name][0]; o == conn {
			n++
		} else {
			lost = append(lost, spec.ToolCollision{Tool: name, Connection: o})
		}
	}
	slices.SortFunc(lost, func(a, b spec.ToolCollision) int { return cmp.Compare(a.Tool, b.Tool) })
	return lost, n
}

// down returns which unavailable connection a call to a name that is not
// live is answered about ("" for none).
func (m *model) down(name string) string {
	var byName, byPrefix string
	bestLen := 0
	for _, n := range m.sortedNames() {
		mc := m.conns[n]
		if mc.available {
			continue
		}
		if slices.Contains(mc.lastNames, name) {
			byName = n // the last in name order wins
		}
		if p := mc.prefix + "_"; mc.prefix != "" && strings.HasPrefix(name, p) && len(p) > bestLen {
			byPrefix, bestLen = n, len(p)
		}
	}
	if byName != "" {
		return byName
	}
	return byPrefix
}

// TestIncrementalMatchesModel drives a gateway and the model through the
// same random Set/SetUnavailable/Remove sequences, with shared prefixes so
// that names collide, and compares routes, published tools, collisions and
// "not connected" answers after every step.
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
					m.conns[name] = &modelConn{c: c, tools: tools, available: true, prefix: c.Prefix}
				case r < 8:
					prefix := prefixes[rng.IntN(len(prefixes))]
					op = fmt.Sprintf("SetUnavailable(%s, %q)", name, prefix)
					owners := m.owners()
					mc := m.conns[name]
					if mc == nil {
						mc = &modelConn{}
						m.conns[name] = mc
					}
					if mc.available {
						mc.lastNames = nil
						for n, o := range owners {
							if o[0] == name {
								mc.lastNames = append(mc.lastNames, n)
							}
						}
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
		lost, exposed := m.collisions(n, owners)
		if got := g.Collisions(n); !slices.Equal(got, lost) {
			t.Errorf("%s: Collisions(%s) = %v, want %v", where, n, got, lost)
		}
		if got := g.Exposed(n); got != exposed {
			t.Errorf("%s: Exposed(%s) = %d, want %d", where, n, got, exposed)
		}
	}
}
