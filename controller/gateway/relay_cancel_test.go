package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestTwoRelaysGivenUp: a backend asks the client two sampling
// requests at once during one call; the client never answers; the call
// times out. On both paths the client must get notifications/cancelled for
// both requests.
func TestTwoRelaysGivenUp(t *testing.T) {
	a := newRichBackend(t, "a")
	a.srv.AddTool(&mcp.Tool{Name: "two", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var wg sync.WaitGroup
			for range 2 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_, _ = req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
						Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}})
				}()
			}
			wg.Wait()
			return nil, errors.New("sampling failed")
		})
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: a.connect(t), CallTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	for _, sdkPath := range []bool{false, true} {
		t.Run(map[bool]string{false: "fast", true: "sdk"}[sdkPath], func(t *testing.T) {
			g.noFastPath.Store(sdkPath)
			defer g.noFastPath.Store(false)
			m := dialMuted(t, url)
			start := time.Now()
			_, err := m.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_two"})
			took := time.Since(start)
			entered, cancelled := m.waitCancelled(3 * time.Second)
			t.Logf("call: %v after %v; client requests entered %d, cancelled %d", rpcMessage(err), took.Round(time.Millisecond), entered, cancelled)
			if cancelled != entered {
				t.Errorf("client sampling requests: entered %d, cancelled %d: a request the gateway gave up stays open at the client", entered, cancelled)
			}
		})
	}
}

// TestPromptRelayGivenUp: prompts/get whose backend asks the client
// for sampling the client never answers (go-sdk path: prompts never take
// the fast path): the client gets the timeout, not the backend's reaction
// to the cancelled relay, and its sampling request is cancelled.
func TestPromptRelayGivenUp(t *testing.T) {
	a := newRichBackend(t, "a")
	a.srv.AddPrompt(&mcp.Prompt{Name: "ask"},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			_, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "x"}}}})
			// The backend's reaction to the cancelled relay: a result.
			return &mcp.GetPromptResult{Description: fmt.Sprintf("reaction to: %v", err)}, nil
		})
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: a.connect(t), CallTimeout: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	m := dialMuted(t, url)
	var entered, cancelled int32
	for i := range 10 {
		start := time.Now()
		res, err := m.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "pa_ask"})
		took := time.Since(start).Round(time.Millisecond)
		entered, cancelled = m.waitCancelled(2 * time.Second)
		desc := ""
		if res != nil {
			desc = res.Description
		}
		t.Logf("%d (%v): prompt result %q, error %v; client requests entered %d, cancelled %d", i, took, desc, rpcMessage(err), entered, cancelled)
		if msg := rpcMessage(err); !strings.Contains(msg, "timed out after 300ms") {
			t.Errorf("%d: prompt result %q, error %q; want the timeout", i, desc, msg)
		}
	}
	if cancelled != entered {
		t.Errorf("client sampling requests: entered %d, cancelled %d", entered, cancelled)
	}
}

// mutedClient is a client that never answers sampling: it counts the
// requests it got and those that were cancelled.
type mutedClient struct {
	*richClient
	entered, cancelled atomic.Int32
}

// dialMuted connects a mutedClient to the gateway at url.
func dialMuted(t *testing.T, url string) *mutedClient {
	t.Helper()
	m := &mutedClient{}
	giveUp := make(chan struct{})
	m.richClient = dialRich(t, url, "", func(rc *richClient) {
		rc.sampling = func(ctx context.Context) (*mcp.CreateMessageResult, error) {
			m.entered.Add(1)
			select {
			case <-ctx.Done():
				m.cancelled.Add(1)
				return nil, ctx.Err()
			case <-giveUp: // a failed test: the client's Close waits for this handler
				return nil, errors.New("the test ended")
			}
		}
	})
	t.Cleanup(func() { close(giveUp) }) // before the client's Close
	return m
}

// waitCancelled waits, at most within, until every request the client got
// was cancelled, and returns the counts.
func (m *mutedClient) waitCancelled(within time.Duration) (entered, cancelled int32) {
	deadline := time.Now().Add(within)
	for m.cancelled.Load() < m.entered.Load() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	return m.entered.Load(), m.cancelled.Load()
}
