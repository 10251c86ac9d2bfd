package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/exposure"
)

// exposedName is the name a backend tool gets on the gateway.
func exposedName(prefix, tool string) string { return exposure.Name(prefix, tool) }

// exposedTool is one backend tool as the gateway would publish it.
type exposedTool struct {
	orig string    // the backend's own name, sent upstream on tools/call
	tool *mcp.Tool // renamed and normalised copy; never the backend's value
	// def is the SHA-256 of tool's JSON: two definitions with equal def are
	// the same, which keeps an unchanged list free of list_changed. (A hash,
	// not the JSON: 5,000 exposed tools held 2.5 MB of it.)
	def [sha256.Size]byte
	// bindsHeaders: the definition has x-mcp-header annotations, which the
	// go-sdk validates and checks calls against (see registry.go).
	bindsHeaders bool
	// fixes says what normalisation changed, logged when the tool is added.
	fixes []string
	// inSDK: registered with the go-sdk server too (see registry.go).
	inSDK bool
}

// objectSchema is the input schema of a tool that takes any object.
var objectSchema = json.RawMessage(`{"type":"object"}`)

// exposeTool builds the published definition of a backend tool: a shallow
// copy with the exposed name, its title and description without control and
// bidirectional characters (cleanText), and an input schema the go-sdk
// server accepts.
// Server.AddTool panics on a missing input schema or one whose "type" is not
// exactly "object", and on an output schema that does not marshal; rather
// than drop such a tool, the schema is repaired and the repair recorded.
func exposeTool(t *mcp.Tool, name string) *exposedTool {
	cp := *t
	cp.Name = name
	cp.Title, cp.Description = cleanText(t.Title), cleanText(t.Description)
	if a := t.Annotations; a != nil && a.Title != cleanText(a.Title) {
		ac := *a
		ac.Title = cleanText(a.Title)
		cp.Annotations = &ac
	}
	var fixes []string
	cp.InputSchema, fixes = normaliseInputSchema(t.InputSchema)
	if cp.OutputSchema != nil {
		if _, err := json.Marshal(cp.OutputSchema); err != nil {
			cp.OutputSchema = nil
			fixes = append(fixes, "dropped an output schema that is not valid JSON")
		}
	}
	def, err := json.Marshal(&cp)
	if err != nil {
		// Unreachable after the repairs above unless the backend's _meta or
		// annotations hold something unmarshalable; keep the essentials.
		cp = mcp.Tool{Name: name, Title: t.Title, Description: t.Description, InputSchema: objectSchema}
		fixes = append(fixes, fmt.Sprintf("kept only name, title, description: %v", err))
		def, _ = json.Marshal(&cp)
	}
	return &exposedTool{orig: t.Name, tool: &cp, def: sha256.Sum256(def), fixes: fixes,
		bindsHeaders: bytes.Contains(def, []byte(`"x-mcp-header"`))}
}

// normaliseInputSchema returns a schema whose "type" is "object", and what it
// had to change. A valid schema is returned as it is, not copied.
func normaliseInputSchema(s any) (any, []string) {
	if s == nil {
		return objectSchema, []string{`missing input schema replaced by {"type":"object"}`}
	}
	m, ok := s.(map[string]any)
	if !ok {
		raw, err := json.Marshal(s)
		if err != nil {
			return objectSchema, []string{fmt.Sprintf(`input schema that does not marshal (%v) replaced by {"type":"object"}`, err)}
		}
		if err := json.Unmarshal(raw, &m); err != nil || m == nil {
			return objectSchema, []string{fmt.Sprintf(`input schema %.40s is not a JSON object: replaced by {"type":"object"}`, raw)}
		}
	}
	if typ, ok := m["type"].(string); ok && typ == "object" {
		return s, nil
	}
	fix := fmt.Sprintf(`input schema "type" %s set to "object"`, describeType(m["type"]))
	m = maps.Clone(m)
	m["type"] = "object"
	return m, []string{fix}
}

func describeType(v any) string {
	if v == nil {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("%v", v)
	}
	return string(b)
}

// minimalTool is the last resort when the SDK still rejects a repaired
// definition (e.g. a malformed x-mcp-header annotation): the tool stays
// callable with its name and description, and arguments are still forwarded
// verbatim.
func minimalTool(t *mcp.Tool) *mcp.Tool {
	return &mcp.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		Annotations: t.Annotations,
		InputSchema: objectSchema,
	}
}
