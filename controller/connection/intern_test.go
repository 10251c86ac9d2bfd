//go:build unix

package connection

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolServer serves one tool whose description is desc.
func toolServer(t *testing.T, desc string) string {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "intern", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", Description: desc, InputSchema: map[string]any{
		"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	ts := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(ts.Close)
	return ts.URL
}

// Sessions that list identical tools share one definition; a different
// definition is its own; and a definition no session holds any more is
// forgotten.
func TestSharedToolDefinitions(t *testing.T) {
	shared := newConnector(t)
	a := connectWith(t, shared, Request{Spec: httpSpec(toolServer(t, "same"), "")})
	b := connectWith(t, shared, Request{Spec: httpSpec(toolServer(t, "same"), "")})
	c := connectWith(t, shared, Request{Spec: httpSpec(toolServer(t, "different"), "")})
	ta, tb, tc := a.Tools(), b.Tools(), c.Tools()
	if len(ta) != 1 || len(tb) != 1 || len(tc) != 1 {
		t.Fatalf("tools: %d %d %d, want 1 each", len(ta), len(tb), len(tc))
	}
	if ta[0] != tb[0] {
		t.Error("two sessions listing the same tool hold two copies")
	}
	if ta[0] == tc[0] || tc[0].Description != "different" {
		t.Errorf("a different definition was shared: %q", tc[0].Description)
	}
	// A refresh that finds the same list changes nothing and keeps sharing.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if changed, err := a.refreshTools(ctx); err != nil || changed {
		t.Fatalf("refresh of an unchanged list: changed=%v err=%v", changed, err)
	}
	if a.Tools()[0] != tb[0] {
		t.Error("a refresh replaced the shared definition")
	}

}

// A definition no session holds any more leaves the table.
func TestSharedToolForgotten(t *testing.T) {
	table := newConnector(t).tools
	sum := internEphemeral(t, table)
	deadline := time.Now().Add(5 * time.Second)
	for {
		runtime.GC()
		table.mu.Lock()
		_, held := table.m[sum]
		table.mu.Unlock()
		if !held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("a definition nobody holds is still in the table after 5s")
		}
		time.Sleep(10 * time.Millisecond) // cleanups run on their own goroutine
	}

}

// internEphemeral holds a definition in the table and drops every reference
// to it but the table's.
func internEphemeral(t *testing.T, table *internTable) [sha256.Size]byte {
	tool := &mcp.Tool{Name: "ephemeral", Description: t.Name(), InputSchema: map[string]any{"type": "object"}}
	raw, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	if got := table.intern(sum, tool); got != tool {
		t.Fatal("the first definition of its kind was not held as it is")
	}
	if got := table.intern(sum, &mcp.Tool{Name: "ephemeral"}); got != tool {
		t.Fatal("a second copy was not replaced by the held one")
	}
	return sum
}
