// Package diff is tether diff: what a change to the manifests will do to a
// running tether before it lands (docs/contract.md §6a). It compares two
// desired states, the one tether has now (Base) and the one the changed
// files would produce, with tether run's own rules, each from its one
// home: the tree rules (controller/manifest: the listing, .tetherignore,
// decoding, Resolve), what needs a new session (spec.SessionKey and
// spec.Changes) and what the gateway exposes (controller/exposure: names,
// name limits, first come keeps a name).
//
// It reads files and, when asked, lists a running gateway; it never writes
// nor changes what tether runs.
package diff

import (
	"cmp"
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/exposure"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/spec"
)

// APIVersion and Kind identify a Diff document (-o json|yaml).
const (
	APIVersion = spec.APIVersion
	Kind       = "Diff"
)

// Change is what happens to one connection.
type Change string

// The changes, as tether run acts on them (docs/contract.md §2).
const (
	Added     Change = "added"
	Removed   Change = "removed"
	Reconnect Change = "reconnect"
	InPlace   Change = "in place"
	Unchanged Change = "unchanged"
)

// Catalog is what a connection's server offers, by the server's own names:
// tools, prompts, resource URIs and templates. Complete says nothing is
// missing; tether may know only part of it (the names its gateway exposes
// and those lost to collisions, not those its filter hides).
type Catalog struct {
	Tools, Prompts, Resources, Templates []string
	Complete                             bool
}

// Base is the desired state tether has now, and what it knows of each
// connection's server.
type Base struct {
	// Against says what it is, for people: "the running tether (state
	// directory …)", "git revision origin/main", "directory …".
	Against string
	// Entries are the connections, each with its last valid spec (Conn
	// nil: it never had one).
	Entries map[string]desired.Entry
	// Catalogs by connection name; a connection without one is unknown.
	Catalogs map[string]*Catalog
	// Owners says, for an exposed name several connections claim, which
	// one has it now (from their status: collisions). Keys are exposed
	// names, "prompt:NAME", "resource:URI", "resourceTemplate:T".
	Owners map[string]string

	status map[string]status // by connection name, from the status files
}

// Names are exposed names a change adds or removes.
type Names struct {
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

func (n *Names) empty() bool { return n == nil || len(n.Added)+len(n.Removed) == 0 }

// Connection is one connection's line of the diff.
type Connection struct {
	Name   string `json:"name"`
	Change Change `json:"change"`
	// Manifest is the file that declares it (for a removed one, that
	// declared it).
	Manifest string `json:"manifest,omitempty"`
	// ReconnectFields force a new session; InPlaceFields apply to the
	// running one. Field paths, never values.
	ReconnectFields []string `json:"reconnectFields,omitempty"`
	InPlaceFields   []string `json:"inPlaceFields,omitempty"`
	// ManifestError: the new document is invalid, so tether keeps the
	// connection on its last valid spec (or, never valid, phase Invalid).
	ManifestError string `json:"manifestError,omitempty"`
	// Invalid: it has no valid spec at all, so nothing runs (phase Invalid).
	Invalid bool `json:"invalid,omitempty"`
	// Catalog is known, partial or unknown: how much of its server's
	// catalog tether knows, so how far Tools…Templates can be trusted.
	Catalog           string `json:"catalog"`
	Tools             *Names `json:"tools,omitempty"`
	Prompts           *Names `json:"prompts,omitempty"`
	Resources         *Names `json:"resources,omitempty"`
	ResourceTemplates *Names `json:"resourceTemplates,omitempty"`
}

// Collision is an exposed name two connections claim: Owner keeps it,
// Loser does not get it (docs/contract.md §5).
type Collision struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	Loser string `json:"loser"`
}

// Summary counts the connections by change.
type Summary struct {
	Added     int `json:"added"`
	Removed   int `json:"removed"`
	Reconnect int `json:"reconnect"`
	InPlace   int `json:"inPlace"`
	Unchanged int `json:"unchanged"`
	Invalid   int `json:"invalid"`
}

// Result is a diff: the Diff document of -o json|yaml.
type Result struct {
	APIVersion  string       `json:"apiVersion"`
	Kind        string       `json:"kind"`
	Against     string       `json:"against"`
	Connections []Connection `json:"connections"`
	// CollisionsMade are collisions the change creates; CollisionsResolved
	// those it ends.
	CollisionsMade     []Collision `json:"collisionsMade,omitempty"`
	CollisionsResolved []Collision `json:"collisionsResolved,omitempty"`
	// Invalid are the problems of the new files, as tether validate
	// reports them (file:line: document N (line L): field: message).
	Invalid []string `json:"invalid,omitempty"`
	Summary Summary  `json:"summary"`
}

