package gateway

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/exposure"
	"github.com/tether-mcp/tether/spec"
)

// Prompts, resources and resource templates are published with the go-sdk
// server's own registries (AddPrompt, AddResource, AddResourceTemplate):
// the go-sdk lists and paginates them, matches a URI against templates,
// tracks which session subscribed to what, and sends list_changed when they
// change. Each registered handler routes to the connection that owns the
// name, URI or template at the time of the request (catTable).
//
// Prompts are exposed as <toolPrefix>_<prompt>, like tools. Resource URIs
// and templates are not rewritten (clients build URIs from templates). A
// name, URI or template offered by several connections goes to the one
// that offered it first (claimBefore, as for tools); the others report the
// collision through Collisions as "prompt:<name>", "resource:<uri>" or
// "resourceTemplate:<template>", and the owner reports it as kept. A URI
// goes to the connection with the earliest claim on it, by listing it or
// by a template that matches it (uriClaim, exposure.ClaimRank; docs/contract.md
// §5): an exact URI or a narrower template offered later by another
// connection does not take URIs an earlier claim serves. Unlike tools, the
// catalog is small and changes rarely: a change recomputes it whole from
// the connections that offer any.

// Collision prefixes of the names reported by Collisions for what is not a
// tool.
const (
	collisionPrompt   = "prompt:"
	collisionResource = "resource:"
	collisionTemplate = "resourceTemplate:"
)

// catTable is an immutable snapshot of who owns which prompt, resource and
// template; replaced on every change.
type catTable struct {
	prompts   map[string]promptRoute // exposed name →
	uris      map[string]uriClaim    // URI → the claim of the connection that lists it first
	templates []templateRoute        // most specific first (compareTemplates)
	// downPrompts answers for the prompts of a connection that is not
	// Connected: "connection X is not connected" (URI and template claims
	// carry their own downTarget).
	downPrompts map[string]*downTarget
	// index finds the templates that may match a URI (candidates).
	index templateIndex
	// matches counts the URI-against-template matches tried, so that a
	// test can tell how the work grows with the lists (nil: not counted).
	matches *atomic.Int64
}

// templateIndex finds the templates that may match a URI without trying
// each: a template's regexp matches only URIs that start with its literal
// prefix (uritemplate quotes literals as they are), and the literal
// prefixes that start a given string are found by walking a sorted list
// (candidates). A server may list 100,000 URIs and another 100,000
// templates: trying every template on every URI held the gateway's lock
// for minutes. Catch-all templates (no scheme in the prefix) are tried on
// every URI; a connection keeps at most maxCatchAllTemplates of them.
type templateIndex struct {
	prefixes []string         // the distinct literal prefixes of scheme-fixing templates, sorted
	byPrefix map[string][]int // prefix → its templates (indexes into catTable.templates)
	catchAll []int
	byName   map[string]int // template → its index
}

// buildIndex indexes c.templates; nil regexps (refused templates) match
// nothing and are left out.
func (c *catTable) buildIndex() {
	ix := templateIndex{byPrefix: map[string][]int{}, byName: make(map[string]int, len(c.templates))}
	for i, tr := range c.templates {
		if _, ok := ix.byName[tr.template]; !ok {
			ix.byName[tr.template] = i
		}
		switch {
		case tr.re == nil:
		case tr.spec.CatchAll:
			ix.catchAll = append(ix.catchAll, i)
		default:
			p := exposure.LiteralPrefix(tr.template)
			if ix.byPrefix[p] == nil {
				ix.prefixes = append(ix.prefixes, p)
			}
			ix.byPrefix[p] = append(ix.byPrefix[p], i)
		}
	}
	slices.Sort(ix.prefixes)
	c.index = ix
}

