package diff

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/state"
	"github.com/tether-mcp/tether/controller/statusfile"
	"github.com/tether-mcp/tether/spec"
)

// ErrNoState is wrapped by FromState's error when there is no state
// directory: no tether ran on the directory.
var ErrNoState = errors.New("no state directory")

// FromState is what the tether running on root (or the last one that ran)
// has: the last valid spec of each connection from its state directory,
// the catalogs it keeps there (OnDemand servers'), and, from the status
// files under root (or statusDir), who holds each contested name. It
// creates and writes nothing. A saved spec or catalog that cannot be used
// is skipped and reported in problems.
func FromState(stateDir, root, statusDir string, maxStateFile int64) (b Base, problems []error, err error) {
	d, err := state.OpenReadOnly(stateDir, maxStateFile)
	if errors.Is(err, fs.ErrNotExist) {
		return Base{}, nil, fmt.Errorf("%s: %w", stateDir, ErrNoState)
	}
	if err != nil {
		return Base{}, nil, err
	}
	defer d.Close()
	entries, problems := d.LoadSpecs()
	rebase(entries, root)
	b = Base{Against: "the running tether (state directory " + stateDir + ")", Entries: entries, Catalogs: map[string]*Catalog{}}
	for name := range entries {
		c, err := d.LoadCatalog(name)
		if err != nil {
			problems = append(problems, err)
			continue
		}
		if c != nil {
			b.Catalogs[name] = fromSaved(c)
		}
	}
	b.readStatus(root, statusDir)
	return b, problems, nil
}

// FromFiles is the desired state files would give a tether that starts on
// them, with who holds each contested name as the status files under root
// (or statusDir) say, when there are any.
func FromFiles(against string, files []manifest.File, root, statusDir string) Base {
	entries, _, _ := manifest.Resolve(nil, files)
	b := Base{Against: against, Entries: entries, Catalogs: map[string]*Catalog{}}
	if root != "" {
		b.readStatus(root, statusDir)
	}
	return b
}

// rebase names the saved entries' manifests and directories as files of
// root. tether run saves them as it was given them: relative to its own
// working directory when its --dir was relative (the supervisor resolves a
// relative command there), so diff, run from another directory or with
// --dir spelt otherwise, would see every connection's manifest directory
// change. run's root is the longest leading part R of the saved paths that
// starts every one of them and that root can be (its components after any
// leading .. end root's absolute path); a path under R is rebased onto
// root. Absolute saved paths need nothing.
func rebase(entries map[string]desired.Entry, root string) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return
	}
	var dirs []string
	for _, e := range entries {
		if e.Origin != "" && !filepath.IsAbs(e.Origin) {
			dirs = append(dirs, filepath.Dir(filepath.Clean(e.Origin)))
		}
	}
	if len(dirs) == 0 {
		return
	}
	from := savedRoot(dirs, abs)
	if from == filepath.Clean(root) {
		return
	}
	for name, e := range entries {
		if rel, ok := under(e.Origin, from); ok {
			e.Origin = filepath.Join(root, rel)
		}
		if rel, ok := under(e.Dir, from); ok {
			e.Dir = filepath.Join(root, rel)
		}
		entries[name] = e
	}
}

// savedRoot is run's root among the leading parts of dirs[0] (see rebase);
// "." when no longer one fits.
func savedRoot(dirs []string, abs string) string {
	parts := strings.Split(dirs[0], string(filepath.Separator))
	absParts := strings.Split(abs, string(filepath.Separator))
	for k := len(parts); k > 0; k-- {
		cand := filepath.Join(parts[:k]...)
		tail := parts[:k]
		for len(tail) > 0 && tail[0] == ".." {
			tail = tail[1:]
		}
		if slices.Contains(tail, "..") || cand == "." || len(tail) > len(absParts) || !slices.Equal(tail, absParts[len(absParts)-len(tail):]) {
			continue
		}
		all := true
		for _, d := range dirs[1:] {
			if _, ok := under(d, cand); !ok {
				all = false
				break
			}
		}
		if all {
			return cand
		}
	}
	return "."
}

// under is p relative to dir, when p is a relative path under dir.
func under(p, dir string) (string, bool) {
	if p == "" || filepath.IsAbs(p) {
		return "", false
	}
	rel, err := filepath.Rel(dir, filepath.Clean(p))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}

func fromSaved(c *catalog.Catalog) *Catalog {
	out := &Catalog{Complete: true}
	for _, t := range c.Tools {
		out.Tools = append(out.Tools, t.Name)
	}
	for _, p := range c.Prompts {
		out.Prompts = append(out.Prompts, p.Name)
	}
	for _, r := range c.Resources {
		out.Resources = append(out.Resources, r.URI)
	}
	for _, t := range c.ResourceTemplates {
		out.Templates = append(out.Templates, t.URITemplate)
	}
	return out
}

// status is what Base keeps of a connection's status document.
type status struct {
	tools, prompts, resources, templates *spec.Counts
	collisions                           []spec.ToolCollision
}

