package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/spec"
)

// richBackend is a go-sdk server that offers prompts, resources, a
// template, completion, subscriptions, logging and tools that ask their
// client for sampling, elicitation and roots, served over streamable HTTP
// and reached through connection.Session as tether reaches it.
type richBackend struct {
	name string
	srv  *mcp.Server
	url  string
	subs chan string // "subscribe <uri>" / "unsubscribe <uri>"
}

func newRichBackend(t *testing.T, name string) *richBackend {
	t.Helper()
	rb := &richBackend{name: name, subs: make(chan string, 16)}
	rb.srv = mcp.NewServer(&mcp.Implementation{Name: name, Version: "1"}, &mcp.ServerOptions{
		CompletionHandler: func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
			ref := req.Params.Ref
			return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{
				Values: []string{name + ":" + ref.Type + ":" + ref.Name + ref.URI}}}, nil
		},
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			rb.subs <- "subscribe " + req.Params.URI
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			rb.subs <- "unsubscribe " + req.Params.URI
			return nil
		},
	})
	rb.srv.AddPrompt(&mcp.Prompt{Name: "greet", Arguments: []*mcp.PromptArgument{{Name: "who"}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user",
				Content: &mcp.TextContent{Text: name + " greets " + req.Params.Arguments["who"]}}}}, nil
		})
	read := func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, Text: name + " reads " + req.Params.URI}}}, nil
	}
	rb.srv.AddResource(&mcp.Resource{Name: "own", URI: "res://" + name + "/own"}, read)
	rb.srv.AddResource(&mcp.Resource{Name: "shared", URI: "res://shared"}, read)
	rb.srv.AddResourceTemplate(&mcp.ResourceTemplate{Name: "item", URITemplate: "item://" + name + "/{id}"}, read)
	rb.srv.AddTool(&mcp.Tool{Name: "log", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: name + " is working"})
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: name + " debug detail"})
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "logged"}}}, nil
		})
	rb.srv.AddTool(&mcp.Tool{Name: "sample", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.CreateMessage(ctx, &mcp.CreateMessageParams{MaxTokens: 10,
				Messages: []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: "from " + name}}}})
			if err != nil {
				return nil, fmt.Errorf("sampling failed: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "LLM: " + res.Content.(*mcp.TextContent).Text}}}, nil
		})
	rb.srv.AddTool(&mcp.Tool{Name: "elicit", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "name?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
			if err != nil {
				return nil, fmt.Errorf("elicitation failed: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("%s %v", res.Action, res.Content["name"])}}}, nil
		})
	rb.srv.AddTool(&mcp.Tool{Name: "roots", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.ListRoots(ctx, nil)
			if err != nil {
				return nil, fmt.Errorf("roots failed: %w", err)
			}
			var uris []string
			for _, r := range res.Roots {
				uris = append(uris, r.URI)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(uris, ",")}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return rb.srv }, nil))
	t.Cleanup(hs.Close)
	rb.url = hs.URL
	return rb
}

