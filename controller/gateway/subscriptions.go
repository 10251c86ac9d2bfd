package gateway

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Resource subscriptions of the gateway's clients (docs/contract.md §5, and
// §5a "Limits on what clients send").
//
// A client subscribes to a URI with resources/subscribe, or, on the
// 2026-07-28 protocol, by naming it in a subscriptions/listen request: the
// go-sdk server hands each URI of that request to the same handler
// (subscribe), with the listen request's session, and unsubscribes them
// when the request ends. The gateway subscribes the URI's owner once,
// however many clients hold it, and unsubscribes it when the last one lets
// go: by unsubscribing, by its session ending (pruneSubscriptions), or by
// the owner's manifest being removed (dropSubscriptions).
//
// What clients can make the gateway hold is bounded twice: the URIs one
// session holds at once, and the distinct URIs subscribed upstream. The
// second is the real cost: each is state in a backend, and on a 2026-07-28
// backend session a subscriptions/listen stream of its own, with its
// goroutine and socket in tether (connection.Session.Subscribe).
//
// The backend calls for one URI never overlap: the first subscribe's and
// the last unsubscribe's (and a reconnected backend's renewal) run outside
// the lock with the URI's entry marked busy, and whoever comes for that URI
// meanwhile waits for the call. Otherwise two clients subscribing to a new
// URI at once both subscribed the backend, and a subscribe racing the last
// unsubscribe could reach the backend first, leaving the gateway holding a
// subscription the backend had dropped.

// DefaultMaxSubscriptionsPerSession and DefaultMaxSubscriptions are the
// defaults of Options.MaxSubscriptionsPerSession and MaxSubscriptions.
//
// An agent watches a handful of resources (the files it edits, a build's
// log); 256 at once in one session is a client enumerating, not watching.
// 1024 distinct URIs upstream is 1024 subscriptions/listen streams toward
// 2026-07-28 backends, each a socket and a few goroutines of tether
// (docs/contract.md §5a gives a measure), as many as --max-connections'
// default admits clients.
const (
	DefaultMaxSubscriptionsPerSession = 256
	DefaultMaxSubscriptions           = 1024
)

// MaxSubscriptionURIBytes bounds the URI a subscribe may name. Each URI a
// client subscribes to is held by the gateway, by the go-sdk server and by
// the backend, for as long as anyone holds it: without a bound 1024 URIs of
// a request body's size (4 MiB) held gigabytes, and sent each upstream. 8 KiB is what HTTP servers commonly admit for a request line
// (URLs longer than that are refused by most of the web already), far past
// any resource URI a server lists or a template makes; at the defaults
// the distinct URIs upstream then hold 8 MiB at most (docs/contract.md
// §5a).
const MaxSubscriptionURIBytes = 8 << 10

// subscriptions are the resource subscriptions of clients, by URI.
type subscriptions struct {
	maxPerSession, max int
	// warned is when the last WARN about max was logged (unix nanoseconds).
	warned atomic.Int64
	// waits counts the waits for another's backend call on a URI, refused
	// the subscribes a bound refused (tests).
	waits, refused atomic.Int64

	mu    sync.Mutex
	byURI map[string]*subscription
	// perSession counts the places each session takes: the URIs it
	// holds, and those whose first subscribe it is making.
	perSession map[*mcp.ServerSession]int
	// orphans are URIs forgotten while sessions held them (their owner's
	// manifest was removed): the go-sdk server keeps them for those
	// sessions, and pruning hands each to sweepSDK once they ended.
	orphans map[string]map[*mcp.ServerSession]bool
}

