//go:build unix

package connection

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// heldListServer is a 2026-07-28 server with a tool that binds its region
// parameter to a header, whose tools/list waits for release once hold is
// set (listing says one is waiting): it holds tether's refresh after a
// tools/list_changed. regions collects the Mcp-Param-Region of each
// tools/call.
type heldListServer struct {
	srv     *mcp.Server
	url     string
	hold    atomic.Bool
	listing chan struct{} // closed when a held tools/list came
	release chan struct{}
	fail    atomic.Bool // a released tools/list fails

	mu      sync.Mutex
	regions []string
}

func newHeldListServer(t *testing.T) *heldListServer {
	t.Helper()
	h := &heldListServer{listing: make(chan struct{}), release: make(chan struct{})}
	var once sync.Once
	h.srv = mcp.NewServer(&mcp.Implementation{Name: "header-window", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{ListChanged: true}},
	})
	h.srv.AddTool(&mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	h.srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" && h.hold.Load() {
				once.Do(func() { close(h.listing) })
				select {
				case <-h.release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
				if h.fail.Load() {
					return nil, errors.New("tools/list failed")
				}
			}
			return next(ctx, method, req)
		}
	})
	sh := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return h.srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/call" {
			h.mu.Lock()
			h.regions = append(h.regions, r.Header.Get("Mcp-Param-Region"))
			h.mu.Unlock()
		}
		sh.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	h.url = hs.URL
	return h
}

func (h *heldListServer) calls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.regions...)
}

