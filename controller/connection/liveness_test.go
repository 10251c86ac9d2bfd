package connection

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// busyServer is a streamable HTTP MCP server whose probes (ping,
// tools/list) wait 2 s once connected is closed, as on a server busy with
// calls. Its tool "work" answers after 20 ms; "stream" sends progress every
// 25 ms for 2 s and answers only then.
func busyServer(t *testing.T, connected chan struct{}) *httptest.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "busy", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "work", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "stream", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			for i := range 80 {
				if tok != nil {
					_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i)})
				}
				select {
				case <-time.After(25 * time.Millisecond):
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil
		})
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "ping" || method == "tools/list" {
				select {
				case <-connected: // after the session's own first tools/list
					select {
					case <-time.After(2 * time.Second):
					case <-ctx.Done():
						return nil, ctx.Err()
					}
				default:
				}
			}
			return next(ctx, method, req)
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// No standalone stream (a server may refuse it, 405): its ": ok"
		// comment, late on a loaded machine, would be traffic during the
		// first probe, and this server must be silent then.
		if r.Method == http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs
}

// probe probes s with the 300 ms timeout of the fault tests.
func probe(s *Session) error {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	return s.Probe(ctx)
}

// TestProbeQueuedBehindTraffic: a probe that times out while the server
// keeps answering other requests is no failure (docs/reliability.md L2);
// the same timeout with a silent server is. The server holds every probe
// for 2 s, as a server busy with calls would, while four callers keep it
// answering calls.
func TestProbeQueuedBehindTraffic(t *testing.T) {
	connected := make(chan struct{})
	s := connect(t, Request{Spec: httpSpec(busyServer(t, connected).URL, "")})
	close(connected)

	if err := probe(s); err == nil {
		t.Fatal("a probe of a silent, stuck server passed")
	}

	// The probe starts once calls are answered: started before, on a
	// loaded machine it could time out before the first answer.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	answered := make(chan struct{})
	var first sync.Once
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "work"}, nil); err == nil {
					first.Do(func() { close(answered) })
				} else if ctx.Err() == nil {
					t.Errorf("a call: %v", err)
					return
				}
			}
		}()
	}
	select {
	case <-answered:
	case <-time.After(10 * time.Second):
		t.Fatal("no call was answered")
	}
	err := probe(s)
	stop()
	wg.Wait()
	if err != nil {
		t.Errorf("a probe queued behind calls that are answered failed: %v", err)
	}
}

// TestProbeNotificationsAreNoAnswers: a server that sends notifications
// (progress, for a call it does not answer) but answers no request while a
// probe waits is not alive: only answers count (docs/reliability.md,
// "Hostile servers").
func TestProbeNotificationsAreNoAnswers(t *testing.T) {
	connected := make(chan struct{})
	s := connect(t, Request{Spec: httpSpec(busyServer(t, connected).URL, "")})
	close(connected)

	// The probe starts once the call streams.
	callDone, streaming := make(chan error, 1), make(chan struct{})
	var first sync.Once
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "stream"}, func(*mcp.ProgressNotificationParams) {
			first.Do(func() { close(streaming) })
		})
		callDone <- err
	}()
	select {
	case <-streaming:
	case err := <-callDone:
		t.Fatalf("the call ended before it streamed: %v", err)
	}
	if err := probe(s); err == nil {
		t.Error("a probe passed while the server sent notifications and answered nothing")
	}
	if err := <-callDone; err != nil {
		t.Errorf("the call: %v", err)
	}
}