// subscription is one resource URI some clients subscribed to.
type subscription struct {
	// owner is whose backend holds the upstream subscription; nil once its
	// manifest was removed while a backend call for the URI was running.
	owner    *connState
	sessions map[*mcp.ServerSession]bool
	// again counts, per 2026-07-28 session, the listens that hold the
	// URI beside the first: over stdio every listen of a client is its one
	// session's, and a session held a URI once however many of its listens
	// named it, so the end of the first took it from the others (and from
	// the backend). Such a session lets go of the URI when its last
	// listen ends. A classic session's resources/subscribe is idempotent
	// and its unsubscribe final: it counts once.
	again map[*mcp.ServerSession]int
	// busy, while a backend call for the URI runs, is closed when it
	// returns; nil otherwise.
	busy chan struct{}
}

func (s *subscriptions) init(maxPerSession, max int) {
	s.maxPerSession, s.max = maxPerSession, max
	s.byURI = map[string]*subscription{}
	s.perSession = map[*mcp.ServerSession]int{}
	s.orphans = map[string]map[*mcp.ServerSession]bool{}
}

// orphan notes that the go-sdk server holds uri for ss, which the gateway
// forgets.
func (s *subscriptions) orphan(uri string, ss *mcp.ServerSession) {
	if s.orphans[uri] == nil {
		s.orphans[uri] = map[*mcp.ServerSession]bool{}
	}
	s.orphans[uri][ss] = true
}

// release gives back a place of ss (one pruning already forgot is gone).
func (s *subscriptions) release(ss *mcp.ServerSession) {
	if n := s.perSession[ss]; n > 1 {
		s.perSession[ss] = n - 1
	} else {
		delete(s.perSession, ss)
	}
}

// forget drops uri's entry and the places of its sessions.
func (s *subscriptions) forget(uri string, sub *subscription) {
	for ss := range sub.sessions {
		s.release(ss)
		s.orphan(uri, ss)
	}
	clear(sub.sessions)
	clear(sub.again)
	if s.byURI[uri] == sub {
		delete(s.byURI, uri)
	}
}

// waitIdle waits, with s.mu held, until uri's entry has no backend call
// running, and returns it (nil: none).
func (s *subscriptions) waitIdle(ctx context.Context, uri string) (*subscription, error) {
	for {
		sub := s.byURI[uri]
		if sub == nil || sub.busy == nil {
			return sub, nil
		}
		busy := sub.busy
		s.waits.Add(1)
		s.mu.Unlock()
		select {
		case <-busy:
		case <-ctx.Done():
		}
		s.mu.Lock()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// join adds ss to uri's subscribers. When nobody holds uri, it takes the
// URI's place marked busy and returns it: the caller subscribes owner's
// backend, then calls settle. full: refused at max.
func (s *subscriptions) join(ctx context.Context, uri string, ss *mcp.ServerSession, owner *connState) (first *subscription, full bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sub, err := s.waitIdle(ctx, uri)
	switch {
	case err != nil:
		return nil, false, err
	case sub != nil && sub.sessions[ss]:
		// Held already: no new place; another listen of the session
		// holds it too.
		if listens(ss) {
			if sub.again == nil {
				sub.again = map[*mcp.ServerSession]int{}
			}
			sub.again[ss]++
		}
		return nil, false, nil
	case s.perSession[ss] >= s.maxPerSession:
		s.refused.Add(1)
		return nil, false, &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf(
			"tether: cannot subscribe to %q: this session already holds %d resource subscriptions, the gateway's bound (--max-subscriptions-per-session); unsubscribe from one first",
			uri, s.perSession[ss])}
	case sub != nil:
		// The owner stays: its backend holds the subscription, even if
		// another connection came to own the URI since.
		sub.sessions[ss] = true
		s.perSession[ss]++
		return nil, false, nil
	case len(s.byURI) >= s.max:
		s.refused.Add(1)
		return nil, true, &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf(
			"tether: cannot subscribe to %q: the gateway already holds subscriptions to %d resources, its bound (--max-subscriptions); retry once clients unsubscribe",
			uri, len(s.byURI))}
	}
	sub = &subscription{owner: owner, sessions: map[*mcp.ServerSession]bool{}, busy: make(chan struct{})}
	s.byURI[uri] = sub
	s.perSession[ss]++
	return sub, false, nil
}

