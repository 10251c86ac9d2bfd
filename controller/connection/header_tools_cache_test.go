//go:build unix

package connection

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkListings holds weak pointers to the tools every tools/list the go-sdk's
// client sends for itself returns (what its ListTools would keep), and
// counts those requests. Its sending middleware is outermost: tether's own
// requests beneath the go-sdk's caches (rawSend) do not pass it.
type sdkListings struct {
	mu    sync.Mutex
	n     int
	tools []weak.Pointer[mcp.Tool]
}

func watchSDKListings(s *Session) *sdkListings {
	l := &sdkListings{}
	s.client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcp.ListToolsResult); ok && method == "tools/list" && err == nil {
				l.mu.Lock()
				l.n++
				for _, t := range r.Tools {
					l.tools = append(l.tools, weak.Make(t))
				}
				l.mu.Unlock()
			}
			return res, err
		}
	})
	return l
}

func (l *sdkListings) counts() (requests, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n, aliveAfterGC(l.tools)
}

// headerToolsServer is a 2026-07-28 server with a tool that binds a
// parameter to a header, whose tools/list comes in two pages, the second
// behind a fresh cursor each time; describe gives the second page's tool
// its description for the n-th list. calls collects the Mcp-Param-Region
// of each tools/call.
func headerToolsServer(t *testing.T, describe func(n int64) string) (url string, srv *mcp.Server, calls func() []string) {
	t.Helper()
	regional := &mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}
	srv = mcp.NewServer(&mcp.Implementation{Name: "header-pages", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	srv.AddTool(regional, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	var lists atomic.Int64
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			if req.GetParams().(*mcp.ListToolsParams).Cursor == "" {
				n := lists.Add(1)
				return &mcp.ListToolsResult{Tools: []*mcp.Tool{regional}, NextCursor: fmt.Sprintf("page2/%d", n)}, nil
			}
			return &mcp.ListToolsResult{Tools: []*mcp.Tool{{Name: "plain", Description: describe(lists.Load()), InputSchema: map[string]any{"type": "object"}}}}, nil
		}
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var mu sync.Mutex
	var regions []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			mu.Lock()
			regions = append(regions, r.Header.Get("Mcp-Param-Region"))
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	return hs.URL, srv, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), regions...)
	}
}

