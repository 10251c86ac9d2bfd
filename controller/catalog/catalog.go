// Package catalog is what an MCP server publishes: its tools, prompts,
// resources and resource templates. tether hashes it to see it move (an
// upgrade that drops a tool), keeps it in the state directory, and serves it
// for an OnDemand server that is not running. It does no I/O.
package catalog

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Catalog is one server's published definitions, as the server sent them.
type Catalog struct {
	Tools             []*mcp.Tool             `json:"tools,omitempty"`
	Prompts           []*mcp.Prompt           `json:"prompts,omitempty"`
	Resources         []*mcp.Resource         `json:"resources,omitempty"`
	ResourceTemplates []*mcp.ResourceTemplate `json:"resourceTemplates,omitempty"`
}

// Hash is "sha256:<hex>" of the definitions in a canonical order: the same
// definitions give the same hash whatever order the server listed them in.
func (c *Catalog) Hash() string {
	canon := Catalog{
		Tools:             sortedBy(c.Tools, func(t *mcp.Tool) string { return t.Name }),
		Prompts:           sortedBy(c.Prompts, func(p *mcp.Prompt) string { return p.Name }),
		Resources:         sortedBy(c.Resources, func(r *mcp.Resource) string { return r.URI }),
		ResourceTemplates: sortedBy(c.ResourceTemplates, func(t *mcp.ResourceTemplate) string { return t.URITemplate }),
	}
	b, err := json.Marshal(canon)
	if err != nil {
		// The go-sdk's types always marshal; a hash of nothing would hide
		// a change, so say so loudly instead.
		panic(fmt.Sprintf("catalog: %v", err))
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Names lists what the catalog holds, one name per definition, each kind
// marked: tools by name ("echo"), prompts as "prompt:<name>", resources as
// "resource:<uri>", templates as "resourceTemplate:<template>". Sorted.
func (c *Catalog) Names() []string {
	var out []string
	for _, t := range c.Tools {
		out = append(out, t.Name)
	}
	for _, p := range c.Prompts {
		out = append(out, "prompt:"+p.Name)
	}
	for _, r := range c.Resources {
		out = append(out, "resource:"+r.URI)
	}
	for _, t := range c.ResourceTemplates {
		out = append(out, "resourceTemplate:"+t.URITemplate)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Diff returns the names in next that are not in prev (added) and those in
// prev that are not in next (removed), sorted.
func Diff(prev, next []string) (added, removed []string) {
	in := func(list []string, s string) bool { _, ok := slices.BinarySearch(list, s); return ok }
	for _, n := range next {
		if !in(prev, n) {
			added = append(added, n)
		}
	}
	for _, n := range prev {
		if !in(next, n) {
			removed = append(removed, n)
		}
	}
	return added, removed
}

// Marshal encodes the catalog for the state directory, '<', '>' and '&'
// as themselves: json.Marshal writes each as six bytes, so a catalog whose
// lists each passed the bound on one list (which counts them as one,
// docs/contract.md §5a) could be saved larger than a state file may be
// read. Unmarshal reads either form, and the hash is of the definitions,
// not of the file's bytes.
func (c *Catalog) Marshal() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(saved{Version: savedVersion, Hash: c.Hash(), Catalog: *c}); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// TooLargeError is why a catalog is not saved: Size bytes encoded, over
// the Limit on a file read from the state directory, so that the next
// start would ignore it.
type TooLargeError struct {
	Size, Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("it is %d bytes saved, over the limit of %d bytes on a state file (--max-state-file-size), so the next start would ignore it", e.Size, e.Limit)
}

// Unmarshal decodes what Marshal wrote. A file of another format, or whose
// content does not match its hash (cut short, edited), is an error.
func Unmarshal(data []byte) (*Catalog, error) {
	var s saved
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("not a saved catalog: %w", err)
	}
	if s.Version != savedVersion {
		return nil, fmt.Errorf("not a saved catalog of this tether (version %q)", s.Version)
	}
	for _, t := range s.Catalog.Tools {
		if t == nil || t.Name == "" {
			return nil, errors.New("a tool without a name")
		}
	}
	if got := s.Catalog.Hash(); got != s.Hash {
		return nil, errors.New("its content does not match its hash")
	}
	return &s.Catalog, nil
}

const savedVersion = "tether.dev/catalog/v1"

type saved struct {
	Version string `json:"version"`
	Hash    string `json:"hash"`
	Catalog
}

func sortedBy[T any](list []T, key func(T) string) []T {
	out := slices.Clone(list)
	slices.SortStableFunc(out, func(a, b T) int {
		ka, kb := key(a), key(b)
		switch {
		case ka < kb:
			return -1
		case ka > kb:
			return 1
		}
		return 0
	})
	return out
}