// settle ends join's backend call: ss holds uri if the backend subscribed
// and the owner is still there; otherwise its place is given back.
func (s *subscriptions) settle(uri string, sub *subscription, ss *mcp.ServerSession, subscribed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(sub.busy)
	sub.busy = nil
	if subscribed && sub.owner != nil && s.byURI[uri] == sub {
		sub.sessions[ss] = true
		return
	}
	s.release(ss)
	if subscribed {
		s.orphan(uri, ss) // the subscribe succeeds: the go-sdk holds ss for uri
	}
	s.forget(uri, sub) // nobody else joined while it was busy
}

// leave removes ss from uri's subscribers. When it was the last, the entry
// stays, busy, while the caller unsubscribes owner's backend, then calls
// done. held: another listen of ss holds uri still, and ss stays.
func (s *subscriptions) leave(uri string, ss *mcp.ServerSession) (last *subscription, owner *connState, held bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sub := s.byURI[uri]; sub == nil || !sub.sessions[ss] {
		return nil, nil, false // not subscribed: nothing to undo (nor to wait for)
	}
	// A holder waits only for a renewal (the other calls run while
	// nobody holds the URI); each call is bounded by callTimeout.
	sub, _ := s.waitIdle(context.Background(), uri)
	if sub == nil || !sub.sessions[ss] {
		return nil, nil, false
	}
	if n := sub.again[ss]; n > 0 {
		if n == 1 {
			delete(sub.again, ss)
		} else {
			sub.again[ss] = n - 1
		}
		return nil, nil, true
	}
	delete(sub.sessions, ss)
	s.release(ss)
	if len(sub.sessions) > 0 {
		return nil, nil, false
	}
	sub.busy = make(chan struct{})
	return sub, sub.owner, false
}

// listens reports whether ss subscribes by subscriptions/listen (the
// 2026-07-28 protocol), where each of its listens holds what it names.
func listens(ss *mcp.ServerSession) bool { return roundsClient(ss) }

// errListenHolds answers the go-sdk's unsubscribe at the end of a listen
// whose session holds the URI through another listen: an error is what
// keeps the go-sdk server from dropping the session's subscription to it
// (Server.unsubscribe returns before its bookkeeping), and the listen's
// end discards it. TestStdioListensShareAURI fails if a go-sdk upgrade
// changes either.
var errListenHolds = errors.New("another subscriptions/listen of this session holds the URI")

// done ends a backend call made for a busy entry (leave's, prune's,
// renew's): an entry nobody holds, or whose owner left, is dropped.
func (s *subscriptions) done(uri string, sub *subscription) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(sub.busy)
	sub.busy = nil
	if len(sub.sessions) == 0 || sub.owner == nil {
		s.forget(uri, sub)
	}
}

// subscribe is the server's SubscribeHandler: the first client to
// subscribe to a URI subscribes the owner's backend; updates come back
// through the connection's listener (resourceUpdated).
func (g *Gateway) subscribe(ctx context.Context, req *mcp.SubscribeRequest) error {
	uri := req.Params.URI
	if len(uri) > MaxSubscriptionURIBytes {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf(
			"tether: cannot subscribe to a resource URI of %d bytes (it begins %.64q): the gateway's bound on a subscribed URI is %d bytes",
			len(uri), uri, MaxSubscriptionURIBytes)}
	}
	t, d := g.cat.Load().resourceRoute(uri)
	if t == nil {
		if d != nil {
			return d.err()
		}
		return mcp.ResourceNotFoundError(uri)
	}
	first, full, err := g.subs.join(ctx, uri, req.Session, g.connOf(t))
	if full {
		g.warnSubscriptionsFull()
	}
	if err != nil {
		if ctx.Err() != nil {
			return callError(fmt.Sprintf("resources/subscribe %q: canceled by the client", uri))
		}
		return err
	}
	if first == nil {
		return nil
	}
	callCtx, done := t.callContext(ctx)
	err = t.backend.Subscribe(callCtx, uri)
	callErr := callCtx.Err()
	done()
	g.subs.settle(uri, first, req.Session, err == nil)
	if err != nil {
		return g.requestError(ctx, t, fmt.Sprintf("resources/subscribe %q", uri), err, callErr)
	}
	return nil
}