// readStatus reads the status of every entry, and from their collisions
// who holds each contested name now.
func (b *Base) readStatus(root, statusDir string) {
	byFile := map[string]map[string]spec.StatusDocument{}
	b.status = map[string]status{}
	b.Owners = map[string]string{}
	for name, e := range b.Entries {
		p := statusfile.Path(root, statusDir, e.Origin)
		docs, ok := byFile[p]
		if !ok {
			docs, _ = statusfile.Read(p) // none or unreadable: nothing known
			byFile[p] = docs
		}
		doc, ok := docs[name]
		if !ok {
			continue
		}
		st := doc.Status
		b.status[name] = status{tools: st.Tools, prompts: st.Prompts, resources: st.Resources, templates: st.ResourceTemplates, collisions: st.Collisions}
		for _, c := range st.Collisions {
			if c.Kept {
				b.Owners[c.Tool] = name
			} else {
				b.Owners[c.Tool] = c.Connection
			}
		}
	}
}

// Listing is what a running gateway lists: exposed tool and prompt names,
// resource URIs and templates.
type Listing struct {
	Tools, Prompts, Resources, Templates []string
}

// AddListing learns the catalogs of the connections tether keeps none of
// (those that are not OnDemand) from what its gateway lists now: a tool or
// prompt is its owner's, found by prefix and filter (the longest prefix
// wins where two could make the name, unless the status says who holds
// it), plus the names each lost to others (its status' collisions). A
// catalog is complete when that accounts for every tool and prompt its
// status counts and its server lists no resources; resources cannot be
// told apart by connection from a listing, so a server that lists some
// has a partial catalog. opts are the gateway's (its --max-name-length
// decides which names of a known catalog it exposes).
func (b *Base) AddListing(l Listing, opts Options) {
	opts = opts.withDefaults()
	learnt := map[string]*Catalog{}
	get := func(conn string) *Catalog {
		c := learnt[conn]
		if c == nil {
			c = &Catalog{}
			learnt[conn] = c
		}
		return c
	}
	names := slices.Sorted(maps.Keys(b.Entries))
	// owner finds whose an exposed name is: the holder the status names,
	// else the connection whose prefix and filter make it, the longest
	// prefix first, then by name (a name only one of two such connections
	// offers cannot be told apart by its listing).
	owner := func(key, exposed string, tool bool) (string, string) {
		best, raw := "", ""
		for _, name := range names {
			e := b.Entries[name]
			if e.Conn == nil || b.Catalogs[name] != nil {
				continue
			}
			p := e.Conn.ToolPrefix()
			r, ok := exposed, true
			if p != "" {
				r, ok = strings.CutPrefix(exposed, p+"_")
			}
			if !ok || (tool && !e.Conn.Spec.Tools.Allows(r)) {
				continue
			}
			if o := b.Owners[key]; o == name {
				return name, r
			}
			if best == "" || len(p) > len(b.Entries[best].Conn.ToolPrefix()) {
				best, raw = name, r
			}
		}
		return best, raw
	}
	// Names of connections whose catalog is known already (OnDemand ones)
	// are theirs.
	known := map[string]bool{}
	for name, c := range b.Catalogs {
		if e := b.Entries[name]; e.Conn != nil {
			for _, n := range claimedNames(e.Conn, c, opts) {
				known[n.kind.key(n.name)] = true
			}
		}
	}
	for _, t := range l.Tools {
		if known[kindTool.key(t)] {
			continue
		}
		if conn, raw := owner(kindTool.key(t), t, true); conn != "" {
			get(conn).Tools = append(get(conn).Tools, raw)
		}
	}
	for _, p := range l.Prompts {
		if known[kindPrompt.key(p)] {
			continue
		}
		if conn, raw := owner(kindPrompt.key(p), p, false); conn != "" {
			get(conn).Prompts = append(get(conn).Prompts, raw)
		}
	}
	for name, e := range b.Entries {
		if e.Conn == nil || b.Catalogs[name] != nil {
			continue
		}
		st, ok := b.status[name]
		if !ok {
			continue
		}
		c := get(name)
		p := e.Conn.ToolPrefix()
		strip := func(n string) string {
			if p == "" {
				return n
			}
			return strings.TrimPrefix(n, p+"_")
		}
		for _, col := range st.collisions {
			if col.Kept {
				continue
			}
			if n, ok := strings.CutPrefix(col.Tool, "prompt:"); ok {
				c.Prompts = append(c.Prompts, strip(n))
			} else if !strings.Contains(col.Tool, ":") {
				c.Tools = append(c.Tools, strip(col.Tool))
			}
		}
		slices.Sort(c.Tools)
		c.Tools = slices.Compact(c.Tools)
		slices.Sort(c.Prompts)
		c.Prompts = slices.Compact(c.Prompts)
		c.Complete = st.tools != nil && st.tools.Count == len(c.Tools) &&
			(st.prompts == nil && len(c.Prompts) == 0 || st.prompts != nil && st.prompts.Count == len(c.Prompts)) &&
			st.resources == nil && st.templates == nil
		b.Catalogs[name] = c
	}
}
