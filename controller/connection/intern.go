package connection

import (
	"crypto/sha256"
	"runtime"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connections to many instances of one server (one per tenant, per
// workspace) list the same tools, schemas and all. tether keeps one copy of
// each distinct definition, shared by every session that lists it, for as
// long as one of them does: at 1,000 connections to one kind of server the
// decoded schemas were ~12 MB of a ~55 MB live heap. Sessions only read
// their tools, so a shared definition is never modified. The table is the
// Connector's (Connector.tools): the sessions of one tether share it.
type internTable struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]weak.Pointer[mcp.Tool]
}

// intern returns the definition already held for sum (the SHA-256 of the
// tool's JSON), or holds and returns t.
func (it *internTable) intern(sum [sha256.Size]byte, t *mcp.Tool) *mcp.Tool {
	it.mu.Lock()
	defer it.mu.Unlock()
	if wp, ok := it.m[sum]; ok {
		if held := wp.Value(); held != nil {
			return held
		}
	}
	it.m[sum] = weak.Make(t)
	runtime.AddCleanup(t, it.forget, sum)
	return t
}

// forget drops the entry of a definition no session holds any more, unless
// the entry was taken over by a newer copy.
func (it *internTable) forget(sum [sha256.Size]byte) {
	it.mu.Lock()
	defer it.mu.Unlock()
	if wp, ok := it.m[sum]; ok && wp.Value() == nil {
		delete(it.m, sum)
	}
}