// warnSubscriptionsFull tells the operator, once a minute at most, that
// clients are refused subscriptions at --max-subscriptions.
func (g *Gateway) warnSubscriptionsFull() {
	now := time.Now().UnixNano()
	last := g.subs.warned.Load()
	if now-last < int64(time.Minute) || !g.subs.warned.CompareAndSwap(last, now) {
		return
	}
	g.log.Warn("gateway refuses resource subscriptions: it holds its bound of distinct URIs (--max-subscriptions)", "max", g.subs.max)
}

// unsubscribe is the server's UnsubscribeHandler: the last client to
// unsubscribe from a URI unsubscribes the backend.
func (g *Gateway) unsubscribe(ctx context.Context, req *mcp.UnsubscribeRequest) error {
	uri := req.Params.URI
	last, owner, held := g.subs.leave(uri, req.Session)
	if held {
		return errListenHolds
	}
	if last == nil {
		return nil
	}
	defer g.subs.done(uri, last)
	t := g.targetOf(owner)
	if t == nil {
		return nil // its connection left or is away: so did the subscription
	}
	// A 2026-07-28 client unsubscribes by ending its subscriptions/listen
	// request: the go-sdk calls this with that request's context, already
	// cancelled. The backend must hear it all the same (callTimeout and
	// the backend's life still bound it).
	callCtx, done := t.callContext(context.WithoutCancel(ctx))
	err := t.backend.Unsubscribe(callCtx, uri)
	callErr := callCtx.Err()
	done()
	if err != nil {
		return g.requestError(ctx, t, fmt.Sprintf("resources/unsubscribe %q", uri), err, callErr)
	}
	return nil
}

// pruneSubscriptions forgets the subscriptions of client sessions that
// ended without unsubscribing (a client that just goes away), and
// unsubscribes the owner's backend from each URI nobody is subscribed to
// any more: an open upstream subscription would keep an OnDemand server
// running for nobody. It returns those URIs, and the orphans whose
// sessions all ended (sweepSDK takes them out of the go-sdk server).
func (g *Gateway) pruneSubscriptions(ctx context.Context) []string {
	s := &g.subs
	s.mu.Lock()
	// The live sessions are read under the lock: a session is the
	// server's before it can subscribe, so one that subscribes now is
	// not taken for gone.
	live := map[*mcp.ServerSession]bool{}
	for ss := range g.server.Sessions() {
		live[ss] = true
	}
	for ss := range s.perSession {
		if !live[ss] {
			delete(s.perSession, ss)
		}
	}
	var uris []string
	for uri, held := range s.orphans {
		for ss := range held {
			if !live[ss] {
				delete(held, ss)
			}
		}
		if len(held) == 0 {
			delete(s.orphans, uri)
			uris = append(uris, uri)
		}
	}
	var idle []string
	for uri, sub := range s.byURI {
		if sub.busy != nil {
			continue // its call settles it; the next pass looks again
		}
		for ss := range sub.sessions {
			if !live[ss] {
				delete(sub.sessions, ss)
				delete(sub.again, ss)
			}
		}
		if len(sub.sessions) == 0 {
			idle = append(idle, uri)
		}
	}
	s.mu.Unlock()
	for _, uri := range idle {
		// Each URI is marked busy for its own call alone: marked all at
		// once, a client subscribing to the last of them waited for the
		// calls of all the others, each up to callTimeout.
		s.mu.Lock()
		sub := s.byURI[uri]
		if sub == nil || sub.busy != nil || len(sub.sessions) > 0 {
			s.mu.Unlock()
			continue // a client took it meanwhile, or it went
		}
		sub.busy = make(chan struct{})
		owner := sub.owner
		s.mu.Unlock()
		uris = append(uris, uri)
		if t := g.targetOf(owner); t != nil {
			callCtx, done := t.callContext(ctx)
			if err := t.backend.Unsubscribe(callCtx, uri); err != nil && t.life.Err() == nil {
				g.log.Debug("gateway could not drop a subscription nobody holds", "connection", t.name, "uri", uri, "error", err)
			}
			done()
		} // else its connection left: so did the subscription
		s.done(uri, sub)
	}
	return uris
}

