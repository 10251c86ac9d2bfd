package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Hasher is Catalog.Hash with a memory of the tool definitions it encoded,
// by identity. The sessions of many instances of one server share one copy
// of each tool definition (controller/connection's intern table), never
// modified, so each is encoded once however many connections list it: at
// 1,000 connections starting, encoding every tool of every catalog was 3.5%
// of tether's CPU (hack/bench -pprof). A definition is forgotten once
// nothing holds it any more. The zero Hasher remembers nothing; a Hasher is
// safe for concurrent use.
type Hasher struct {
	mu      sync.Mutex
	tools   map[weak.Pointer[mcp.Tool]][]byte
	encoded int // tool definitions encoded (not remembered), for tests
}

// NewHasher returns a Hasher that remembers.
func NewHasher() *Hasher {
	return &Hasher{tools: map[weak.Pointer[mcp.Tool]][]byte{}}
}

// Hash returns c.Hash().
func (h *Hasher) Hash(c *Catalog) string {
	return hashOf(c, h.tool)
}

// tool returns the JSON of t, encoded once per definition.
func (h *Hasher) tool(t *mcp.Tool) []byte {
	if h.tools == nil || t == nil {
		return encode(t)
	}
	key := weak.Make(t)
	h.mu.Lock()
	b, ok := h.tools[key]
	h.mu.Unlock()
	if ok {
		return b
	}
	b = encode(t)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.encoded++
	if _, ok := h.tools[key]; !ok {
		h.tools[key] = b
		runtime.AddCleanup(t, h.forget, key)
	}
	return b
}

// forget drops a definition nothing holds any more.
func (h *Hasher) forget(key weak.Pointer[mcp.Tool]) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.tools, key)
}

// encode is json.Marshal of one definition.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// The go-sdk's types always marshal; a hash of nothing would hide
		// a change, so say so loudly instead.
		panic(fmt.Sprintf("catalog: %v", err))
	}
	return b
}

// hashOf is "sha256:<hex>" of json.Marshal of c with each list in its
// canonical order, written piece by piece: the object's fields in their
// order, empty lists left out (omitempty), each definition as tool (or
// json.Marshal) encodes it, which is what json.Marshal writes for it inside
// the list (TestHashIsTheCanonicalJSONs).
func hashOf(c *Catalog, tool func(*mcp.Tool) []byte) string {
	sum := sha256.New()
	sum.Write([]byte{'{'})
	first := true
	field := func(name string, n int, item func(i int) []byte) {
		if n == 0 {
			return
		}
		if !first {
			sum.Write([]byte{','})
		}
		first = false
		sum.Write([]byte(`"` + name + `":[`))
		for i := range n {
			if i > 0 {
				sum.Write([]byte{','})
			}
			sum.Write(item(i))
		}
		sum.Write([]byte{']'})
	}
	tools := sortedBy(c.Tools, func(t *mcp.Tool) string { return t.Name })
	prompts := sortedBy(c.Prompts, func(p *mcp.Prompt) string { return p.Name })
	resources := sortedBy(c.Resources, func(r *mcp.Resource) string { return r.URI })
	templates := sortedBy(c.ResourceTemplates, func(t *mcp.ResourceTemplate) string { return t.URITemplate })
	field("tools", len(tools), func(i int) []byte { return tool(tools[i]) })
	field("prompts", len(prompts), func(i int) []byte { return encode(prompts[i]) })
	field("resources", len(resources), func(i int) []byte { return encode(resources[i]) })
	field("resourceTemplates", len(templates), func(i int) []byte { return encode(templates[i]) })
	sum.Write([]byte{'}'})
	return "sha256:" + hex.EncodeToString(sum.Sum(nil))
}