// prefixesOf calls visit with the templates of every indexed literal
// prefix that s starts with, the longest first. Each step of the walk
// shortens what is left to look for, so it takes at most len(s)+1 binary
// searches whatever the number of templates.
func (ix *templateIndex) prefixesOf(s string, visit func(i int) bool) bool {
	q := s
	for {
		// The largest prefix ≤ q: any indexed prefix of q sorts between
		// it and q, so it starts with it too.
		j, found := slices.BinarySearch(ix.prefixes, q)
		if !found {
			j--
		}
		if j < 0 {
			return true
		}
		p := ix.prefixes[j]
		if strings.HasPrefix(q, p) {
			for _, i := range ix.byPrefix[p] {
				if !visit(i) {
					return false
				}
			}
			if p == "" {
				return true
			}
			q = p[:len(p)-1]
			continue
		}
		// p > every prefix of q left: look below their common part.
		n := 0
		for n < len(p) && n < len(q) && p[n] == q[n] {
			n++
		}
		q = q[:n]
	}
}

// candidates calls visit with every template that may match uri: the
// catch-alls and those whose literal prefix uri starts with. It stops when
// visit returns false.
func (c *catTable) candidates(uri string, visit func(tr *templateRoute) bool) {
	for _, i := range c.index.catchAll {
		if !visit(&c.templates[i]) {
			return
		}
	}
	c.index.prefixesOf(uri, func(i int) bool { return visit(&c.templates[i]) })
}

// match reports whether tr matches uri, counting the try.
func (c *catTable) match(tr *templateRoute, uri string) bool {
	if c.matches != nil {
		c.matches.Add(1)
	}
	return tr.re != nil && tr.re.MatchString(uri)
}

// uriClaim is one connection's claim on a URI: its exact listing of it, or
// a template of it that matches it.
type uriClaim struct {
	conn   string
	seq    uint64 // when the listing or template was first offered
	exact  bool
	tmpl   string               // the template, when not exact
	spec   exposure.Specificity // the template's; zero (fixes the scheme) when exact
	target *target              // nil while its owner is away (down)
	down   *downTarget
}

// claimRank orders the claims on one URI by exposure.ClaimRank (docs/contract.md §5).
func claimRank(a, b uriClaim) int { return exposure.ClaimRank(a.rank(), b.rank()) }

func (c uriClaim) rank() exposure.URIClaim {
	return exposure.URIClaim{Conn: c.conn, Seq: c.seq, Exact: c.exact, Template: c.tmpl, Spec: c.spec}
}

type promptRoute struct {
	target *target
	orig   string // the backend's own prompt name
}

type templateRoute struct {
	template string
	re       *regexp.Regexp // nil: a template the parser refuses (matches nothing)
	target   *target        // nil while its owner is away (down)
	down     *downTarget
	conn     string // its owner
	spec     exposure.Specificity
	seq      uint64 // when its owner first offered it
}

func (tr templateRoute) claim() uriClaim {
	return uriClaim{conn: tr.conn, seq: tr.seq, tmpl: tr.template, spec: tr.spec, target: tr.target, down: tr.down}
}

// DefaultMaxCatchAllTemplates and DefaultMaxTemplatesPerPrefix are the
// defaults of Options.MaxCatchAllTemplates and MaxTemplatesPerPrefix.
const (
	DefaultMaxCatchAllTemplates  = exposure.DefaultMaxCatchAllTemplates
	DefaultMaxTemplatesPerPrefix = exposure.DefaultMaxTemplatesPerPrefix
)

// compareTemplates orders the routing table's templates: the most specific
// first; between equally specific ones, the one offered first, then the
// connection name.
func compareTemplates(a, b templateRoute) int {
	if c := exposure.CompareSpecificity(a.spec, b.spec); c != 0 {
		return c
	}
	if c := claimBefore(a.seq, a.conn, b.seq, b.conn); c != 0 {
		return c
	}
	return cmp.Compare(a.template, b.template)
}

// templateRegexp is exposure.TemplateRegexp.
func templateRegexp(tmpl string) *regexp.Regexp { return exposure.TemplateRegexp(tmpl) }

// catchAllWarning is the status note of a template that matches URIs of
// any scheme.
const catchAllWarning = "matches URIs of any scheme: it gets only URIs no other connection lists or matches with a template that fixes the scheme"