// connect opens a tether session to the backend.
func (rb *richBackend) connect(t *testing.T) *connection.Session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	s, err := connection.Connect(ctx, connection.Request{Name: rb.name, Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: rb.url}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// richClient is a gateway client that declares sampling, elicitation and
// roots, answers them, and records what the gateway sends it.
type richClient struct {
	cs      *mcp.ClientSession
	logs    chan *mcp.LoggingMessageParams
	updates chan string
	changed chan string // "prompts" / "resources"
	// sampling, when set, replaces the sampling answer (e.g. never answers).
	sampling func(ctx context.Context) (*mcp.CreateMessageResult, error)
}

func dialRich(t *testing.T, url, version string, tweak func(*richClient)) *richClient {
	t.Helper()
	return dialRichOn(t, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, version, tweak)
}

func dialRichOn(t *testing.T, transport mcp.Transport, version string, tweak func(*richClient)) *richClient {
	t.Helper()
	rc := &richClient{logs: make(chan *mcp.LoggingMessageParams, 64), updates: make(chan string, 16), changed: make(chan string, 64)}
	if tweak != nil {
		tweak(rc)
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "rich-agent", Version: "0"}, &mcp.ClientOptions{
		CreateMessageHandler: func(ctx context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			if rc.sampling != nil {
				return rc.sampling(ctx)
			}
			text := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "answer to " + text}}, nil
		},
		ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"name": "Ada"}}, nil
		},
		LoggingMessageHandler:      func(_ context.Context, req *mcp.LoggingMessageRequest) { rc.logs <- req.Params },
		ResourceUpdatedHandler:     func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) { rc.updates <- req.Params.URI },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { rc.changed <- "prompts" },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { rc.changed <- "resources" },
	})
	c.AddRoots(&mcp.Root{URI: "file:///work/project", Name: "project"})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var opts *mcp.ClientSessionOptions
	if _, http := transport.(*mcp.StreamableClientTransport); http {
		opts = classicSession
	}
	if version != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := c.Connect(ctx, transport, opts)
	if err != nil {
		t.Fatalf("connect to gateway: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	rc.cs = cs
	return rc
}

func (rc *richClient) promptNames(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var names []string
	for p, err := range rc.cs.Prompts(ctx, nil) {
		if err != nil {
			t.Fatalf("prompts/list: %v", err)
		}
		names = append(names, p.Name)
	}
	slices.Sort(names)
	return names
}

func (rc *richClient) resourceURIs(t *testing.T) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var uris []string
	for r, err := range rc.cs.Resources(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/list: %v", err)
		}
		uris = append(uris, r.URI)
	}
	for r, err := range rc.cs.ResourceTemplates(ctx, nil) {
		if err != nil {
			t.Fatalf("resources/templates/list: %v", err)
		}
		uris = append(uris, r.URITemplate)
	}
	slices.Sort(uris)
	return uris
}

// waitChanged waits until a list_changed for each of what arrived.
func (rc *richClient) waitChanged(t *testing.T, what ...string) {
	t.Helper()
	deadline := time.After(waitTimeout)
	for len(what) > 0 {
		select {
		case got := <-rc.changed:
			what = slices.DeleteFunc(what, func(w string) bool { return w == got })
		case <-deadline:
			t.Fatalf("no list_changed for %v", what)
		}
	}
}

func rpcCode(err error) int64 {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code
	}
	return 0
}