// Changed reports whether applying the change would change anything.
func (r *Result) Changed() bool {
	s := r.Summary
	return s.Added+s.Removed+s.Reconnect+s.InPlace > 0
}

// Options are the gateway's settings that exposure depends on.
type Options struct {
	// MaxNameLength is tether run's --max-name-length (0: the default).
	MaxNameLength int
	// MaxCatchAllTemplates and MaxTemplatesPerPrefix are tether run's
	// --max-catch-all-templates and --max-templates-per-prefix (0: the
	// defaults).
	MaxCatchAllTemplates, MaxTemplatesPerPrefix int
}

// withDefaults fills in the gateway's defaults.
func (o Options) withDefaults() Options {
	if o.MaxNameLength <= 0 {
		o.MaxNameLength = exposure.DefaultMaxNameLength
	}
	if o.MaxCatchAllTemplates <= 0 {
		o.MaxCatchAllTemplates = exposure.DefaultMaxCatchAllTemplates
	}
	if o.MaxTemplatesPerPrefix <= 0 {
		o.MaxTemplatesPerPrefix = exposure.DefaultMaxTemplatesPerPrefix
	}
	return o
}

// Compute predicts what tether, holding base, does with files: the next
// desired state is manifest.Resolve(base, files), exactly as tether run's
// next listing would make it (an invalid document keeps its last valid
// spec, a name stays with the file that had it).
func Compute(base Base, files []manifest.File, opts Options) *Result {
	opts = opts.withDefaults()
	next, problems, _ := manifest.Resolve(base.Entries, files)
	r := &Result{APIVersion: APIVersion, Kind: Kind, Against: base.Against, Connections: []Connection{}}
	for _, file := range slices.Sorted(maps.Keys(problems)) {
		r.Invalid = append(r.Invalid, problems[file]...)
	}
	r.Summary.Invalid = len(r.Invalid)

	names := slices.Sorted(maps.Keys(base.Entries))
	for n := range next {
		if _, ok := base.Entries[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)

	before := exposed(base.Entries, base.Catalogs, base.Owners, nil, opts)
	after := exposed(next, base.Catalogs, base.Owners, base.Entries, opts)
	r.CollisionsMade = collisionsMinus(after.collisions, before.collisions)
	r.CollisionsResolved = collisionsMinus(before.collisions, after.collisions)

	for _, name := range names {
		old, hadOld := base.Entries[name]
		cur, hasCur := next[name]
		c := Connection{Name: name, Catalog: "unknown"}
		switch {
		case !hasCur:
			c.Change, c.Manifest = Removed, old.Origin
		case !hadOld || old.Conn == nil:
			// New, or never valid before (phase Invalid, nothing ran): it
			// starts now, unless it is still invalid.
			c.Change, c.Manifest = Added, cur.Origin
			if hadOld && cur.Conn == nil {
				c.Change = Unchanged
			}
		default:
			c.Manifest = cur.Origin
			c.Change = Unchanged
			connect, inPlace := spec.Changes(&old.Conn.Spec, &cur.Conn.Spec)
			if spec.SessionKey(&old.Conn.Spec, absDir(old.Dir)) != spec.SessionKey(&cur.Conn.Spec, absDir(cur.Dir)) {
				c.Change = Reconnect
				if len(connect) == 0 {
					// The connect-relevant spec is the same: the manifest
					// moved, and its relative paths resolve anew.
					connect = []string{"manifest directory"}
				}
				c.ReconnectFields = connect
				c.InPlaceFields = inPlace
			} else if len(inPlace) > 0 {
				c.Change = InPlace
				c.InPlaceFields = inPlace
			}
		}
		if hasCur {
			c.ManifestError = cur.ManifestError
			c.Invalid = cur.Conn == nil
		}
		if cat := base.Catalogs[name]; cat != nil {
			c.Catalog = "partial"
			if cat.Complete {
				c.Catalog = "known"
			}
		}
		c.Tools = minus(after.byConn[name][kindTool], before.byConn[name][kindTool])
		c.Prompts = minus(after.byConn[name][kindPrompt], before.byConn[name][kindPrompt])
		c.Resources = minus(after.byConn[name][kindResource], before.byConn[name][kindResource])
		c.ResourceTemplates = minus(after.byConn[name][kindTemplate], before.byConn[name][kindTemplate])
		switch c.Change {
		case Added:
			r.Summary.Added++
		case Removed:
			r.Summary.Removed++
		case Reconnect:
			r.Summary.Reconnect++
		case InPlace:
			r.Summary.InPlace++
		default:
			r.Summary.Unchanged++
		}
		r.Connections = append(r.Connections, c)
	}
	return r
}

// absDir makes a manifest's directory comparable across processes started
// in the same working directory.
func absDir(dir string) string {
	if a, err := filepath.Abs(dir); err == nil {
		return a
	}
	return dir
}

type kind int

const (
	kindTool kind = iota
	kindPrompt
	kindResource
	kindTemplate
	kinds
)

// key is how collisions and Base.Owners name an exposed name of a kind.
func (k kind) key(name string) string {
	return [...]string{"", "prompt:", "resource:", "resourceTemplate:"}[k] + name
}

// served is what the gateway serves of a desired state.
type served struct {
	byConn     map[string][kinds][]string // what each connection exposes, sorted
	collisions []Collision
}

type claimant struct {
	conn string
	seq  uint64
}

// exposed applies the gateway's rules to entries: each connection claims
// the names its catalog gives under its prefix and filter; first come
// keeps a name (exposure.ClaimBefore). A connection that claimed a name in
// prev keeps its place: the one that has it now first (owners), then the
// others that claimed it; claims new in entries come after them, in
// connection name order. A suspended connection keeps its claims and
// serves none. With prev nil, entries are the state now.
func exposed(entries map[string]desired.Entry, catalogs map[string]*Catalog, owners map[string]string, prev map[string]desired.Entry, opts Options) served {
	claims := map[string][]claimant{} // key → claimants
	names := map[string]map[string]kind{}
	for conn, e := range entries {
		cat := catalogs[conn]
		if e.Conn == nil || cat == nil {
			continue
		}
		for _, n := range claimedNames(e.Conn, cat, opts) {
			key := n.kind.key(n.name)
			claims[key] = append(claims[key], claimant{conn: conn})
			if names[conn] == nil {
				names[conn] = map[string]kind{}
			}
			names[conn][key] = n.kind
		}
	}
	var before map[string][]string
	if prev != nil {
		before = claimsByKey(prev, catalogs, opts)
	}
	out := served{byConn: map[string][kinds][]string{}}
	resources := map[string][]claimant{} // resource key → its claimants, first first
	var templates []templateClaim
	for key, cl := range claims {
		claimedBefore := map[string]bool{}
		for _, c := range before[key] {
			claimedBefore[c] = true
		}
		for i := range cl {
			switch {
			case owners[key] == cl[i].conn && (prev == nil || claimedBefore[cl[i].conn]):
				cl[i].seq = 0
			case prev == nil || claimedBefore[cl[i].conn]:
				cl[i].seq = 1
			default:
				cl[i].seq = 2
			}
		}
		slices.SortFunc(cl, func(a, b claimant) int { return exposure.ClaimBefore(a.seq, a.conn, b.seq, b.conn) })
		owner := cl[0].conn
		k := names[owner][key]
		switch k {
		case kindResource:
			resources[key] = cl // decided below, against the templates
			continue
		case kindTemplate:
			templates = append(templates, templateClaim{claimant: cl[0], tmpl: strings.TrimPrefix(key, k.key(""))})
		}
		for _, c := range cl[1:] {
			out.collisions = append(out.collisions, Collision{Name: key, Owner: owner, Loser: c.conn})
		}
		if entries[owner].Conn.Spec.Suspend {
			continue
		}
		list := out.byConn[owner]
		list[k] = append(list[k], strings.TrimPrefix(key, k.key("")))
		out.byConn[owner] = list
	}
	out.uriRules(entries, resources, templates)
	for conn, list := range out.byConn {
		for k := range list {
			slices.Sort(list[k])
		}
		out.byConn[conn] = list
	}
	slices.SortFunc(out.collisions, compareCollisions)
	out.collisions = slices.Compact(out.collisions)
	return out
}

// templateClaim is the owner's claim on a template.
type templateClaim struct {
	claimant
	tmpl string
}

func (t templateClaim) rank() exposure.URIClaim {
	return exposure.URIClaim{Conn: t.conn, Seq: t.seq, Template: t.tmpl, Spec: exposure.TemplateSpecificity(t.tmpl)}
}

// uriRules applies the gateway's rules on URIs (docs/contract.md §5): a
// URI goes to the claim on it that ranks first (exposure.ClaimRank),
// whether the exact listing or another connection's template that matches
// it, so an earlier template keeps a URI a later connection lists; every
// other connection that claims it (but by a catch-all template) loses it.
// A later template whose literal prefix extends an earlier one's of another
// connection is reported as losing to it; both stay exposed.
func (out *served) uriRules(entries map[string]desired.Entry, resources map[string][]claimant, templates []templateClaim) {
	slices.SortFunc(templates, func(a, b templateClaim) int { return exposure.ClaimRank(a.rank(), b.rank()) })
	res := make([]*regexp.Regexp, len(templates))
	for i, t := range templates {
		res[i] = exposure.TemplateRegexp(t.tmpl)
	}
	for key, cl := range resources {
		uri := strings.TrimPrefix(key, kindResource.key(""))
		claims := make([]exposure.URIClaim, 0, len(cl))
		for _, c := range cl {
			claims = append(claims, exposure.URIClaim{Conn: c.conn, Seq: c.seq, Exact: true})
		}
		for i, t := range templates {
			if res[i] != nil && strings.HasPrefix(uri, exposure.LiteralPrefix(t.tmpl)) && res[i].MatchString(uri) {
				claims = append(claims, t.rank())
			}
		}
		slices.SortFunc(claims, exposure.ClaimRank)
		win := claims[0]
		for _, c := range claims[1:] {
			if c.Conn != win.Conn && !c.Spec.CatchAll {
				out.collisions = append(out.collisions, Collision{Name: key, Owner: win.Conn, Loser: c.Conn})
			}
		}
		// The exact listing is served if its connection wins the URI.
		if owner := cl[0].conn; win.Conn == owner && !entries[owner].Conn.Spec.Suspend {
			list := out.byConn[owner]
			list[kindResource] = append(list[kindResource], uri)
			out.byConn[owner] = list
		}
	}
	// As the gateway pairs them: catch-alls with catch-alls, the others by
	// literal prefix; a template it cannot parse matches nothing.
	for i, first := range templates {
		for j, later := range templates[i+1:] {
			if res[i] == nil || res[i+1+j] == nil || first.conn == later.conn ||
				exposure.TemplateSpecificity(first.tmpl).CatchAll != exposure.TemplateSpecificity(later.tmpl).CatchAll {
				continue
			}
			if strings.HasPrefix(exposure.LiteralPrefix(later.tmpl), exposure.LiteralPrefix(first.tmpl)) {
				out.collisions = append(out.collisions, Collision{Name: kindTemplate.key(later.tmpl), Owner: first.conn, Loser: later.conn})
			}
		}
	}
}

// claimsByKey lists, for each name, the connections of entries that claim it.
func claimsByKey(entries map[string]desired.Entry, catalogs map[string]*Catalog, opts Options) map[string][]string {
	out := map[string][]string{}
	for conn, e := range entries {
		cat := catalogs[conn]
		if e.Conn == nil || cat == nil {
			continue
		}
		for _, n := range claimedNames(e.Conn, cat, opts) {
			key := n.kind.key(n.name)
			out[key] = append(out[key], conn)
		}
	}
	return out
}

type exposedName struct {
	kind kind
	name string
}

// claimedNames are the names a connection claims on the gateway: its tools
// that pass its filter and its prompts, under its prefix, without the
// names that must not reach agents; its resource URIs and templates as
// they are, but templates beyond the gateway's caps (exposure.TemplateCaps).
func claimedNames(c *spec.McpConnection, cat *Catalog, opts Options) []exposedName {
	var out []exposedName
	prefix := c.ToolPrefix()
	for _, t := range cat.Tools {
		if !c.Spec.Tools.Allows(t) {
			continue
		}
		if n := exposure.Name(prefix, t); exposure.NameProblem(t, n, opts.MaxNameLength) == "" {
			out = append(out, exposedName{kindTool, n})
		}
	}
	for _, p := range cat.Prompts {
		if n := exposure.Name(prefix, p); exposure.NameProblem(p, n, opts.MaxNameLength) == "" {
			out = append(out, exposedName{kindPrompt, n})
		}
	}
	for _, u := range cat.Resources {
		out = append(out, exposedName{kindResource, u})
	}
	caps := exposure.TemplateCaps{MaxCatchAll: opts.MaxCatchAllTemplates, MaxPerPrefix: opts.MaxTemplatesPerPrefix}
	seen := map[string]bool{}
	for _, t := range cat.Templates { // in its server's order, each once, as the gateway counts them
		if seen[t] {
			continue
		}
		seen[t] = true
		if caps.Admit(t) == "" {
			out = append(out, exposedName{kindTemplate, t})
		}
	}
	slices.SortFunc(out, func(a, b exposedName) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	return slices.Compact(out)
}

// minus is what after has that before has not, and the reverse.
func minus(after, before []string) *Names {
	n := &Names{}
	for _, a := range after {
		if _, ok := slices.BinarySearch(before, a); !ok {
			n.Added = append(n.Added, a)
		}
	}
	for _, b := range before {
		if _, ok := slices.BinarySearch(after, b); !ok {
			n.Removed = append(n.Removed, b)
		}
	}
	if n.empty() {
		return nil
	}
	return n
}

func collisionsMinus(a, b []Collision) []Collision {
	in := make(map[Collision]bool, len(b))
	for _, c := range b {
		in[c] = true
	}
	var out []Collision
	for _, c := range a {
		if !in[c] {
			out = append(out, c)
		}
	}
	return out
}

func compareCollisions(a, b Collision) int {
	return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Owner, b.Owner), cmp.Compare(a.Loser, b.Loser))
}
