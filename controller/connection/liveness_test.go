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

// TestProbeQueuedBehindTraffic: a probe that times out while the server keeps
// sending answers to other requests is no failure; the same timeout with a
// silent server is. The server here holds every probe (ping, tools/list)
// for 2 s, as a server busy with calls would; a tool streams progress.
func TestProbeQueuedBehindTraffic(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "busy", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "work", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			tok := req.Params.GetProgressToken()
			for i := range 40 {
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
	connected := make(chan struct{})
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
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	close(connected)

	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		return s.Probe(ctx)
	}
	if err := probe(); err == nil {
		t.Fatal("a probe of a silent, stuck server passed")
	}

	// The probe starts once the call streams: started before, on a loaded
	// machine it could time out before the call's first answer arrives.
	callDone, streaming := make(chan error, 1), make(chan struct{})
	var first sync.Once
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "work"}, func(*mcp.ProgressNotificationParams) {
			first.Do(func() { close(streaming) })
		})
		callDone <- err
	}()
	select {
	case <-streaming:
	case err := <-callDone:
		t.Fatalf("the call ended before it streamed: %v", err)
	}
	if err := probe(); err != nil {
		t.Errorf("a probe queued behind a call that streams answers failed: %v", err)
	}
	if err := <-callDone; err != nil {
		t.Errorf("the call: %v", err)
	}
}