// TestCatalogPassesThrough: two backends behind the gateway, prefixes on:
// prompts, resources, templates, completion and subscriptions reach their
// owner; collisions are reported; what leaves with a connection leaves the
// lists with list_changed, and a request for it says why.
func TestCatalogPassesThrough(t *testing.T) {
	a, b := newRichBackend(t, "a"), newRichBackend(t, "b")
	var collisions sync.WaitGroup
	collisions.Add(1)
	var once sync.Once
	g := New(Options{Logger: testLogger(t), OnCollisionsChanged: func() { once.Do(collisions.Done) }})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	sa, sb := a.connect(t), b.connect(t)
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: sa})
	g.Set(Connection{Name: "b", Prefix: "pb", Backend: sb})
	collisions.Wait()
	rc := dialRich(t, url, "", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()

	if got, want := rc.promptNames(t), []string{"pa_greet", "pb_greet"}; !slices.Equal(got, want) {
		t.Errorf("prompts %v, want %v", got, want)
	}
	if got, want := rc.resourceURIs(t), []string{"item://a/{id}", "item://b/{id}", "res://a/own", "res://b/own", "res://shared"}; !slices.Equal(got, want) {
		t.Errorf("resources and templates %v, want %v", got, want)
	}
	if got, want := g.Collisions("b"), []spec.ToolCollision{{Tool: "resource:res://shared", Connection: "a"}}; !slices.Equal(got, want) {
		t.Errorf("Collisions(b) = %v, want %v", got, want)
	}
	// Reported on both sides: a keeps it against b.
	if got, want := g.Collisions("a"), []spec.ToolCollision{{Tool: "resource:res://shared", Connection: "b", Kept: true}}; !slices.Equal(got, want) {
		t.Errorf("Collisions(a) = %v, want %v", got, want)
	}
	exposed := func(name string, prompts, resources, templates int) {
		t.Helper()
		x := g.Exposure(name)
		if x.Prompts != prompts || x.Resources != resources || x.ResourceTemplates != templates {
			t.Errorf("Exposure(%s) = %+v, want %d prompts, %d resources, %d templates", name, x, prompts, resources, templates)
		}
	}
	exposed("a", 1, 2, 1)
	exposed("b", 1, 1, 1) // res://shared is a's

	t.Run("prompts/get by prefixed name", func(t *testing.T) {
		res, err := rc.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "pb_greet", Arguments: map[string]string{"who": "Ada"}})
		if err != nil || len(res.Messages) != 1 || res.Messages[0].Content.(*mcp.TextContent).Text != "b greets Ada" {
			t.Fatalf("pb_greet = %+v, %v", res, err)
		}
	})
	t.Run("resources/read by owner", func(t *testing.T) {
		for uri, want := range map[string]string{
			"res://b/own":  "b reads res://b/own",
			"res://shared": "a reads res://shared", // the first connection by name keeps it
			"item://b/42":  "b reads item://b/42",  // through b's template
			"item://a/7":   "a reads item://a/7",
		} {
			res, err := rc.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			if err != nil || len(res.Contents) != 1 || res.Contents[0].Text != want {
				t.Errorf("read %s = %+v, %v; want %q", uri, res, err, want)
			}
		}
	})
	t.Run("resources/read of a URI nobody owns", func(t *testing.T) {
		_, err := rc.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://nobody/x"})
		if code := rpcCode(err); code != mcp.CodeResourceNotFound {
			t.Fatalf("read of an unknown URI: %v (code %d), want %d", err, code, mcp.CodeResourceNotFound)
		}
	})
	t.Run("completion by owner", func(t *testing.T) {
		res, err := rc.cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "pb_greet"},
			Argument: mcp.CompleteParamsArgument{Name: "who", Value: "A"}})
		if err != nil || !slices.Equal(res.Completion.Values, []string{"b:ref/prompt:greet"}) {
			t.Errorf("prompt completion = %+v, %v", res, err)
		}
		res, err = rc.cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/resource", URI: "item://a/{id}"},
			Argument: mcp.CompleteParamsArgument{Name: "id", Value: "1"}})
		if err != nil || !slices.Equal(res.Completion.Values, []string{"a:ref/resource:item://a/{id}"}) {
			t.Errorf("template completion = %+v, %v", res, err)
		}
	})
	t.Run("subscribe, update, unsubscribe", func(t *testing.T) {
		if err := rc.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/9"}); err != nil {
			t.Fatal(err)
		}
		if got := <-b.subs; got != "subscribe item://b/9" {
			t.Fatalf("backend b saw %q", got)
		}
		if err := b.srv.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "item://b/9"}); err != nil {
			t.Fatal(err)
		}
		select {
		case uri := <-rc.updates:
			if uri != "item://b/9" {
				t.Errorf("update for %q", uri)
			}
		case <-ctx.Done():
			t.Fatal("the resource update never reached the subscribed client")
		}
		if err := rc.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "item://b/9"}); err != nil {
			t.Fatal(err)
		}
		if got := <-b.subs; got != "unsubscribe item://b/9" {
			t.Fatalf("backend b saw %q", got)
		}
	})
	t.Run("a client that leaves without unsubscribing", func(t *testing.T) {
		gone := dialRich(t, url, "", nil)
		if err := gone.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "item://b/8"}); err != nil {
			t.Fatal(err)
		}
		if got := <-b.subs; got != "subscribe item://b/8" {
			t.Fatalf("backend b saw %q", got)
		}
		gone.cs.Close()
		// The gateway's session ends once the client's DELETE is served;
		// then pruning drops the subscription nobody holds.
		deadline := time.Now().Add(waitTimeout)
		for {
			g.pruneSubscriptions(ctx)
			select {
			case got := <-b.subs:
				if got != "unsubscribe item://b/8" {
					t.Fatalf("backend b saw %q", got)
				}
				return
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatal("the backend kept a subscription of a client that left")
			}
		}
	})
	t.Run("a connection that goes away", func(t *testing.T) {
		g.SetUnavailable("b", "pb", "ping timeout")
		rc.waitChanged(t, "prompts", "resources")
		if got, want := rc.promptNames(t), []string{"pa_greet"}; !slices.Equal(got, want) {
			t.Errorf("prompts %v, want %v", got, want)
		}
		if got, want := rc.resourceURIs(t), []string{"item://a/{id}", "res://a/own", "res://shared"}; !slices.Equal(got, want) {
			t.Errorf("resources %v, want %v", got, want)
		}
		_, err := rc.cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "pb_greet"})
		if msg := rpcMessage(err); msg != "connection b is not connected: ping timeout" {
			t.Errorf("prompt of a Reconnecting connection: %v", err)
		}
		_, err = rc.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://b/own"})
		if msg := rpcMessage(err); msg != "connection b is not connected: ping timeout" {
			t.Errorf("resource of a Reconnecting connection: %v", err)
		}
		if got := g.Collisions("b"); got != nil {
			t.Errorf("Collisions(b) while unavailable = %v", got)
		}
		exposed("b", 0, 0, 0)
		g.Set(Connection{Name: "b", Prefix: "pb", Backend: sb})
		rc.waitChanged(t, "prompts", "resources")
		if got, want := rc.promptNames(t), []string{"pa_greet", "pb_greet"}; !slices.Equal(got, want) {
			t.Errorf("prompts after reconnect %v, want %v", got, want)
		}
		g.Remove("a")
		rc.waitChanged(t, "resources")
		if got := g.Collisions("b"); got != nil {
			t.Errorf("Collisions(b) once a left = %v", got)
		}
		exposed("b", 1, 2, 1)
		exposed("a", 0, 0, 0)
		res, err := rc.cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "res://shared"})
		if err != nil || res.Contents[0].Text != "b reads res://shared" {
			t.Errorf("res://shared after a left = %+v, %v", res, err)
		}
	})
}