// claimsOn returns every claim on uri: the exact listing of the
// connection that lists it first, and each template that matches it.
func (c *catTable) claimsOn(uri string) []uriClaim {
	var claims []uriClaim
	if e, ok := c.uris[uri]; ok {
		claims = append(claims, e)
	}
	c.candidates(uri, func(tr *templateRoute) bool {
		if c.match(tr, uri) {
			claims = append(claims, tr.claim())
		}
		return true
	})
	return claims
}

// resourceRoute returns the connection a URI belongs to: the one whose
// claim on it ranks first (claimRank), live, or down when that owner is
// away and keeps it.
func (c *catTable) resourceRoute(uri string) (*target, *downTarget) {
	var best uriClaim
	found := false
	for _, cl := range c.claimsOn(uri) {
		if !found || claimRank(cl, best) < 0 {
			best, found = cl, true
		}
	}
	return best.target, best.down
}

// resourceOwner is resourceRoute's live owner: nil when nobody, or an
// owner that is away, has the URI.
func (c *catTable) resourceOwner(uri string) *target {
	t, _ := c.resourceRoute(uri)
	return t
}

func (c *catTable) templateByName(tmpl string) (*target, *downTarget) {
	if i, ok := c.index.byName[tmpl]; ok {
		return c.templates[i].target, c.templates[i].down
	}
	return nil, nil
}

// published is what the go-sdk server holds of the catalog.
type published struct {
	prompts   map[string]*mcp.Prompt // exposed name → the backend's definition
	resources map[string]*mcp.Resource
	templates map[string]*mcp.ResourceTemplate
	owners    map[string]*connState // "p:", "r:", "t:" + key → owner when registered
}

// catalogChanged reports whether st's catalog differs from the backend's.
func catalogChanged(st *connState, b Offer) bool {
	return !slices.Equal(st.prompts, b.Prompts()) || !slices.Equal(st.resources, b.Resources()) ||
		!slices.Equal(st.templates, b.ResourceTemplates())
}

func (st *connState) hasCatalog() bool {
	return len(st.prompts)+len(st.resources)+len(st.templates) > 0
}

// catOffer is one connection's offer of a catalog key ("p:", "r:", "t:" +
// name, URI or template).
type catOffer struct {
	st       *connState
	seq      uint64
	prompt   *mcp.Prompt
	resource *mcp.Resource
	template *mcp.ResourceTemplate
}

