package gateway

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// waitFor polls cond until it holds, failing after waitTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFirstListWaitsForFirstOutcomes: a list sent before the first
// outcomes are in waits for them and answers with what came up meanwhile;
// tools/list, prompts/list, resources/list and resources/templates/list
// alike; once they are in, nothing waits.
func TestFirstListWaitsForFirstOutcomes(t *testing.T) {
	for _, method := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		t.Run(method, func(t *testing.T) {
			first := make(chan struct{})
			g, hs := newTestGateway(t, Options{FirstAnswer: first, FirstAnswerTimeout: time.Hour})
			d := dial(t, g, hs)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			type answer struct {
				n   int
				err error
			}
			got := make(chan answer, 1)
			go func() {
				var a answer
				switch method {
				case "tools/list":
					r, err := d.cs.ListTools(ctx, nil)
					if a.err = err; err == nil {
						a.n = len(r.Tools)
					}
				case "prompts/list":
					r, err := d.cs.ListPrompts(ctx, nil)
					if a.err = err; err == nil {
						a.n = len(r.Prompts)
					}
				case "resources/list":
					r, err := d.cs.ListResources(ctx, nil)
					if a.err = err; err == nil {
						a.n = len(r.Resources)
					}
				case "resources/templates/list":
					_, a.err = d.cs.ListResourceTemplates(ctx, nil)
					a.n = 1
				}
				got <- a
			}()
			waitFor(t, "the list waits", func() bool { return g.firstWaiting.Load() == 1 })
			tools := []*mcp.Tool{{Name: "echo", InputSchema: objectSchema}}
			fb := &fakeBackend{tools: tools, prompts: []*mcp.Prompt{{Name: "greet"}}, resources: []*mcp.Resource{{URI: "file:///a", Name: "a"}}}
			g.Set(Connection{Name: "late", Prefix: "late", Backend: fb})
			select {
			case a := <-got:
				t.Fatalf("answered before the first outcomes were in: %+v", a)
			default:
			}
			close(first)
			a := <-got
			if a.err != nil {
				t.Fatal(a.err)
			}
			if a.n != 1 {
				t.Fatalf("%s after the wait: %d entries, want the late connection's 1", method, a.n)
			}
			if !g.answered.Load() {
				t.Fatal("lists still wait after the first outcomes")
			}
		})
	}
}

// TestFirstListWaitIsBounded: without first outcomes, a list answers after
// FirstAnswerTimeout with what is served, and later lists do not wait.
func TestFirstListWaitIsBounded(t *testing.T) {
	g, hs := newTestGateway(t, Options{FirstAnswer: make(chan struct{}), FirstAnswerTimeout: 50 * time.Millisecond})
	d := dial(t, g, hs)
	if names := d.toolNames(t); len(names) != 0 {
		t.Fatalf("tools: %v", names)
	}
	if !g.answered.Load() {
		t.Fatal("a list after the bound would wait again")
	}
}

// TestFirstListWaitEndsWithItsClient: a client that goes away while its
// list waits frees the wait over HTTP (endWithPOST). Over stdio a
// client that goes away closes stdin, which ends tether run.
func TestFirstListWaitEndsWithItsClient(t *testing.T) {
	t.Run("http", func(t *testing.T) {
		g := New(Options{Logger: testLogger(t), FirstAnswer: make(chan struct{}), FirstAnswerTimeout: time.Hour})
		url, _ := serveOn(t, g, "127.0.0.1:0", "")
		ctx, cancel := context.WithCancel(context.Background())
		c := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "0"}, nil)
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, classicSession)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		done := make(chan error, 1)
		go func() { _, err := cs.ListTools(ctx, nil); done <- err }()
		waitFor(t, "the list waits", func() bool { return g.firstWaiting.Load() == 1 })
		cancel()
		<-done
		waitFor(t, "the wait ends with its client", func() bool { return g.firstWaiting.Load() == 0 })
	})
}

// TestModernEraOverHTTP: the go-sdk client of the 2026-07-28 protocol
// finds it in server/discover over streamable HTTP, and lists and calls;
// a classic client on the same endpoint keeps its session.
func TestModernEraOverHTTP(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	be, tools, _ := newTestBackend("one").connect(t)
	g.Set(Connection{Name: "one", Prefix: "one", Backend: withTools(be, tools)})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := mcp.NewClient(&mcp.Implementation{Name: "modern-agent", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: hs.URL, MaxRetries: -1}, &mcp.ClientSessionOptions{ProtocolVersion: modernProtocol})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ProtocolVersion; v != modernProtocol {
		t.Fatalf("negotiated %s over HTTP, want %s", v, modernProtocol)
	}
	lr, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(lr.Tools, func(tl *mcp.Tool) bool { return tl.Name == "one_echo" }) {
		t.Fatalf("tools at %s: %v", modernProtocol, lr.Tools)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "one_echo", Arguments: map[string]any{"msg": "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := textOf(res); got == "" {
		t.Fatalf("call at %s: %+v", modernProtocol, res)
	}
	d := dial(t, g, hs)
	if d.cs.ID() == "" {
		t.Fatal("a classic client got no session")
	}
}

// TestFirstListWaitersAreBounded: at most Options.MaxConnections lists
// wait at once (an SSE client POSTs as many as it likes); one past that
// is answered at once with what is served.
func TestFirstListWaitersAreBounded(t *testing.T) {
	first := make(chan struct{})
	g, hs := newTestGateway(t, Options{FirstAnswer: first, FirstAnswerTimeout: time.Hour, MaxConnections: 2})
	defer close(first) // ends the two waits, whose client stays
	d := dial(t, g, hs)
	for range 2 {
		go d.cs.ListTools(context.Background(), nil)
	}
	waitFor(t, "two lists wait", func() bool { return g.firstWaiting.Load() == 2 })
	quick, stop := context.WithTimeout(context.Background(), waitTimeout)
	defer stop()
	if _, err := d.cs.ListTools(quick, nil); err != nil {
		t.Fatalf("a list past the bound of waiting lists: %v (want an answer at once)", err)
	}
	if g.firstWaiting.Load() != 2 {
		t.Fatalf("%d lists wait, want the first 2", g.firstWaiting.Load())
	}
}
