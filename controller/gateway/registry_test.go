package gateway

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway lists its tools itself: every exposed tool, once, sorted by
// name, in pages of the go-sdk's size, and never its sentinel.
func TestListPages(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	// 2,500 tools: three pages of 1,000.
	for i := range 500 {
		g.Set(Connection{Name: fmt.Sprintf("c%03d", i), Prefix: fmt.Sprintf("c%03d", i), Backend: withTools(&idBackend{id: i}, benchTools(5))})
	}
	d := dial(t, g, hs)

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var names []string
	pages := 0
	cursor := ""
	for {
		res, err := d.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatalf("tools/list page %d: %v", pages+1, err)
		}
		pages++
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		if res.NextCursor == "" {
			break
		}
		cursor = res.NextCursor
	}
	if pages != 3 {
		t.Errorf("%d pages, want 3 (page size %d)", pages, listPageSize)
	}
	if len(names) != 2500 {
		t.Fatalf("%d tools listed, want 2500", len(names))
	}
	if !slices.IsSorted(names) {
		t.Error("tools are not sorted by name")
	}
	if len(slices.Compact(slices.Clone(names))) != len(names) {
		t.Error("a tool is listed twice")
	}
	if slices.Contains(names, sentinelTool.Name) {
		t.Errorf("the sentinel %s is listed", sentinelTool.Name)
	}

	_, err := d.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: "!not base64!"})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams {
		t.Errorf("invalid cursor: got %v, want invalid params (%d)", err, jsonrpc.CodeInvalidParams)
	}
}

// A call to a name the gateway does not serve gets the go-sdk server's own
// answer, also for the sentinel's name.
func TestUnknownTool(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "a", Prefix: "a", Backend: withTools(&idBackend{}, benchTools(1))})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, name := range []string{"nope", sentinelTool.Name} {
		_, err := d.call(ctx, name, map[string]any{})
		var je *jsonrpc.Error
		if !errors.As(err, &je) || je.Code != jsonrpc.CodeInvalidParams || je.Message != fmt.Sprintf("unknown tool %q", name) {
			t.Errorf("call %s: got %v, want invalid params `unknown tool %q`", name, err, name)
		}
	}
}

// A tool that binds a parameter to a header is also registered with the
// go-sdk server, whose transport checks calls against it; it is listed once,
// with its annotation, and leaves the go-sdk server with its connection.
func TestHeaderBoundToolRegistered(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	bound := &mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}
	g.Set(Connection{Name: "a", Prefix: "a", Backend: withTools(&idBackend{}, []*mcp.Tool{bound, benchTools(1)[0]})})
	g.mu.Lock()
	inSDK := map[string]bool{}
	for name, et := range g.exposed {
		inSDK[name] = et.inSDK
	}
	g.mu.Unlock()
	if !inSDK["a_regional"] || inSDK["a_tool0"] {
		t.Errorf("registered with the go-sdk: %v, want only a_regional", inSDK)
	}
	d := dial(t, g, hs)
	var found int
	for _, tool := range d.tools(t) {
		if tool.Name == "a_regional" {
			found++
			props, _ := tool.InputSchema.(map[string]any)["properties"].(map[string]any)
			if region, _ := props["region"].(map[string]any); region["x-mcp-header"] != "Region" {
				t.Errorf("a_regional lost its annotation: %v", tool.InputSchema)
			}
		}
	}
	if found != 1 {
		t.Errorf("a_regional listed %d times, want 1", found)
	}
	g.Remove("a")
	if names := d.toolNames(t); len(names) != 0 {
		t.Errorf("after Remove: %v", names)
	}
}
