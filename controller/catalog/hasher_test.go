package catalog

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// canonicalHash is the hash as Catalog.Hash has always computed it: one
// json.Marshal of the catalog with its lists sorted. Hashes are kept in
// status files across restarts, so any other way must give the same.
func canonicalHash(t *testing.T, c *Catalog) string {
	t.Helper()
	canon := Catalog{
		Tools:             sortedBy(c.Tools, func(t *mcp.Tool) string { return t.Name }),
		Prompts:           sortedBy(c.Prompts, func(p *mcp.Prompt) string { return p.Name }),
		Resources:         sortedBy(c.Resources, func(r *mcp.Resource) string { return r.URI }),
		ResourceTemplates: sortedBy(c.ResourceTemplates, func(t *mcp.ResourceTemplate) string { return t.URITemplate }),
	}
	b, err := json.Marshal(canon)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestHashIsTheCanonicalJSONs: Hash, and a Hasher's (twice: encoding, then
// remembering), give the hash of the catalog's canonical JSON, for
// catalogs with any of the lists empty, HTML characters, schemas and
// annotations.
func TestHashIsTheCanonicalJSONs(t *testing.T) {
	schema := json.RawMessage(`{"type":"object","properties":{"b":{"type":"string"},"a":{"type":"integer"}}}`)
	full := sample()
	full.Tools = append(full.Tools, &mcp.Tool{Name: "<tag> & co", Description: "a < b && c > d", InputSchema: schema,
		Annotations: &mcp.ToolAnnotations{Title: "é ✓", ReadOnlyHint: true}})
	cases := map[string]*Catalog{
		"empty":         {},
		"full":          full,
		"tools only":    {Tools: full.Tools},
		"prompts only":  {Prompts: full.Prompts},
		"no tools":      {Prompts: full.Prompts, Resources: full.Resources, ResourceTemplates: full.ResourceTemplates},
		"templates":     {ResourceTemplates: full.ResourceTemplates},
		"tools, then 3": {Tools: full.Tools, ResourceTemplates: full.ResourceTemplates},
	}
	h := NewHasher()
	for name, c := range cases {
		want := canonicalHash(t, c)
		if got := c.Hash(); got != want {
			t.Errorf("%s: Hash %s, want %s", name, got, want)
		}
		for round := range 2 {
			if got := h.Hash(c); got != want {
				t.Errorf("%s: Hasher round %d: %s, want %s", name, round, got, want)
			}
		}
		var zero Hasher
		if got := zero.Hash(c); got != want {
			t.Errorf("%s: the zero Hasher: %s, want %s", name, got, want)
		}
	}
}

// TestHasherEncodesASharedToolOnce: 1,000 catalogs that share their tool
// definitions (one copy each, as the connection package's intern table
// hands them out) encode each definition once; a definition nothing holds
// any more is forgotten.
func TestHasherEncodesASharedToolOnce(t *testing.T) {
	h := NewHasher()
	hashShared(t, h)
	if h.encoded != 6 {
		t.Errorf("%d tool definitions encoded for 1,000 catalogs of the same 3 and another copy of them, want 6", h.encoded)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		runtime.GC()
		h.mu.Lock()
		n := len(h.tools)
		h.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d definitions remembered after nothing holds them", n)
		}
		time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
	}
}

// hashShared hashes 1,000 catalogs of the same three tool definitions, then
// one of another copy of them, and holds none of them when it returns.
func hashShared(t *testing.T, h *Hasher) {
	t.Helper()
	shared := []*mcp.Tool{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	want := (&Catalog{Tools: shared}).Hash()
	for i := range 1000 {
		c := &Catalog{Tools: []*mcp.Tool{shared[(i+2)%3], shared[i%3], shared[(i+1)%3]}}
		if got := h.Hash(c); got != want {
			t.Fatalf("catalog %d: %s, want %s", i, got, want)
		}
	}
	// The same content in another copy is encoded again, same hash.
	again := &Catalog{Tools: []*mcp.Tool{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	if got := h.Hash(again); got != want {
		t.Errorf("another copy: %s, want %s", got, want)
	}
}