// applyCatalogLocked recomputes the catalog from every available
// connection that offers any, publishes the difference to the go-sdk
// server, and reports whether any connection's catalog collisions changed.
func (g *Gateway) applyCatalogLocked() (collisionsChanged bool) {
	var conns []*connState
	for _, st := range g.conns {
		st.exposedCat.prompts, st.exposedCat.resources, st.exposedCat.templates = 0, 0, 0
		if st.hasCatalog() || st.lostOther != nil || st.catSeqs != nil || st.catWarnings != nil {
			conns = append(conns, st)
		}
	}
	// Name order: the new claims of one pass are numbered in it.
	slices.SortFunc(conns, func(a, b *connState) int { return strings.Compare(a.name, b.name) })

	next := &catTable{prompts: map[string]promptRoute{}, uris: map[string]uriClaim{}}
	offers := map[string][]catOffer{}
	var keys []string
	for _, st := range conns {
		seqs := map[string]uint64{}
		var warnings []spec.NameWarning
		offer := func(key string, o catOffer) {
			if _, twice := seqs[key]; twice {
				return // a server that lists one name twice: the first
			}
			seq, ok := st.catSeqs[key]
			if !ok {
				seq = g.nextSeqLocked()
			}
			seqs[key] = seq
			o.st, o.seq = st, seq
			if offers[key] == nil {
				keys = append(keys, key)
			}
			offers[key] = append(offers[key], o)
		}
		for _, p := range st.prompts {
			if p == nil {
				continue
			}
			name := exposedName(st.prefix, p.Name)
			if problem := nameProblem(p.Name, name, g.opts.MaxNameLength); problem != "" {
				warnings = append(warnings, nameWarning(collisionPrompt, name, problem))
				continue
			}
			offer("p:"+name, catOffer{prompt: p})
		}
		for _, r := range st.resources {
			if r != nil {
				offer("r:"+r.URI, catOffer{resource: r})
			}
		}
		caps := exposure.TemplateCaps{MaxCatchAll: g.opts.MaxCatchAllTemplates, MaxPerPrefix: g.opts.MaxTemplatesPerPrefix}
		for _, t := range st.templates {
			if t == nil {
				continue
			}
			if _, twice := seqs["t:"+t.URITemplate]; !twice {
				if problem := caps.Admit(t.URITemplate); problem != "" {
					warnings = append(warnings, nameWarning(collisionTemplate, t.URITemplate, problem))
					continue
				}
			}
			if exposure.TemplateSpecificity(t.URITemplate).CatchAll {
				warnings = append(warnings, nameWarning(collisionTemplate, t.URITemplate, catchAllWarning))
			}
			offer("t:"+t.URITemplate, catOffer{template: t})
		}
		if len(seqs) == 0 {
			seqs = nil // nothing offered: not looked at again until it offers
		}
		st.catSeqs = seqs
		if st.available {
			// Away, it offers what it offered: nothing new to warn about.
			g.warnNamesLocked(st.name, st.catWarnings, warnings)
			st.catWarnings = warnings
		}
	}

	wantPrompts := map[string]*mcp.Prompt{}
	wantResources := map[string]*mcp.Resource{}
	wantTemplates := map[string]*mcp.ResourceTemplate{}
	owners := map[string]*connState{}
	lost := map[*connState][]spec.ToolCollision{}
	for _, key := range keys {
		bids := offers[key]
		slices.SortFunc(bids, func(a, b catOffer) int { return claimBefore(a.seq, a.st.name, b.seq, b.st.name) })
		o := bids[0]
		var shown string
		if !o.st.available {
			// Its owner is away and keeps it: not listed; a request for
			// it is answered about the owner (or wakes it), and no other
			// connection's template takes its URIs meanwhile.
			dt := &downTarget{name: o.st.name, reason: o.st.reason, timeout: o.st.timeout}
			switch k := key[2:]; {
			case o.prompt != nil:
				shown = collisionPrompt + k
				if next.downPrompts == nil {
					next.downPrompts = map[string]*downTarget{}
				}
				next.downPrompts[k] = dt
			case o.resource != nil:
				shown = collisionResource + k
				next.uris[k] = uriClaim{conn: o.st.name, seq: o.seq, exact: true, down: dt}
			default:
				shown = collisionTemplate + k
				next.templates = append(next.templates, templateRoute{template: k, re: templateRegexp(k), down: dt,
					spec: exposure.TemplateSpecificity(k), seq: o.seq, conn: o.st.name})
			}
		} else {
			owners[key] = o.st
			switch k := key[2:]; {
			case o.prompt != nil:
				shown = collisionPrompt + k
				wantPrompts[k] = o.prompt
				next.prompts[k] = promptRoute{target: o.st.target, orig: o.prompt.Name}
			case o.resource != nil:
				shown = collisionResource + k
				// Published below, if no earlier claim of another
				// connection takes the URI.
				next.uris[k] = uriClaim{conn: o.st.name, seq: o.seq, exact: true, target: o.st.target}
			default:
				shown = collisionTemplate + k
				wantTemplates[k] = o.template
				next.templates = append(next.templates, templateRoute{template: k, re: templateRegexp(k), target: o.st.target,
					spec: exposure.TemplateSpecificity(k), seq: o.seq, conn: o.st.name})
			}
		}
		if o.resource != nil {
			continue // reported by URI below, against every claim on it
		}
		for _, l := range bids[1:] {
			lost[l.st] = append(lost[l.st], spec.ToolCollision{Tool: shown, Connection: o.st.name})
			lost[o.st] = append(lost[o.st], spec.ToolCollision{Tool: shown, Connection: l.st.name, Kept: true})
		}
	}
	slices.SortFunc(next.templates, compareTemplates)
	byName := map[string]*connState{}
	for _, st := range conns {
		byName[st.name] = st
	}
	reported := map[spec.ToolCollision]map[*connState]bool{}
	report := func(shown string, loser, winner string) {
		l, w := byName[loser], byName[winner]
		c := spec.ToolCollision{Tool: shown, Connection: winner}
		if reported[c][l] {
			return
		}
		if reported[c] == nil {
			reported[c] = map[*connState]bool{}
		}
		reported[c][l] = true
		lost[l] = append(lost[l], c)
		lost[w] = append(lost[w], spec.ToolCollision{Tool: shown, Connection: loser, Kept: true})
	}
	next.matches = &g.templateMatches
	next.buildIndex()
	// An exact URI: every claim on it is known, so every connection that
	// loses it is reported. The listing is published only if its
	// connection serves the URI.
	for _, key := range keys {
		bids := offers[key]
		if bids[0].resource == nil {
			continue
		}
		uri := key[2:]
		contested := len(bids) > 1
		if !contested {
			next.candidates(uri, func(tr *templateRoute) bool {
				contested = tr.conn != bids[0].st.name && next.match(tr, uri)
				return !contested
			})
		}
		win := next.uris[uri]
		if contested {
			claims := next.claimsOn(uri)
			for _, b := range bids[1:] {
				claims = append(claims, uriClaim{conn: b.st.name, seq: b.seq, exact: true})
			}
			slices.SortFunc(claims, claimRank)
			win = claims[0]
			for _, cl := range claims[1:] {
				// A catch-all's losses are in its nameWarnings already.
				if cl.conn != win.conn && !cl.spec.CatchAll {
					report(collisionResource+uri, cl.conn, win.conn)
				}
			}
		}
		if o := bids[0]; o.st.available && win.conn == o.st.name {
			wantResources[uri] = o.resource
			owners[key] = o.st
		}
	}
	// Two templates: which URIs both match is not decided here; a later
	// template whose literal prefix extends an earlier one's (of another
	// connection) is reported as losing to it. Both stay published: the
	// later may still serve URIs the earlier does not match, and each read
	// goes by resourceRoute.
	// The templates whose literal prefix starts b's are found in the index,
	// not by trying every pair; catch-alls (a few per connection) pairwise.
	overlap := func(a, b *templateRoute) {
		if a == b || a.conn == b.conn {
			return
		}
		first, later := a, b
		if claimRank(b.claim(), a.claim()) < 0 {
			first, later = b, a
		}
		if later == b && strings.HasPrefix(exposure.LiteralPrefix(later.template), exposure.LiteralPrefix(first.template)) {
			report(collisionTemplate+later.template, later.conn, first.conn)
		}
	}
	for _, bi := range next.index.catchAll {
		for _, ai := range next.index.catchAll {
			overlap(&next.templates[ai], &next.templates[bi])
		}
	}
	for _, p := range next.index.prefixes {
		for _, bi := range next.index.byPrefix[p] {
			b := &next.templates[bi]
			next.index.prefixesOf(p, func(ai int) bool {
				overlap(&next.templates[ai], b)
				return true
			})
		}
	}
	for _, st := range conns {
		l := lost[st]
		if !st.available {
			l = nil // shown only while connected, as for tools
		}
		slices.SortFunc(l, compareCollisions)
		if !slices.Equal(l, st.lostOther) {
			collisionsChanged = true
			for _, c := range l {
				if !c.Kept && !slices.Contains(st.lostOther, c) {
					g.log.Warn("gateway name collision: another connection keeps it", "connection", st.name, "name", c.Tool, "exposedBy", c.Connection)
				}
			}
		}
		st.lostOther = l
	}
	// Routes first, as for tools: what a client sees listed it can use.
	g.cat.Store(next)
	g.publishCatalogLocked(wantPrompts, wantResources, wantTemplates, owners)
	// What each connection exposes is what is published: a definition the
	// go-sdk refuses (logged) is not.
	for name := range g.pub.prompts {
		g.pub.owners["p:"+name].exposedCat.prompts++
	}
	for uri := range g.pub.resources {
		g.pub.owners["r:"+uri].exposedCat.resources++
	}
	for tmpl := range g.pub.templates {
		g.pub.owners["t:"+tmpl].exposedCat.templates++
	}
	return collisionsChanged
}

