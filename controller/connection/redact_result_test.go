//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// TestErrorResultRedacted: a tool error result that repeats a secret (here
// the Authorization header the server received) in its text, an embedded
// resource or its structured content reaches no caller with the secret.
func TestErrorResultRedacted(t *testing.T) {
	const token = "topsecret-0123456789"
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaky", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "leak", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			got := req.Extra.Header.Get("Authorization")
			return &mcp.CallToolResult{
				IsError: true,
				Content: []mcp.Content{
					&mcp.TextContent{Text: "denied for " + got},
					&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "file:///x", MIMEType: "text/plain", Text: "header was " + got}},
				},
				StructuredContent: map[string]any{"header": got, "nested": []any{got}},
			}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	sp := httpSpec(hs.URL, "")
	sp.HTTP.Headers = []spec.EnvVar{{Name: "Authorization", Value: strptr("Bearer " + token)}}
	s := connect(t, Request{Spec: sp})

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "leak"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(res)
	if strings.Contains(string(out), token) {
		t.Fatalf("the secret reached the caller: %s", out)
	}
	if !strings.Contains(string(out), Redacted) || res.StructuredContent == nil {
		t.Errorf("expected redacted content and structured content kept: %s", out)
	}
}