// TestBackendRequestsRelayed: a backend's sampling, elicitation and roots
// requests and its log messages, sent while it serves a call, reach the
// client that made the call, through the fast path and through the go-sdk.
func TestBackendRequestsRelayed(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(fmt.Sprintf("fast=%v", fast), func(t *testing.T) {
			a, b := newRichBackend(t, "a"), newRichBackend(t, "b")
			g := New(Options{Logger: testLogger(t)})
			g.noFastPath.Store(!fast)
			url, _ := serveOn(t, g, "127.0.0.1:0", "")
			g.Set(Connection{Name: "a", Prefix: "pa", Backend: a.connect(t)})
			g.Set(Connection{Name: "b", Prefix: "pb", Backend: b.connect(t)})
			// The backends negotiate 2025-11-25: a client of that version
			// takes the fast path.
			rc := dialRich(t, url, "2025-11-25", nil)
			ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
			defer cancel()
			before := g.fastCalls.Load()
			call := func(name string) string {
				t.Helper()
				res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if res.IsError {
					t.Fatalf("%s: error result %q", name, textOf(res))
				}
				return textOf(res)
			}
			if got := call("pa_sample"); got != "LLM: answer to from a" {
				t.Errorf("pa_sample = %q", got)
			}
			if got := call("pb_elicit"); got != "accept Ada" {
				t.Errorf("pb_elicit = %q", got)
			}
			if got := call("pb_roots"); got != "file:///work/project" {
				t.Errorf("pb_roots = %q", got)
			}
			if err := rc.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: "info"}); err != nil {
				t.Fatal(err)
			}
			call("pb_log")
			select {
			case lm := <-rc.logs:
				if lm.Data != "b is working" || lm.Logger != "b" || lm.Level != "info" {
					t.Errorf("log message %+v, want b's info with logger b", lm)
				}
			case <-ctx.Done():
				t.Fatal("no log message during the call")
			}
			select {
			case lm := <-rc.logs:
				t.Errorf("a message below the client's level reached it: %+v", lm)
			default:
			}
			if fast && g.fastCalls.Load() == before {
				t.Error("no call took the fast path")
			}
			if !fast && g.fastCalls.Load() != before {
				t.Error("a call took the fast path")
			}
		})
	}
}