// publishCatalogLocked brings the go-sdk server's registries in line.
func (g *Gateway) publishCatalogLocked(prompts map[string]*mcp.Prompt, resources map[string]*mcp.Resource,
	templates map[string]*mcp.ResourceTemplate, owners map[string]*connState) {
	pub := &g.pub
	if pub.owners == nil {
		pub.prompts, pub.resources, pub.templates = map[string]*mcp.Prompt{}, map[string]*mcp.Resource{}, map[string]*mcp.ResourceTemplate{}
		pub.owners = map[string]*connState{}
	}
	var rmPrompts, rmResources, rmTemplates []string
	for name := range pub.prompts {
		if _, ok := prompts[name]; !ok {
			rmPrompts = append(rmPrompts, name)
			delete(pub.prompts, name)
		}
	}
	for uri := range pub.resources {
		if _, ok := resources[uri]; !ok {
			rmResources = append(rmResources, uri)
			delete(pub.resources, uri)
		}
	}
	for tmpl := range pub.templates {
		if _, ok := templates[tmpl]; !ok {
			rmTemplates = append(rmTemplates, tmpl)
			delete(pub.templates, tmpl)
		}
	}
	if len(rmPrompts) > 0 {
		g.server.RemovePrompts(rmPrompts...)
	}
	if len(rmResources) > 0 {
		g.server.RemoveResources(rmResources...)
	}
	if len(rmTemplates) > 0 {
		g.server.RemoveResourceTemplates(rmTemplates...)
	}
	for name, p := range prompts {
		if pub.prompts[name] == p && pub.owners["p:"+name] == owners["p:"+name] {
			continue
		}
		cp := *p
		cp.Name = name
		cp.Meta = nil
		cp.Title, cp.Description = cleanText(p.Title), cleanText(p.Description)
		cp.Arguments = cleanArguments(p.Arguments)
		g.server.AddPrompt(&cp, g.getPrompt)
		pub.prompts[name] = p
		pub.owners["p:"+name] = owners["p:"+name]
	}
	for uri, r := range resources {
		if pub.resources[uri] == r && pub.owners["r:"+uri] == owners["r:"+uri] {
			continue
		}
		cp := *r
		cp.Meta = nil
		cp.Name, cp.Title, cp.Description = cleanText(r.Name), cleanText(r.Title), cleanText(r.Description)
		if err := tryAdd(func() { g.server.AddResource(&cp, g.readResource) }); err != nil {
			g.log.Warn("gateway cannot publish a resource", "connection", owners["r:"+uri].name, "uri", uri, "error", err)
			continue
		}
		pub.resources[uri] = r
		pub.owners["r:"+uri] = owners["r:"+uri]
	}
	for tmpl, t := range templates {
		if pub.templates[tmpl] == t && pub.owners["t:"+tmpl] == owners["t:"+tmpl] {
			continue
		}
		cp := *t
		cp.Meta = nil
		cp.Name, cp.Title, cp.Description = cleanText(t.Name), cleanText(t.Title), cleanText(t.Description)
		if err := tryAdd(func() { g.server.AddResourceTemplate(&cp, g.readResource) }); err != nil {
			g.log.Warn("gateway cannot publish a resource template", "connection", owners["t:"+tmpl].name, "template", tmpl, "error", err)
			continue
		}
		pub.templates[tmpl] = t
		pub.owners["t:"+tmpl] = owners["t:"+tmpl]
	}
}