// changeTools sends tools/list_changed with tools/list held, and returns
// once tether's refresh waits on it: the go-sdk's client has dropped the
// tools it held, and holds none until the refresh lists them again.
func (h *heldListServer) changeTools(t *testing.T, ctx context.Context, s *Session) {
	t.Helper()
	h.hold.Store(true)
	h.srv.AddTool(&mcp.Tool{Name: "third", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	select {
	case <-h.listing:
	case <-ctx.Done():
		t.Fatal("tether did not list the tools again after tools/list_changed")
	}
	if s.sdkToolsCleared.Load() == 0 {
		t.Fatal("the refresh lists, but the go-sdk saw no tools/list_changed")
	}
}

func inHeaderWait() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "(*Session).awaitToolHeaders")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A call of a tool bound to a header that comes right after the server's
// tools/list_changed, before tether's refresh listed the tools again, goes
// out with its Mcp-Param-* header: the go-sdk, which sets the headers from
// the tools it holds, holds none in that moment, and the call went without
// it (the server refused it). It waits for the refresh instead, which is
// held here until the call is seen waiting (or has gone without it).
func TestHeaderToolCallAfterToolsChangeKeepsItsHeader(t *testing.T) {
	h := newHeldListServer(t)
	s := connect(t, Request{Spec: httpSpec(h.url, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.changeTools(t, ctx, s)

	var returned atomic.Bool
	done := make(chan error, 1)
	go func() {
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "regional", Arguments: map[string]any{"region": "eu-west"}}, nil)
		if err == nil && res.IsError {
			err = errors.New("the tool answered an error")
		}
		returned.Store(true)
		done <- err
	}()
	// And a wait of its own, to see why it ends: the refresh, not the
	// bound.
	settled := make(chan bool, 1)
	go func() { settled <- s.awaitToolHeaders(ctx, "regional") }()
	waitHeaderWait(t, ctx, &returned)
	close(h.release)
	err := <-done
	if got := h.calls(); len(got) != 1 || got[0] != "eu-west" {
		t.Errorf("Mcp-Param-Region of the call made right after tools/list_changed = %q, want eu-west", got)
	}
	if err != nil {
		t.Errorf("CallTool: %v", err)
	}
	if !<-settled {
		t.Error("the wait ended with its bound, not with the refresh")
	}
}

// waitHeaderWait waits until a goroutine waits in awaitToolHeaders, or
// returned is set.
func waitHeaderWait(t *testing.T, ctx context.Context, returned *atomic.Bool) {
	t.Helper()
	for !returned.Load() && !inHeaderWait() {
		select {
		case <-ctx.Done():
			t.Fatal("the call neither returned nor waited for the refresh")
		case <-time.After(time.Millisecond):
		}
	}
}

// A refresh that fails ends the wait too (the calls go as the go-sdk sends
// them, as before), and no later call waits: no listing is to come until
// the server's next notification.
func TestHeaderToolCallWaitEndsWithAFailedRefresh(t *testing.T) {
	h := newHeldListServer(t)
	s := connect(t, Request{Spec: httpSpec(h.url, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.fail.Store(true)
	h.changeTools(t, ctx, s)
	var returned atomic.Bool
	settled := make(chan bool, 1)
	go func() {
		settled <- s.awaitToolHeaders(ctx, "regional")
		returned.Store(true)
	}()
	waitHeaderWait(t, ctx, &returned)
	close(h.release)
	if !<-settled {
		t.Error("a wait during a refresh that failed ended with its bound, not with the refresh")
	}
	for s.refreshDue() {
		select {
		case <-ctx.Done():
			t.Fatal("the refresh never ended")
		case <-time.After(time.Millisecond):
		}
	}
	s.toolsMu.Lock()
	stale := s.headersStaleLocked("regional", s.refreshDue())
	s.toolsMu.Unlock()
	if stale {
		t.Error("after the refresh failed, calls of the tool would still wait for one")
	}
}

// The wait is bounded (headerToolsWait): a refresh that never ends does
// not hold the call until its timeout; it goes out (without the header,
// which the server then refuses, as the protocol has it).
func TestHeaderToolCallWaitIsBounded(t *testing.T) {
	h := newHeldListServer(t)
	defer close(h.release)
	s := connect(t, Request{Spec: httpSpec(h.url, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.changeTools(t, ctx, s)
	callCtx, callCancel := context.WithTimeout(ctx, 10*time.Second)
	defer callCancel()
	_, err := s.CallTool(callCtx, &mcp.CallToolParams{Name: "regional", Arguments: map[string]any{"region": "eu-west"}}, nil)
	if callCtx.Err() != nil {
		t.Fatalf("the call waited for the held refresh until its deadline: %v", err)
	}
	var je *jsonrpc.Error
	if got := h.calls(); len(got) != 1 || !errors.As(err, &je) {
		t.Errorf("after the bound the call should reach the server and get its answer: calls %q, err %v", got, err)
	}
}

// A tools/list_changed is counted before the go-sdk clears the tools it
// holds (countToolsClearing), so that a call made between the go-sdk's
// clearing and its handler, which counts it after, waits as well.
func TestHeaderToolsStaleFromTheMomentTheGoSDKClears(t *testing.T) {
	h := newHeldListServer(t)
	s := connect(t, Request{Spec: httpSpec(h.url, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	stale := func() bool {
		due := s.refreshDue()
		s.toolsMu.Lock()
		defer s.toolsMu.Unlock()
		return s.headersStaleLocked("regional", due)
	}
	if stale() {
		t.Fatal("the tools are stale before any tools/list_changed")
	}
	var inside bool
	handle := s.countToolsClearing(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		inside = stale() // where the go-sdk clears, before its handler runs
		return nil, nil
	})
	if _, err := handle(context.Background(), "notifications/tools/list_changed", &mcp.ToolListChangedRequest{}); err != nil {
		t.Fatal(err)
	}
	if !inside {
		t.Error("while the go-sdk cleared its tools, a call of a tool bound to a header would not have waited")
	}
}

// A refresh that ends while a call looks at it wakes the call: the call
// read the refresh as due, and the refresh ended (its wake found no call
// waiting) before the call took the lock to wait. The call waited its
// whole bound (headerToolsWait) for a wake that had gone by. Here the test
// holds toolsMu while the call is on its way to it, and ends the refresh
// then (a refresh that failed before the go-sdk listed anything).
func TestHeaderToolCallSeesARefreshThatEndedAsItLooked(t *testing.T) {
	h := newHeldListServer(t)
	defer close(h.release)
	s := connect(t, Request{Spec: httpSpec(h.url, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.changeTools(t, ctx, s) // the refresh waits on its tools/list

	s.toolsMu.Lock()
	settled := make(chan bool, 1)
	start := time.Now()
	go func() { settled <- s.awaitToolHeaders(ctx, "regional") }()
	for !headerWaitBlockedOnToolsMu() {
		select {
		case <-ctx.Done():
			s.toolsMu.Unlock()
			t.Fatal("the call never came to toolsMu")
		case <-time.After(time.Millisecond):
		}
	}
	// The refresh ends here, as one whose listing failed: no longer due,
	// and the go-sdk still holds no tools. Its wake finds no call waiting.
	s.refreshMu.Lock()
	s.refreshing = false
	s.refreshMu.Unlock()
	s.toolsMu.Unlock()
	if !<-settled {
		t.Errorf("the call waited %v, its whole bound, for a refresh that had ended", time.Since(start).Round(time.Millisecond))
	}
}

// headerWaitBlockedOnToolsMu reports whether a goroutine in
// awaitToolHeaders waits for a mutex.
func headerWaitBlockedOnToolsMu() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			for g := range strings.SplitSeq(string(buf[:n]), "\n\n") {
				if strings.Contains(g, "(*Session).awaitToolHeaders") && strings.Contains(g, "sync.(*Mutex).Lock") {
					return true
				}
			}
			return false
		}
		buf = make([]byte, 2*len(buf))
	}
}

// A call waits for the tools to be listed again, not for the rest of the
// refresh: once the refresh listed them through the go-sdk, the call goes,
// while the refresh goes on to the prompts and resources (a slow catalog
// list held every such call until the refresh ended, up to the bound).
// Here the session lists its tools itself while the refresh it started
// stays held, so the refresh is still due when the tools are listed.
func TestHeaderToolCallGoesOnceTheToolsAreListed(t *testing.T) {
	h := newHeldListServer(t)
	defer close(h.release)
	s := connect(t, Request{Spec: httpSpec(h.url, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 {
		t.Fatalf("negotiated %s, want %s", v, protocol2026)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h.changeTools(t, ctx, s)
	var returned atomic.Bool
	settled := make(chan bool, 1)
	go func() {
		settled <- s.awaitToolHeaders(ctx, "regional")
		returned.Store(true)
	}()
	waitHeaderWait(t, ctx, &returned)
	h.hold.Store(false) // this listing is not held; the refresh's still is
	if err := s.RefreshTools(ctx); err != nil {
		t.Fatalf("RefreshTools: %v", err)
	}
	if !s.refreshDue() {
		t.Fatal("the held refresh ended: the test proves nothing")
	}
	if !<-settled {
		t.Error("the call waited its whole bound, after the tools were listed again, for the refresh to end")
	}
}
