package gateway

import (
	"context"
	"fmt"
	"hash/maphash"
	"maps"
	"strings"
	"time"
)

// routeShards splits the routing table so that publishing a change copies
// only the shards it touches: with 1,000 connections of 5 tools, a Set
// copies a few maps of ~40 routes instead of one of 5,000, which made a
// cold start of 1,000 connections quadratic in the gateway alone.
const routeShards = 128

var routeSeed = maphash.MakeSeed()

func shardOf(name string) uint64 { return maphash.String(routeSeed, name) % routeShards }

// routeTable is an immutable snapshot of where calls go. The call path
// loads it with one atomic read and never waits for a change.
type routeTable struct {
	shards [routeShards]map[string]route
	// down maps names that an unavailable connection used to expose to it;
	// downPrefixes catch the rest of such a connection's names (prefix+"_").
	// A name may be both down and live (another connection took it over):
	// callers look for a live route first.
	down         map[string]*downTarget
	downPrefixes []downPrefix
}

func (t *routeTable) route(name string) (route, bool) {
	r, ok := t.shards[shardOf(name)][name]
	return r, ok
}

type route struct {
	target *target
	tool   string // the backend's own tool name
	// bindsHeaders: the tool binds parameters to headers (x-mcp-header),
	// which the go-sdk checks a 2026-07-28 call's Mcp-Param-* headers
	// against: such calls are left to it (fastpath.go).
	bindsHeaders bool
}

// target is what a request routed to a connection needs of it; immutable.
type target struct {
	name    string
	backend routed
	timeout time.Duration
	life    context.Context
	// levelSet is closed once the backend was asked for the logging level
	// the clients had set before it connected (nil: nothing to wait for).
	levelSet <-chan struct{}
}

// routed holds the parts of a Backend that routed requests call: tools/call
// (ToolCalls), the other requests (Requests), subscriptions, and the
// logging level (Relays). What it offers (Offer) is read by Set alone and
// is not kept here.
type routed struct {
	ToolCalls
	Requests
	Subscriptions
	Relays
}

type downTarget struct {
	name    string
	reason  string
	timeout time.Duration // the connection's call timeout, as last exposed
}

type downPrefix struct {
	prefix string // including the trailing "_"
	target *downTarget
}

func (d *downTarget) err() error {
	return callError(fmt.Sprintf("connection %s is not connected: %s", d.name, d.reason))
}

// lookupDown finds the unavailable connection a tool name belongs to: a name
// it exposed before, else the longest matching prefix.
func (t *routeTable) lookupDown(name string) *downTarget {
	if d := t.down[name]; d != nil {
		return d
	}
	return t.lookupDownPrefix(name)
}

// lookupDownPrefix finds the unavailable connection whose prefix+"_" is the
// longest that name starts with.
func (t *routeTable) lookupDownPrefix(name string) *downTarget {
	var best *downPrefix
	for i := range t.downPrefixes {
		dp := &t.downPrefixes[i]
		if strings.HasPrefix(name, dp.prefix) && (best == nil || len(dp.prefix) > len(best.prefix)) {
			best = dp
		}
	}
	if best != nil {
		return best.target
	}
	return nil
}

// routeEdit builds the next table from the current one, copying a shard the
// first time it changes; the current table is never modified.
type routeEdit struct {
	next   *routeTable
	copied [routeShards]bool
}

func editRoutes(cur *routeTable) *routeEdit {
	next := *cur
	return &routeEdit{next: &next}
}

func (e *routeEdit) own(s uint64) map[string]route {
	if !e.copied[s] {
		m := make(map[string]route, len(e.next.shards[s])+1)
		maps.Copy(m, e.next.shards[s])
		e.next.shards[s] = m
		e.copied[s] = true
	}
	return e.next.shards[s]
}

func (e *routeEdit) set(name string, r route) { e.own(shardOf(name))[name] = r }

func (e *routeEdit) remove(name string) {
	s := shardOf(name)
	if _, ok := e.next.shards[s][name]; ok {
		delete(e.own(s), name)
	}
}