// cleanArguments returns a prompt's arguments with their titles and
// descriptions cleaned (cleanText); the same slice when none needs it.
func cleanArguments(args []*mcp.PromptArgument) []*mcp.PromptArgument {
	if !slices.ContainsFunc(args, func(a *mcp.PromptArgument) bool {
		return a != nil && (needsCleaning(a.Title) || needsCleaning(a.Description))
	}) {
		return args
	}
	out := make([]*mcp.PromptArgument, len(args))
	for i, a := range args {
		if a != nil {
			c := *a
			c.Title, c.Description = cleanText(a.Title), cleanText(a.Description)
			a = &c
		}
		out[i] = a
	}
	return out
}

func tryAdd(add func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	add()
	return nil
}

// requestError is the error a client gets for a request routed to t that
// produced no result (as callFailed for tools/call).
func (g *Gateway) requestError(ctx context.Context, t *target, what string, err, callErr error) error {
	switch {
	case ctx.Err() != nil:
		return callError(fmt.Sprintf("%s: canceled by the client", what))
	case t.life.Err() != nil:
		return callError(context.Cause(t.life).Error())
	case errors.Is(callErr, context.DeadlineExceeded):
		return callError(fmt.Sprintf("%s timed out after %s (callTimeout of connection %s)", what, t.timeout, t.name))
	}
	if je := t.backend.ServerError(err); je != nil {
		return je
	}
	return callError(fmt.Sprintf("%s: connection %s: %v", what, t.name, err))
}