// dropSubscriptions forgets the subscriptions st's backend held: its
// manifest is gone, and with it the backend session that held them. Their
// places are free again; a client that subscribes to such a URI again
// subscribes whoever owns it now.
func (g *Gateway) dropSubscriptions(st *connState) {
	s := &g.subs
	s.mu.Lock()
	defer s.mu.Unlock()
	for uri, sub := range s.byURI {
		switch {
		case sub.owner != st:
		case sub.busy != nil:
			sub.owner = nil // settle or done drops it
		default:
			s.forget(uri, sub)
		}
	}
}

// connOf returns the connection whose backend session t reaches: t may
// have been replaced since it was routed, for new tools or a new timeout
// (Set makes a target for every change), with the backend session, and so
// its life, the same. Matched on the target alone, a subscribe routed just
// before such a change took its URI for one whose connection had left: the
// backend was subscribed, the gateway forgot the URI at once (settle), and
// its client, answered as subscribed, got no update from it, nor did the
// backend ever hear an unsubscribe.
func (g *Gateway) connOf(t *target) *connState {
	g.mu.Lock()
	defer g.mu.Unlock()
	if st := g.conns[t.name]; st != nil && st.life == t.life {
		return st
	}
	return nil
}

// targetOf returns st's target while st is the connection of its name and
// available: otherwise its backend session, and the subscriptions it held,
// are gone.
func (g *Gateway) targetOf(st *connState) *target {
	if st == nil {
		return nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.conns[st.name] != st || !st.available {
		return nil
	}
	return st.target
}

// resubscribe subscribes a new backend of st to the URIs clients are
// subscribed to through it (its previous session held the subscriptions).
func (g *Gateway) resubscribe(st *connState, t *target) {
	s := &g.subs
	s.mu.Lock()
	var uris []string
	for uri, sub := range s.byURI {
		if sub.owner != nil && sub.owner.name == st.name {
			uris = append(uris, uri)
		}
	}
	s.mu.Unlock()
	if len(uris) == 0 {
		return
	}
	// Owned by the gateway (Close waits for it); none once it closes.
	g.renewals.goRun(func() {
		for _, uri := range uris {
			// One at a time, busy while renewed: an unsubscribe of the
			// URI meanwhile reaches the backend after the renewal.
			s.mu.Lock()
			sub, _ := s.waitIdle(context.Background(), uri)
			if sub == nil || len(sub.sessions) == 0 || sub.owner == nil || sub.owner.name != st.name {
				s.mu.Unlock()
				continue
			}
			sub.busy = make(chan struct{})
			s.mu.Unlock()
			ctx, done := t.callContext(context.Background())
			if err := t.backend.Subscribe(ctx, uri); err != nil && t.life.Err() == nil {
				g.log.Warn("gateway could not renew a resource subscription", "connection", t.name, "uri", uri, "error", err)
			}
			done()
			s.done(uri, sub)
		}
	})
}

// resourceUpdated relays a backend's notifications/resources/updated to
// the clients subscribed to the URI, if the connection owns it.
func (g *Gateway) resourceUpdated(conn string, p *mcp.ResourceUpdatedNotificationParams) {
	g.subs.mu.Lock()
	sub := g.subs.byURI[p.URI]
	ok := sub != nil && len(sub.sessions) > 0 && sub.owner != nil && sub.owner.name == conn
	g.subs.mu.Unlock()
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = g.server.ResourceUpdated(ctx, p)
}
