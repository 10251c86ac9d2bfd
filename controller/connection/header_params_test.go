//go:build unix

package connection

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tools are listed beneath the go-sdk's client (listToolsRaw), except when
// a tool binds parameters to HTTP headers (x-mcp-header, 2026-07-28): the
// go-sdk must see that list, since CallTool sets the Mcp-Param-* headers
// from it.
func TestToolsWithHeaderParams(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "header-params", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "plain", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
		},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	var mu sync.Mutex
	var callHeaders []http.Header
	// Stateless: the go-sdk negotiates 2026-07-28 (server/discover) there.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			mu.Lock()
			callHeaders = append(callHeaders, r.Header.Clone())
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)

	s := connect(t, Request{Spec: httpSpec(ts.URL, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Skipf("negotiated %s: x-mcp-header needs %s", v, protocol2026)
	}
	var names []string
	for _, tool := range s.Tools() {
		names = append(names, tool.Name)
	}
	if len(names) != 2 {
		t.Fatalf("tools = %v, want plain and regional", names)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "regional", Arguments: map[string]any{"region": "eu-west"}}, nil)
	if err != nil || res.IsError {
		t.Fatalf("CallTool: %v %+v", err, res)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(callHeaders) != 1 {
		t.Fatalf("saw %d tools/call requests, want 1", len(callHeaders))
	}
	if got := callHeaders[0].Get("Mcp-Param-Region"); got != "eu-west" {
		t.Errorf("Mcp-Param-Region = %q, want eu-west (the go-sdk did not see the tool's annotations)", got)
	}
}