// getPrompt is the handler of every published prompt.
func (g *Gateway) getPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	name := req.Params.Name
	r, ok := g.cat.Load().prompts[name]
	if !ok {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", name)}
	}
	ctx = g.withCaller(ctx, req.Session, req.Extra)
	callCtx, done := r.target.callContext(ctx)
	r.target.awaitLevel(callCtx)
	res, err := r.target.backend.GetPrompt(callCtx, &mcp.GetPromptParams{Name: r.orig, Arguments: req.Params.Arguments})
	callErr := callCtx.Err()
	done()
	if err != nil || res == nil || !inTime(callErr) {
		if err == nil {
			err = errors.New("no result")
		}
		return nil, g.requestError(ctx, r.target, fmt.Sprintf("prompt %q", name), err, callErr)
	}
	dropHopMeta(res.Meta)
	return res, nil
}

// readResource is the handler of every published resource and template.
func (g *Gateway) readResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	t := g.cat.Load().resourceOwner(uri)
	if t == nil {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	ctx = g.withCaller(ctx, req.Session, req.Extra)
	callCtx, done := t.callContext(ctx)
	t.awaitLevel(callCtx)
	res, err := t.backend.ReadResource(callCtx, &mcp.ReadResourceParams{URI: uri})
	callErr := callCtx.Err()
	done()
	if err != nil || res == nil || !inTime(callErr) {
		if err == nil {
			err = errors.New("no result")
		}
		return nil, g.requestError(ctx, t, fmt.Sprintf("resource %q", uri), err, callErr)
	}
	dropHopMeta(res.Meta)
	return res, nil
}

// complete is the server's CompletionHandler: it routes by the owner of
// the prompt or template the completion is for.
func (g *Gateway) complete(ctx context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	ref := req.Params.Ref
	if ref == nil {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "completion/complete: missing ref"}
	}
	c := g.cat.Load()
	p := &mcp.CompleteParams{Argument: req.Params.Argument, Context: req.Params.Context}
	cp := *ref
	p.Ref = &cp
	var t *target
	switch ref.Type {
	case "ref/prompt":
		r, ok := c.prompts[ref.Name]
		if !ok {
			if d := c.downPrompts[ref.Name]; d != nil {
				return nil, d.err()
			}
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown prompt %q", ref.Name)}
		}
		t, cp.Name = r.target, r.orig
	case "ref/resource":
		var d *downTarget
		if t, d = c.templateByName(ref.URI); t == nil && d == nil {
			t, d = c.resourceRoute(ref.URI)
		}
		if t == nil {
			if d != nil {
				return nil, d.err()
			}
			return nil, mcp.ResourceNotFoundError(ref.URI)
		}
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown reference type %q", ref.Type)}
	}
	callCtx, done := t.callContext(ctx)
	res, err := t.backend.Complete(callCtx, p)
	callErr := callCtx.Err()
	done()
	if err != nil || res == nil || !inTime(callErr) {
		if err == nil {
			err = errors.New("no result")
		}
		return nil, g.requestError(ctx, t, "completion/complete", err, callErr)
	}
	dropHopMeta(res.Meta)
	return res, nil
}
