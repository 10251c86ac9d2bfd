package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// A backend that closes the call's stream three times (SEP-1699 polling),
// with progress (a new event) between closes: the call is resumed each
// time, as the go-sdk client resumes it.
func TestFastPathResumesPollingStream(t *testing.T) {
	for _, fast := range []bool{false, true} {
		srv := mcp.NewServer(&mcp.Implementation{Name: "poll", Version: "1"}, nil)
		srv.AddTool(&mcp.Tool{Name: "poll", InputSchema: json.RawMessage(`{"type":"object"}`)},
			func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				for i := 1; i <= 3; i++ {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i)})
					req.Extra.CloseSSEStream(mcp.CloseSSEStreamArgs{RetryAfter: 20 * time.Millisecond})
					time.Sleep(100 * time.Millisecond)
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "finished"}}}, nil
			})
		bs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv },
			&mcp.StreamableHTTPOptions{EventStore: mcp.NewMemoryEventStore(nil)}))
		defer bs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		sess, err := connection.Connect(ctx, connection.Request{Name: "p", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: bs.URL}}})
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		g := New(Options{Logger: testLogger(t)})
		g.noFastPath.Store(!fast)
		g.Set(Connection{Name: "p", Prefix: "p", Backend: sess})
		url, _ := serveOn(t, g, "127.0.0.1:0", "")
		c := rawSession(t, g, url, "")
		ctx, cancel = context.WithTimeout(context.Background(), waitTimeout)
		st, m := c.post(ctx, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"p_poll"}}`)
		cancel()
		t.Logf("fast=%v taken=%d: %d %s", fast, g.fastCalls.Load(), st, m)
		if st != http.StatusOK || !strings.Contains(m, "finished") {
			t.Errorf("fast=%v: %d %s, want the tool's result", fast, st, m)
		}
		if fast && g.fastCalls.Load() == 0 {
			t.Error("the fast path was not taken")
		}
	}
}
