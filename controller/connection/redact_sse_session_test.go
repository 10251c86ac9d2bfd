//go:build unix

package connection

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The session id a legacy SSE server hands out in the message endpoint's
// query (the go-sdk's `sessionid`, the TypeScript SDK's `sessionId`) is
// redacted like a streamable session's: a POST there that fails in
// net/http quotes the whole URL in its error, which the call's caller and
// the logs get.
func TestSSESessionIDIsRedacted(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sse", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "t"}, func(context.Context, *mcp.CallToolRequest, any) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	var cut atomic.Bool
	var id atomic.Value
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if q := r.URL.Query().Get("sessionid"); q != "" {
			id.Store(q)
			if cut.Load() && r.Method == http.MethodPost {
				// The connection breaks before any answer.
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "sse")})
	sid, _ := id.Load().(string)
	if len(sid) < MinRedactLen {
		t.Fatalf("the server gave no session id in its message endpoint (%q): the test proves nothing", sid)
	}
	cut.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "t"}, nil)
	if err == nil {
		t.Fatal("the call succeeded; the test needs its POST to fail")
	}
	if strings.Contains(err.Error(), sid) {
		t.Errorf("the call's error shows the SSE session id: %v", err)
	}
}
