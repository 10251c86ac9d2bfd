//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Connect sends the first lists (tools, prompts, resources, templates)
// together, not one after another, and holds its endpoint's handshake slot
// until all are answered. The server delays each list's answer by up to D,
// until all four are in flight: sent together, they are answered at once;
// sent in turn, each waits D and the server never sees more than one.
func TestConnectListsTogether(t *testing.T) {
	const d = 3 * time.Second
	srv := mcp.NewServer(&mcp.Implementation{Name: "lists", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	srv.AddResource(&mcp.Resource{Name: "r", URI: "file:///r"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "rt", URITemplate: "file:///{x}"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{}, nil
	})
	c := newConnector(t)
	lists := map[string]bool{"tools/list": true, "prompts/list": true, "resources/list": true, "resources/templates/list": true}
	var (
		mu       sync.Mutex
		inFlight int
		peak     int
		all      = make(chan struct{})
		slotFree []string // lists that arrived with no handshake slot held
		key      string
	)
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if !lists[method] {
				return next(ctx, method, req)
			}
			mu.Lock()
			if hold, _ := c.handshakes.inFlight(key); hold == 0 {
				slotFree = append(slotFree, method)
			}
			inFlight++
			peak = max(peak, inFlight)
			if inFlight == len(lists) {
				close(all)
			}
			mu.Unlock()
			select {
			case <-all:
			case <-time.After(d):
			case <-ctx.Done():
			}
			mu.Lock()
			inFlight--
			mu.Unlock()
			return next(ctx, method, req)
		}
	})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	key = "streamable " + hs.URL

	s := connectWith(t, c, Request{Spec: httpSpec(hs.URL, "")})
	if len(s.Tools()) != 1 || len(s.Prompts()) != 1 || len(s.Resources()) != 1 || len(s.ResourceTemplates()) != 1 {
		t.Errorf("lists: %d tools, %d prompts, %d resources, %d templates; want one each",
			len(s.Tools()), len(s.Prompts()), len(s.Resources()), len(s.ResourceTemplates()))
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != len(lists) {
		t.Errorf("the server saw at most %d of the %d first lists in flight at once, want all", peak, len(lists))
	}
	if len(slotFree) != 0 {
		t.Errorf("%v arrived after the handshake slot was given back, want it held until all lists are in", slotFree)
	}
	if hold, wait := c.handshakes.inFlight(key); hold != 0 || wait != 0 {
		t.Errorf("after connect: %d handshakes in flight, %d waiting", hold, wait)
	}
}

// together reports the first error in time, not a sibling's echo of the
// cancellation that error caused, and waits for every function.
func TestTogetherFirstErrorWins(t *testing.T) {
	bad := errors.New("tools/list: refused")
	var sawCancel bool
	err := together(context.Background(),
		func(ctx context.Context) error { <-ctx.Done(); sawCancel = true; return ctx.Err() },
		func(context.Context) error { return bad },
		func(ctx context.Context) error { <-ctx.Done(); return errors.New("prompts/list: " + ctx.Err().Error()) })
	if !errors.Is(err, bad) {
		t.Errorf("together = %v, want %v", err, bad)
	}
	if !sawCancel {
		t.Error("together returned before a sibling ended")
	}
	if err := together(context.Background()); err != nil {
		t.Errorf("together() = %v", err)
	}
}