// TestBackendRequestBadCases: a backend request with no call behind it, a
// client that did not declare the capability, and a client that never
// answers (bounded by callTimeout, its request cancelled).
func TestBackendRequestBadCases(t *testing.T) {
	a := newRichBackend(t, "a")
	g := New(Options{Logger: testLogger(t)})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: a.connect(t), CallTimeout: 500 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()

	t.Run("no call behind it", func(t *testing.T) {
		var ss *mcp.ServerSession
		for s := range a.srv.Sessions() {
			ss = s
		}
		if ss == nil {
			t.Fatal("the backend has no session")
		}
		_, err := ss.ListRoots(ctx, nil)
		if err == nil || !strings.Contains(err.Error(), "no request of a client is in flight") {
			t.Fatalf("roots/list with no call: %v", err)
		}
	})
	t.Run("capability not declared", func(t *testing.T) {
		c := mcp.NewClient(&mcp.Implementation{Name: "plain-agent", Version: "0"}, &mcp.ClientOptions{Capabilities: &mcp.ClientCapabilities{}})
		cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, MaxRetries: -1}, classicSession)
		if err != nil {
			t.Fatal(err)
		}
		defer cs.Close()
		_, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_sample"})
		if msg := rpcMessage(err); !strings.Contains(msg, "did not declare the capability") {
			t.Fatalf("sampling for a client without it: %v", err)
		}
	})
	// On both paths: the go-sdk sends the cancellation from a goroutine
	// (see sdkgaps.go); the fast path writes its own.
	for _, sdkPath := range []bool{false, true} {
		t.Run(map[bool]string{false: "client never answers", true: "client never answers, go-sdk path"}[sdkPath], func(t *testing.T) {
			g.noFastPath.Store(sdkPath)
			defer g.noFastPath.Store(false)
			handlerDone, giveUp := make(chan error, 1), make(chan struct{})
			rc := dialRich(t, url, "", func(rc *richClient) {
				rc.sampling = func(ctx context.Context) (*mcp.CreateMessageResult, error) {
					select { // never answers; the gateway must give up
					case <-ctx.Done():
						handlerDone <- ctx.Err()
						return nil, ctx.Err()
					case <-giveUp: // a failed test: the client's Close waits for this handler
						return nil, errors.New("the test ended")
					}
				}
			})
			t.Cleanup(func() { close(giveUp) }) // before the client's Close
			start := time.Now()
			_, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_sample"})
			if msg := rpcMessage(err); !strings.Contains(msg, "timed out after 500ms") {
				t.Fatalf("call whose client never answers sampling: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("the call took %v, callTimeout is 500ms", d)
			}
			select {
			case <-handlerDone: // the client's request was cancelled
			case <-ctx.Done():
				t.Fatal("the client's sampling request was never cancelled")
			}
			// The gateway serves on: the backend and the session are fine.
			res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_roots"})
			if err != nil || textOf(res) != "file:///work/project" {
				t.Fatalf("a call after the timeout: %+v, %v", res, err)
			}
		})
	}
}

// TestBackendRequestsInRounds: a client of the 2026-07-28 protocol takes no
// requests from its server; a classic backend's sampling, elicitation and
// roots reach it as input-required results and its answers go back to the
// waiting backend call (the go-sdk client retries by itself).
func TestBackendRequestsInRounds(t *testing.T) {
	a := newRichBackend(t, "a")
	g := New(Options{Logger: testLogger(t)})
	g.Set(Connection{Name: "a", Prefix: "pa", Backend: a.connect(t), CallTimeout: 2 * time.Second})
	ct, st := mcp.NewInMemoryTransports()
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- g.serveTransport(ctx, st, "stdio") }()
	rc := dialRichOn(t, ct, "", nil)
	if v := rc.cs.InitializeResult().ProtocolVersion; v < modernProtocol {
		t.Fatalf("the client negotiated %s: this test needs %s", v, modernProtocol)
	}
	for name, want := range map[string]string{
		"pa_sample": "LLM: answer to from a",
		"pa_elicit": "accept Ada",
		"pa_roots":  "file:///work/project",
	} {
		res, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: name})
		if err != nil || res.IsError || textOf(res) != want {
			t.Errorf("%s = %+v, %v; want %q", name, res, err, want)
		}
	}
	// A state the gateway never issued (or that expired) is refused.
	_, err := rc.cs.CallTool(ctx, &mcp.CallToolParams{Name: "pa_sample", RequestState: roundStatePrefix + "999"})
	if msg := rpcMessage(err); !strings.Contains(msg, "names no call in flight") {
		t.Errorf("unknown requestState: %v", err)
	}
	g.rounds.mu.Lock()
	left := len(g.rounds.m)
	g.rounds.mu.Unlock()
	if left != 0 {
		t.Errorf("%d calls in rounds left behind", left)
	}
	rc.cs.Close()
	cancel()
	<-served
}
