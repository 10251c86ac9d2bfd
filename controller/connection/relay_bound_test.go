//go:build unix

package connection

//lint:file-ignore SA1019 relaying sampling (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// A server that sends many requests (sampling) on one call's stream has
// at most relaysPerRequest of them put to the client at once, on both
// roads a call takes; the rest are refused at once with an error naming
// the bound, and the call goes on.
func TestServerRequestsRelayedAtOnceAreBounded(t *testing.T) {
	const asked = relaysPerRequest + 24
	for _, road := range []string{"CallTool", "CallToolRaw"} {
		t.Run(road, func(t *testing.T) {
			srv := echoServer()
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
			var mu sync.Mutex
			refused := 0
			allRefused := make(chan struct{})
			c := &countingCaller{fakeCaller: fakeCaller{client: "A", caps: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}}}
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				m, id := rpcOf(r)
				switch {
				case m == "" && len(id) > 0: // an answer to one of the server's requests
					body, _ := io.ReadAll(r.Body)
					if strings.Contains(string(body), "(the bound)") {
						mu.Lock()
						if refused++; refused == asked-relaysPerRequest {
							close(allRefused)
						}
						mu.Unlock()
					}
					w.WriteHeader(http.StatusAccepted)
					return
				case m == "tools/call" && strings.Contains(peekBody(r), `"flood"`):
					w.Header().Set("Content-Type", "text/event-stream")
					for i := range asked {
						fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":\"q%d\",\"method\":\"sampling/createMessage\",\"params\":{\"maxTokens\":1,\"messages\":[{\"role\":\"user\",\"content\":{\"type\":\"text\",\"text\":\"?\"}}]}}\n\n", i)
					}
					w.(http.Flusher).Flush()
					text := "all refused past the bound"
					select {
					case <-allRefused:
					case <-time.After(10 * time.Second):
						text = "not refused"
					}
					// The call ends its questions when it is answered:
					// answered before every question reached the client,
					// the client was asked fewer at once than it would be.
					for deadline := time.Now().Add(10 * time.Second); c.most() < relaysPerRequest && time.Now().Before(deadline); {
						time.Sleep(time.Millisecond)
					}
					fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[{\"type\":\"text\",\"text\":%q}]}}\n\n", id, text)
					return
				}
				h.ServeHTTP(w, r)
			}))
			t.Cleanup(hs.Close)
			s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
			ctx, cancel := context.WithTimeout(wire.WithCaller(t.Context(), c), 20*time.Second)
			defer cancel()
			var text string
			if road == "CallTool" {
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "flood", Arguments: map[string]any{}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				text = textOf(res)
			} else {
				res, _, err := s.CallToolRaw(ctx, "flood", nil, nil)
				if err != nil {
					t.Fatal(err)
				}
				var r mcp.CallToolResult
				if err := json.Unmarshal(res, &r); err != nil {
					t.Fatal(err)
				}
				text = textOf(&r)
			}
			if text != "all refused past the bound" {
				t.Errorf("the call answered %q", text)
			}
			mu.Lock()
			defer mu.Unlock()
			if refused != asked-relaysPerRequest {
				t.Errorf("%d of %d requests refused, want %d", refused, asked, asked-relaysPerRequest)
			}
			if n := c.most(); n != relaysPerRequest {
				t.Errorf("the client was asked %d things at once, want %d", n, relaysPerRequest)
			}
		})
	}
}

// countingCaller holds every sampling request until its ctx ends and
// counts how many it held at once, at most.
type countingCaller struct {
	fakeCaller
	mu           sync.Mutex
	active, peak int
}

func (c *countingCaller) CreateMessage(ctx context.Context, _ *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	c.mu.Lock()
	c.active++
	c.peak = max(c.peak, c.active)
	c.mu.Unlock()
	<-ctx.Done()
	c.mu.Lock()
	c.active--
	c.mu.Unlock()
	return nil, ctx.Err()
}

func (c *countingCaller) most() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.peak
}