// Tools bound to headers are listed through the go-sdk (CallTool finds
// them there), whose client keeps every page, keyed by cursor, until a
// tools/list_changed. A refresh after another list's list_changed lists
// them beneath it only, so pages a server gives fresh cursors do not pile
// up there; after a tools/list_changed (the go-sdk cleared its pages) they
// go through it once more, and calls still carry the header.
func TestHeaderToolsListedThroughTheGoSDKOnlyAfterToolsChange(t *testing.T) {
	url, srv, regions := headerToolsServer(t, func(int64) string { return strings.Repeat("d", 1<<10) })
	s := connect(t, Request{Spec: httpSpec(url, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	sdk := watchSDKListings(s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func() {
		t.Helper()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "regional", Arguments: map[string]any{"region": "eu-west"}}, nil)
		if err != nil || res.IsError {
			t.Fatalf("CallTool: %v %+v", err, res)
		}
	}
	// What any list_changed does (prompts', resources'): list the tools again.
	const refreshes = 10
	for range refreshes {
		if _, err := s.refreshTools(ctx); err != nil {
			t.Fatalf("refreshTools: %v", err)
		}
	}
	if n, held := sdk.counts(); n != 0 || held != 0 {
		t.Errorf("%d refreshes without tools/list_changed: the go-sdk listed %d pages and holds %d of their tools, want none", refreshes, n, held)
	}
	if len(s.Tools()) != 2 {
		t.Fatalf("tools = %d, want regional and plain", len(s.Tools()))
	}
	call()

	// A tools/list_changed: the go-sdk clears its pages, tether lists
	// through it once more (the refresh it starts), and then no more.
	srv.AddTool(&mcp.Tool{Name: "third", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	for s.sdkToolsCleared.Load() == 0 || func() bool { n, _ := sdk.counts(); return n < 2 }() {
		select {
		case <-ctx.Done():
			n, _ := sdk.counts()
			t.Fatalf("after tools/list_changed: %d cleared, %d pages listed through the go-sdk; want 1 and 2", s.sdkToolsCleared.Load(), n)
		case <-time.After(10 * time.Millisecond):
		}
	}
	for range refreshes {
		if _, err := s.refreshTools(ctx); err != nil {
			t.Fatalf("refreshTools: %v", err)
		}
	}
	if n, held := sdk.counts(); n != 2 || held > 2 {
		t.Errorf("after one tools/list_changed and %d refreshes: the go-sdk listed %d pages and holds %d of their tools, want 2 and at most 2", refreshes, n, held)
	}
	call()
	if got := regions(); len(got) != 2 || got[0] != "eu-west" || got[1] != "eu-west" {
		t.Errorf("Mcp-Param-Region of the calls = %q, want eu-west twice", got)
	}
}

// A server that changes tools bound to headers without tools/list_changed
// has them listed through the go-sdk again (calls need the new
// definitions), while what piled up in the go-sdk's client since its last
// clear stays under the bound on one list; past it the session keeps the
// tools it had and says why.
func TestHeaderToolsChangedSilentlyPileUpBounded(t *testing.T) {
	url, _, _ := headerToolsServer(t, func(n int64) string { return fmt.Sprintf("v%d ", n) + strings.Repeat("d", 10<<10) })
	var logs lockedBuffer
	s := connect(t, Request{Spec: httpSpec(url, ""), MaxMessageBytes: testListBound,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	sdk := watchSDKListings(s)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := func() string {
		for _, tool := range s.Tools() {
			if tool.Name == "plain" {
				return tool.Description[:strings.Index(tool.Description, " ")]
			}
		}
		return ""
	}
	// Each list is some 10 KiB: five silent changes fit under the 64 KiB
	// bound beside the connect's list, the sixth passes it.
	for i := range 20 {
		changed, err := s.refreshTools(ctx)
		if err != nil {
			t.Fatalf("refresh %d: %v", i, err)
		}
		n, _ := sdk.counts()
		switch {
		case i < 6 && (!changed || n != 2*(i+1)):
			t.Fatalf("refresh %d: changed %v with %d pages listed through the go-sdk, want a change and %d", i, changed, n, 2*(i+1))
		case i >= 6 && (changed || n != 12):
			t.Fatalf("refresh %d: changed %v with %d pages listed through the go-sdk, want none past the bound (12 in all)", i, changed, n)
		}
	}
	if got := plain(); got != "v14" {
		t.Errorf("plain's version = %q, want v14 (the list of the sixth refresh through the go-sdk: each list went beneath it, then through it)", got)
	}
	if _, held := sdk.counts(); held > 12 {
		t.Errorf("the go-sdk holds %d tools of the refreshes' lists, want at most 12", held)
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"tools not refreshed\""); n != 1 || !strings.Contains(logs.String(), "without notifications/tools/list_changed") {
		t.Errorf("%d WARNs say why the tools were not refreshed, want one (14 refreshes past the bound):\n%s", n, logs.String())
	}
}

// A server that marks its tools/list cacheable (ttlMs) and changes tools
// bound to headers without tools/list_changed: the go-sdk answers a
// relisting from its store until the ttl runs out, with the tools the
// session already has. That answer is not the list the server now sends,
// so a later refresh lists through the go-sdk again and the session gets
// the new tools once the go-sdk asks the server.
func TestHeaderToolsChangedSilentlyWithinTheirTTL(t *testing.T) {
	regional := &mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "header-ttl", Version: "1"}, nil)
	srv.AddTool(regional, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	var version atomic.Int64
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			r := &mcp.ListToolsResult{Tools: []*mcp.Tool{regional, {Name: "plain", Description: fmt.Sprintf("v%d", version.Load()), InputSchema: map[string]any{"type": "object"}}}}
			r.TTLMs = 1000
			return r, nil
		}
	})
	s := connectModern(t, srv, Request{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	plain := func() string {
		for _, tool := range s.Tools() {
			if tool.Name == "plain" {
				return tool.Description
			}
		}
		return ""
	}
	version.Store(1) // no tools/list_changed
	// The first refresh comes within the ttl of the connect's list: the
	// go-sdk answers from its store. Refreshes go on until the ttl is out.
	deadline := time.Now().Add(10 * time.Second)
	for plain() != "v1" {
		if time.Now().After(deadline) {
			t.Fatalf("plain is still %q 10s after the change (the go-sdk's ttl is 1s), want v1 (the server's list)", plain())
		}
		if _, err := s.refreshTools(ctx); err != nil {
			t.Fatalf("refreshTools: %v", err)
		}
		time.Sleep(50 * time.Millisecond) // refreshes paced while the ttl runs out
	}
}

// A server whose tools bound to headers are small beneath the go-sdk's
// client and pass the bound on one list when the go-sdk lists them (a
// hostile one, or one changing between the two listings) fails that
// listing, but the go-sdk's client keeps the pages it was handed before
// the list passed the bound, keyed by fresh cursors. Those count toward
// what it holds: after the first such failure a refresh keeps the tools
// (one WARN) instead of piling another list's worth of pages up in the
// go-sdk's client each time any list_changed comes, for the session's
// life.
func TestHeaderToolsFailedListingsPileUpBounded(t *testing.T) {
	regional := &mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "header-hostile", Version: "1"}, nil)
	srv.AddTool(regional, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	// Once big, a list the go-sdk asks for itself (marked by the client's
	// outermost middleware, which tether's requests beneath it do not
	// pass) is pages without end.
	var big atomic.Bool
	var lists, pages atomic.Int64
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "tools/list" {
				return next(ctx, method, req)
			}
			p := req.GetParams().(*mcp.ListToolsParams)
			if p.Cursor == "" && (!big.Load() || p.Meta["test/road"] != "sdk") {
				l := lists.Add(1)
				return &mcp.ListToolsResult{Tools: []*mcp.Tool{regional, {Name: "plain", Description: fmt.Sprintf("v%d", l), InputSchema: map[string]any{"type": "object"}}}}, nil
			}
			n := pages.Add(1)
			var page []*mcp.Tool
			for i := range 4 {
				page = append(page, &mcp.Tool{Name: fmt.Sprintf("big%d_%d", n, i), Description: strings.Repeat("d", 10<<10), InputSchema: map[string]any{"type": "object"}})
			}
			return &mcp.ListToolsResult{Tools: page, NextCursor: fmt.Sprintf("fresh/%d", n)}, nil
		}
	})
	var logs lockedBuffer
	s := connectModern(t, srv, Request{MaxMessageBytes: testListBound,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	sdk := watchSDKListings(s)
	s.client.AddSendingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if p, ok := req.GetParams().(*mcp.ListToolsParams); ok && method == "tools/list" {
				if p.Meta == nil {
					p.Meta = mcp.Meta{}
				}
				p.Meta["test/road"] = "sdk"
			}
			return next(ctx, method, req)
		}
	})
	big.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := s.refreshTools(ctx); err == nil || !strings.Contains(err.Error(), listTooLarge("tools/list")) {
		t.Fatalf("the first refresh: %v, want an error with %q", err, listTooLarge("tools/list"))
	}
	first, _ := sdk.counts()
	const refreshes = 5
	for i := range refreshes {
		if _, err := s.refreshTools(ctx); err != nil {
			t.Fatalf("refresh %d after the failed one: %v, want the tools kept", i, err)
		}
	}
	if n, held := sdk.counts(); n != first || held > 4*first {
		t.Errorf("after %d more refreshes the go-sdk listed %d pages (%d in the failed one) and holds %d of their tools, want no more pages", refreshes, n, first, held)
	}
	if len(s.Tools()) != 2 {
		t.Errorf("tools = %d, want the 2 the session had", len(s.Tools()))
	}
	if n := strings.Count(logs.String(), "level=WARN msg=\"tools not refreshed\""); n != 1 {
		t.Errorf("%d WARNs say why the tools were not refreshed, want one:\n%s", n, logs.String())
	}
}
