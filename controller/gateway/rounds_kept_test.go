package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

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

// TestKeptResultsBounded: a 2026-07-28 call whose backend ends it while
// it waits for its client's next round keeps its result for that round
// (roundResultKept). Kept results are bounded as parked calls are, by
// --max-calls-in-flight, and by roundResultsKeptBytes of their bytes:
// past either the oldest is dropped, and its client's next round gets "no
// call in flight"; a result larger than the byte bound is still kept,
// alone. Before, a client with a backend that ends its calls while they
// wait had the gateway hold a result (up to --max-message-bytes each) for
// every call it parked in the last 30 s. On both paths: on the go-sdk
// path the backend's result arrives while the call is parked; on the fast
// path, which reads the call's stream in order, what ends a parked call is
// its callTimeout (the backend's result waits behind its question), and
// that outcome is what is kept.
func TestKeptResultsBounded(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "fast path", false: "go-sdk path"}[fast], func(t *testing.T) {
			testKeptResultsBounded(t, fast)
		})
	}
}

func testKeptResultsBounded(t *testing.T, fast bool) {
	// leave asks its client for roots and, once released, ends with a
	// text of size bytes, without waiting for the answer.
	release := make(chan struct{})
	srv := mcp.NewServer(&mcp.Implementation{Name: "leaver", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "leave", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			go func() { _, _ = req.Session.ListRoots(ctx, nil) }()
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			var args struct {
				Size int `json:"size"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &args)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Repeat("x", args.Size)}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := connection.Connect(ctx, connection.Request{Name: "a", Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: hs.URL}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	g := New(Options{Logger: testLogger(t), MaxCallsInFlight: 2})
	g.noFastPath.Store(!fast)
	g.rounds.mu.Lock()
	g.rounds.maxKeptBytes = 3000
	g.rounds.mu.Unlock()
	callTimeout, outcome := waitTimeout, func(size int) string { return `"text":"` + strings.Repeat("x", size) + `"` }
	if fast {
		callTimeout, outcome = time.Second, func(int) string { return "timed out after 1s" }
	}
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: s, CallTimeout: callTimeout})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")

	type asked struct {
		state, id string
		cr        *callRound
	}
	// ask makes a call of a text of size, which the backend ends while
	// it waits for its client's next round; it returns once the gateway
	// has kept (or dropped) the call's result.
	ask := func(size int) asked {
		t.Helper()
		state, id := roundQuestion(eraPost(t, url, eraCall("pa_leave", func(p, _ map[string]any) {
			p["arguments"] = map[string]any{"size": size}
		}), nil, ""))
		if state == "" {
			t.Fatal("the call was not asked the backend's question")
		}
		g.rounds.mu.Lock()
		cr := g.rounds.m[state]
		g.rounds.mu.Unlock()
		if !fast {
			release <- struct{}{}
		}
		deadline := time.Now().Add(waitTimeout)
		for {
			g.rounds.mu.Lock()
			settled := cr.kept || g.rounds.m[state] != cr
			g.rounds.mu.Unlock()
			if settled {
				return asked{state, id, cr}
			}
			if time.Now().After(deadline) {
				t.Fatal("the ended call's result was neither kept nor dropped")
			}
			time.Sleep(5 * time.Millisecond) // polling the table: no event for it
		}
	}
	// next is the client's next round of a: the call's result, or the
	// error that it is gone.
	next := func(a asked) string {
		t.Helper()
		return eraPost(t, url, eraCall("pa_leave", func(p, _ map[string]any) {
			p["requestState"] = a.state
			p["inputResponses"] = map[string]any{a.id: map[string]any{"roots": []any{}}}
		}), nil, "").Messages
	}
	kept := func() (n int, bytes int64) {
		g.rounds.mu.Lock()
		defer g.rounds.mu.Unlock()
		return len(g.rounds.kept), g.rounds.keptBytes
	}

	// By count: the third ended call drops the first.
	first, second, third := ask(10), ask(11), ask(12)
	if n, _ := kept(); n != 2 {
		t.Errorf("%d results kept at --max-calls-in-flight 2", n)
	}
	if got := next(first); !strings.Contains(got, "names no call in flight") {
		t.Errorf("the dropped call's next round: %s, want no call in flight", got)
	}
	// The timer that forgets the call at roundResultKept holds it till
	// then: what it held of the result is let go now.
	g.rounds.mu.Lock()
	if first.cr.res != nil || first.cr.raw != nil {
		t.Error("a dropped call still holds its result")
	}
	g.rounds.mu.Unlock()
	for _, c := range []struct {
		a    asked
		size int
	}{{third, 12}, {second, 11}} {
		if got := next(c.a); !strings.Contains(got, outcome(c.size)) {
			t.Errorf("a kept call's next round: %s, want its result", got)
		}
	}
	if n, b := kept(); n != 0 || b != 0 {
		t.Errorf("after their rounds took them, %d results (%d bytes) are kept, want none", n, b)
	}
	if fast {
		return // the bytes kept are the timeout's error alone
	}

	// By bytes: two results of 2000 bytes pass the 3000 the test allows,
	// and the older goes; one of 5000 is kept alone.
	fourth, fifth := ask(2000), ask(2000)
	if n, b := kept(); n != 1 || b < 2000 || b > 3000 {
		t.Errorf("%d results of %d bytes kept, want the newer of 2000", n, b)
	}
	if got := next(fourth); !strings.Contains(got, "names no call in flight") {
		t.Errorf("the call dropped for bytes: its next round got %s", got)
	}
	if got := next(fifth); !strings.Contains(got, strings.Repeat("x", 2000)) {
		t.Errorf("the newer call's next round: %.200s…, want its result", got)
	}
	sixth := ask(5000)
	if n, b := kept(); n != 1 || b < 5000 {
		t.Errorf("%d results of %d bytes kept, want the one of 5000 alone", n, b)
	}
	if got := next(sixth); !strings.Contains(got, strings.Repeat("x", 5000)) {
		t.Errorf("a result past the byte bound, alone: its next round got %.200s…", got)
	}
}
