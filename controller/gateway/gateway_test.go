package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/spec"
)

func TestListing(t *testing.T) {
	all := []string{"block", "echo", "fail", "progress"}
	tests := []struct {
		name   string
		prefix string
		filter *spec.ToolFilter
		want   []string
	}{
		{name: "prefix", prefix: "gh", want: []string{"gh_block", "gh_echo", "gh_fail", "gh_progress"}},
		{name: "empty prefix keeps names", prefix: "", want: all},
		{name: "allow", prefix: "p", filter: &spec.ToolFilter{Allow: []string{"e*", "fail"}}, want: []string{"p_echo", "p_fail"}},
		{name: "deny", prefix: "p", filter: &spec.ToolFilter{Deny: []string{"b*", "p?ogress"}}, want: []string{"p_echo", "p_fail"}},
		{name: "deny wins over allow", prefix: "p", filter: &spec.ToolFilter{Allow: []string{"*"}, Deny: []string{"echo"}}, want: []string{"p_block", "p_fail", "p_progress"}},
		{name: "allow nothing", prefix: "p", filter: &spec.ToolFilter{Allow: []string{"nomatch"}}, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, hs := newTestGateway(t, Options{})
			be, tools, _ := newTestBackend("one").connect(t)
			g.Set(Connection{Name: "one", Prefix: tt.prefix, Filter: tt.filter, Backend: withTools(be, tools)})
			d := dial(t, g, hs)
			if got := d.toolNames(t); !slices.Equal(got, tt.want) {
				t.Errorf("tools/list = %v, want %v", got, tt.want)
			}
			if got := g.Exposed("one"); got != len(tt.want) {
				t.Errorf("Exposed = %d, want %d", got, len(tt.want))
			}
		})
	}
}

// The published definition is the backend's, renamed: description, input
// schema and annotations unchanged.
func TestListingKeepsDefinition(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	be, tools, _ := newTestBackend("one").connect(t)
	g.Set(Connection{Name: "one", Prefix: "x", Backend: withTools(be, tools)})
	var echo *mcp.Tool
	for _, tool := range dial(t, g, hs).tools(t) {
		if tool.Name == "x_echo" {
			echo = tool
		}
	}
	if echo == nil {
		t.Fatal("x_echo not listed")
	}
	if echo.Description != "echoes one" {
		t.Errorf("description = %q", echo.Description)
	}
	if echo.Annotations == nil || !echo.Annotations.ReadOnlyHint || echo.Annotations.Title != "Echo" {
		t.Errorf("annotations = %+v", echo.Annotations)
	}
	got, _ := json.Marshal(echo.InputSchema)
	if want := `{"properties":{"msg":{"type":"string"}},"type":"object"}`; string(got) != want {
		t.Errorf("input schema = %s, want %s", got, want)
	}
	for _, tool := range tools {
		if strings.HasPrefix(tool.Name, "x_") {
			t.Errorf("backend's tool %q was renamed in place", tool.Name)
		}
	}
}

// Schemas the SDK server would panic on are repaired, never dropped.
func TestSchemasNormalised(t *testing.T) {
	tools := []*mcp.Tool{
		{Name: "nil_schema"},
		{Name: "no_type", InputSchema: map[string]any{"properties": map[string]any{"a": map[string]any{"type": "string"}}}},
		{Name: "string_type", InputSchema: map[string]any{"type": "string"}},
		{Name: "nullable_object", InputSchema: map[string]any{"type": []any{"object", "null"}}},
		{Name: "raw_empty", InputSchema: json.RawMessage(`{}`)},
		{Name: "not_object", InputSchema: json.RawMessage(`true`)},
		{Name: "bad_header", InputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"a": map[string]any{"type": "object", "x-mcp-header": "X-A"}}}},
		{Name: "output_array", InputSchema: map[string]any{"type": "object"}, OutputSchema: map[string]any{"type": "array"}},
	}
	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "odd", Prefix: "", Backend: withTools(&fakeBackend{}, tools)})
	listed := dial(t, g, hs).tools(t)
	if len(listed) != len(tools) {
		t.Fatalf("listed %d tools, want %d", len(listed), len(tools))
	}
	for _, tool := range listed {
		m, ok := tool.InputSchema.(map[string]any)
		if !ok || m["type"] != "object" {
			t.Errorf("%s: input schema %v has no object type", tool.Name, tool.InputSchema)
		}
		if tool.Name == "no_type" && m["properties"] == nil {
			t.Errorf("no_type lost its properties: %v", m)
		}
		if tool.Name == "output_array" && tool.OutputSchema == nil {
			t.Errorf("output_array lost its output schema")
		}
	}
	if tools[1].InputSchema.(map[string]any)["type"] != nil {
		t.Error("normalisation mutated the backend's schema")
	}
	if g.Exposed("odd") != len(tools) {
		t.Errorf("Exposed = %d, want %d", g.Exposed("odd"), len(tools))
	}
}

func TestRoutingTwoBackends(t *testing.T) {
	obs := &observed{}
	g, hs := newTestGateway(t, Options{ObserveCall: obs.observe})
	tbA, tbB := newTestBackend("a"), newTestBackend("b")
	beA, toolsA, _ := tbA.connect(t)
	beB, toolsB, _ := tbB.connect(t)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: withTools(beA, toolsA)})
	g.Set(Connection{Name: "b", Prefix: "bee", Backend: withTools(beB, toolsB)})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()

	// A number beyond float64 precision survives only if the bytes are
	// forwarded as they came.
	args := json.RawMessage(`{"msg":"hi","big":12345678901234567890123,"nested":{"x":[1,2.50,"s"]}}`)
	for _, tc := range []struct {
		tool string
		be   *testBackend
	}{{"a_echo", tbA}, {"bee_echo", tbB}} {
		res, err := d.call(ctx, tc.tool, args)
		if err != nil {
			t.Fatalf("%s: %v", tc.tool, err)
		}
		if want := tc.be.name + ":"; !strings.HasPrefix(textOf(res), want) {
			t.Errorf("%s answered %q, want it from backend %s", tc.tool, textOf(res), tc.be.name)
		}
		rec := <-tc.be.calls
		if rec.Tool != "echo" {
			t.Errorf("%s reached backend tool %q, want echo", tc.tool, rec.Tool)
		}
		var want bytes.Buffer
		json.Compact(&want, args)
		if !bytes.Equal(rec.Args, want.Bytes()) {
			t.Errorf("%s: backend got arguments %s, want %s", tc.tool, rec.Args, want.Bytes())
		}
	}

	// A tool's own failure comes back as the backend's result.
	// The caller's _meta stays at the gateway (the backend's own client may
	// add its protocol's keys).
	p := &mcp.CallToolParams{Name: "a_echo", Arguments: map[string]any{}, Meta: mcp.Meta{"com.example/trace": "t-1"}}
	if _, err := d.cs.CallTool(ctx, p); err != nil {
		t.Fatal(err)
	}
	if rec := <-tbA.calls; rec.Meta["com.example/trace"] != nil {
		t.Errorf("backend got the caller's _meta: %v", rec.Meta)
	}

	res, err := d.call(ctx, "a_fail", map[string]any{})
	if err != nil || !res.IsError || textOf(res) != "failed on purpose" {
		t.Errorf("a_fail = %+v, %v; want the backend's isError result", res, err)
	}
	if !obs.has("a/ok") || !obs.has("b/ok") || !obs.has("a/error") {
		t.Errorf("ObserveCall saw %v, want a/ok, b/ok and a/error", obs.calls)
	}
}

func TestListChanged(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	tb := newTestBackend("a")
	be, tools, _ := tb.connect(t)
	d1, d2 := dial(t, g, hs), dial(t, g, hs)
	conn := Connection{Name: "a", Prefix: "a", Backend: withTools(be, tools)}

	step := func(why string, change func(), want []string) {
		t.Helper()
		change()
		d1.waitChanged(t, why)
		d2.waitChanged(t, why)
		if got := d1.toolNames(t); !slices.Equal(got, want) {
			t.Fatalf("after %s: tools %v, want %v", why, got, want)
		}
	}
	step("connect", func() { g.Set(conn) }, []string{"a_block", "a_echo", "a_fail", "a_progress"})

	// Identical Sets, also with a fresh but equal tool list (what a
	// reconnect or a resync hands over), touch nothing on the server.
	before := g.toolChangesForTest()
	g.Set(conn)
	var copied []*mcp.Tool
	for _, tool := range tools {
		cp := *tool
		copied = append(copied, &cp)
	}
	be.setTools(copied)
	g.Set(conn)
	if after := g.toolChangesForTest(); after != before {
		t.Fatalf("identical Set changed the server's tools %d times", after-before)
	}

	filtered := conn
	filtered.Filter = &spec.ToolFilter{Deny: []string{"block", "fail"}}
	step("filter edit", func() { g.Set(filtered) }, []string{"a_echo", "a_progress"})

	renamed := filtered
	renamed.Prefix = "z"
	step("prefix edit", func() { g.Set(renamed) }, []string{"z_echo", "z_progress"})

	// The backend's own list_changed: the reconciler re-lists and Sets.
	tb.srv.AddTool(&mcp.Tool{Name: "late", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	_, relisted, _ := tb.connect(t)
	grown := renamed
	step("backend list change", func() { be.setTools(relisted); g.Set(grown) }, []string{"z_echo", "z_late", "z_progress"})

	step("unavailable", func() { g.SetUnavailable("a", "z", "ping timeout") }, nil)
	step("reconnect", func() { g.Set(grown) }, []string{"z_echo", "z_late", "z_progress"})
	step("remove", func() { g.Remove("a") }, nil)

	// The absence of a notification for the identical Sets above: all the
	// notifications received were accounted for one per step, and none is
	// left over once the server is quiet.
	select {
	case <-d1.changed:
		t.Error("an extra tools/list_changed arrived")
	case <-time.After(100 * time.Millisecond): // > the SDK's 10ms debounce
	}
}

// A client on the 2026-07-28 protocol (subscriptions/listen) is told too.
func TestListChangedNewProtocol(t *testing.T) {
	g, _ := newTestGateway(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := g.Server().Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	changed := make(chan struct{}, 8)
	c := mcp.NewClient(&mcp.Implementation{Name: "new", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := c.Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	t.Logf("protocol %s", cs.InitializeResult().ProtocolVersion)
	be, tools, _ := newTestBackend("a").connect(t)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: withTools(be, tools)})
	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no tools/list_changed on the new protocol")
	}
}

func TestCollisions(t *testing.T) {
	for _, order := range [][]string{{"alpha", "beta"}, {"beta", "alpha"}} {
		t.Run(strings.Join(order, "-then-"), func(t *testing.T) {
			var notified atomic.Int32
			g, hs := newTestGateway(t, Options{OnCollisionsChanged: func() { notified.Add(1) }})
			backends := map[string]*testBackend{}
			conns := map[string]Connection{}
			for _, name := range []string{"alpha", "beta"} {
				tb := newTestBackend(name)
				be, tools, _ := tb.connect(t)
				backends[name] = tb
				// Same prefix: every tool collides.
				conns[name] = Connection{Name: name, Prefix: "x", Backend: withTools(be, tools),
					Filter: &spec.ToolFilter{Allow: []string{"echo", "fail"}}}
			}
			for _, name := range order {
				g.Set(conns[name])
			}
			want := []spec.ToolCollision{{Tool: "x_echo", Connection: "alpha"}, {Tool: "x_fail", Connection: "alpha"}}
			if got := g.Collisions("beta"); !slices.Equal(got, want) {
				t.Errorf("Collisions(beta) = %v, want %v", got, want)
			}
			// Before any client came, the first by name keeps a name, and
			// says so.
			kept := []spec.ToolCollision{{Tool: "x_echo", Connection: "beta", Kept: true}, {Tool: "x_fail", Connection: "beta", Kept: true}}
			if got := g.Collisions("alpha"); !slices.Equal(got, kept) {
				t.Errorf("Collisions(alpha) = %v, want %v", got, kept)
			}
			if g.Exposed("alpha") != 2 || g.Exposed("beta") != 0 {
				t.Errorf("Exposed alpha=%d beta=%d, want 2 and 0", g.Exposed("alpha"), g.Exposed("beta"))
			}
			if notified.Load() != 1 {
				t.Errorf("OnCollisionsChanged called %d times, want 1", notified.Load())
			}
			d := dial(t, g, hs)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			if res, err := d.call(ctx, "x_echo", nil); err != nil || !strings.HasPrefix(textOf(res), "alpha:") {
				t.Errorf("x_echo = %q, %v; want the winner alpha", textOf(res), err)
			}

			// The loser takes over when the winner's manifest is removed.
			g.Remove("alpha")
			if got := g.Collisions("beta"); got != nil {
				t.Errorf("after alpha left, Collisions(beta) = %v", got)
			}
			if notified.Load() != 2 {
				t.Errorf("OnCollisionsChanged called %d times, want 2", notified.Load())
			}
			if res, err := d.call(ctx, "x_echo", nil); err != nil || !strings.HasPrefix(textOf(res), "beta:") {
				t.Errorf("x_echo = %q, %v; want beta now", textOf(res), err)
			}
			if g.Exposed("beta") != 2 {
				t.Errorf("Exposed(beta) = %d, want 2", g.Exposed("beta"))
			}
		})
	}
}

func TestUnavailableFailsFast(t *testing.T) {
	obs := &observed{}
	g, hs := newTestGateway(t, Options{ObserveCall: obs.observe})
	be, tools, _ := newTestBackend("gh").connect(t)
	g.Set(Connection{Name: "gh", Prefix: "github", Backend: withTools(be, tools)})
	d := dial(t, g, hs)
	g.SetUnavailable("gh", "github", "dial tcp 127.0.0.1:1: connection refused")

	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	for _, tool := range []string{"github_echo", "github_never_listed"} {
		start := time.Now()
		_, err := d.call(ctx, tool, nil)
		want := "connection gh is not connected: dial tcp 127.0.0.1:1: connection refused"
		if got := rpcMessage(err); got != want {
			t.Errorf("%s: error %q, want %q", tool, got, want)
		}
		if el := time.Since(start); el > 2*time.Second {
			t.Errorf("%s: took %v, want at once", tool, el)
		}
	}
	if _, err := d.call(ctx, "other_tool", nil); err == nil || strings.Contains(rpcMessage(err), "gh") {
		t.Errorf("a tool of no connection: %v, want the SDK's unknown tool", err)
	}
	if !obs.has("gh/error") {
		t.Errorf("ObserveCall saw %v, want gh/error", obs.calls)
	}
}

func TestInFlightCallFailsFast(t *testing.T) {
	tests := []struct {
		name string
		kill func(g *Gateway, killBackend func())
		want string
	}{
		{"backend dies", func(_ *Gateway, kill func()) { kill() }, `tool "a_block": connection a:`},
		{"connection goes down", func(g *Gateway, _ func()) { g.SetUnavailable("a", "a", "child exited") }, "connection a is not connected: child exited"},
		{"connection removed", func(g *Gateway, _ func()) { g.Remove("a") }, "connection a was removed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obs := &observed{}
			g, hs := newTestGateway(t, Options{ObserveCall: obs.observe})
			tb := newTestBackend("a")
			be, tools, kill := tb.connect(t)
			g.Set(Connection{Name: "a", Prefix: "a", Backend: withTools(be, tools), CallTimeout: time.Minute})
			d := dial(t, g, hs)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				_, err := d.call(ctx, "a_block", nil)
				errc <- err
			}()
			<-tb.entered
			start := time.Now()
			tt.kill(g, kill)
			select {
			case err := <-errc:
				if !strings.Contains(rpcMessage(err), tt.want) {
					t.Errorf("error %q, want it to contain %q", rpcMessage(err), tt.want)
				}
				t.Logf("failed after %v: %v", time.Since(start), err)
			case <-time.After(5 * time.Second):
				t.Fatal("call still hanging 5s after its backend went away")
			}
			if !obs.has("a/error") {
				t.Errorf("ObserveCall saw %v, want a/error", obs.calls)
			}
		})
	}
}

func TestCallTimeout(t *testing.T) {
	obs := &observed{}
	g, hs := newTestGateway(t, Options{ObserveCall: obs.observe})
	tb := newTestBackend("slow")
	be, tools, _ := tb.connect(t)
	g.Set(Connection{Name: "slow", Prefix: "s", Backend: withTools(be, tools), CallTimeout: 150 * time.Millisecond})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	start := time.Now()
	_, err := d.call(ctx, "s_block", nil)
	el := time.Since(start)
	if want := `tool "s_block" timed out after 150ms (callTimeout of connection slow)`; rpcMessage(err) != want {
		t.Errorf("error %q, want %q", rpcMessage(err), want)
	}
	if el < 150*time.Millisecond || el > 5*time.Second {
		t.Errorf("call took %v, want about the 150ms callTimeout", el)
	}
	select {
	case err := <-tb.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("backend handler ended with %v, want it canceled", err)
		}
	case <-ctx.Done():
		t.Fatal("the backend never saw the timed-out call canceled")
	}
	if !obs.has("slow/timeout") {
		t.Errorf("ObserveCall saw %v, want slow/timeout", obs.calls)
	}
}

// The caller's cancellation travels gateway → backend as notifications/cancelled.
func TestCancellationReachesBackend(t *testing.T) {
	obs := &observed{}
	g, hs := newTestGateway(t, Options{ObserveCall: obs.observe})
	tb := newTestBackend("a")
	be, tools, _ := tb.connect(t)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: withTools(be, tools)})
	d := dial(t, g, hs)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := d.call(ctx, "a_block", nil)
		errc <- err
	}()
	<-tb.entered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("caller got %v, want context.Canceled", err)
	}
	select {
	case err := <-tb.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("backend handler ended with %v, want canceled", err)
		}
	case <-time.After(waitTimeout):
		t.Fatal("the backend never saw the call canceled")
	}
	deadline := time.Now().Add(waitTimeout)
	for !obs.has("a/canceled") {
		if time.Now().After(deadline) {
			t.Fatalf("ObserveCall saw %v, want a/canceled", obs.calls)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestProgressForwarded(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	tb := newTestBackend("a")
	be, tools, _ := tb.connect(t)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: withTools(be, tools)})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	p := &mcp.CallToolParams{Name: "a_progress", Arguments: map[string]any{}}
	p.SetProgressToken("caller-42")
	p.Meta["com.example/trace"] = "t-1"
	done := make(chan error, 1)
	go func() {
		_, err := d.cs.CallTool(ctx, p)
		done <- err
	}()
	for i := 1; i <= 3; i++ {
		select {
		case pn := <-d.prog:
			if pn.ProgressToken != "caller-42" || pn.Progress != float64(i) || pn.Total != 3 || pn.Message != fmt.Sprintf("step %d", i) {
				t.Errorf("progress %d = %+v, want token caller-42, progress %d of 3", i, pn, i)
			}
		case <-ctx.Done():
			t.Fatalf("progress notification %d never arrived", i)
		}
	}
	close(tb.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	rec := <-tb.calls
	if tok := rec.Meta["progressToken"]; tok == nil || tok == "caller-42" {
		t.Errorf("backend progress token %v: want one of the gateway's own", tok)
	}
	if rec.Meta["com.example/trace"] != nil {
		t.Errorf("backend got the caller's _meta: %v", rec.Meta)
	}
}

// fakeBackend answers every call with the tool name; for tests that need no
// MCP backend at all. It carries no raw calls.
type fakeBackend struct {
	tools     []*mcp.Tool
	prompts   []*mcp.Prompt
	resources []*mcp.Resource
}

func (b *fakeBackend) Prompts() []*mcp.Prompt                   { return b.prompts }
func (b *fakeBackend) Resources() []*mcp.Resource               { return b.resources }
func (*fakeBackend) ResourceTemplates() []*mcp.ResourceTemplate { return nil }
func (*fakeBackend) Listen(wire.Listener)                       {}
func (*fakeBackend) SetLogLevel(context.Context, mcp.LoggingLevel) error {
	return nil
}
func (*fakeBackend) Subscribe(context.Context, string) error   { return nil }
func (*fakeBackend) Unsubscribe(context.Context, string) error { return nil }
func (*fakeBackend) GetPrompt(_ context.Context, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	return &mcp.GetPromptResult{Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: p.Name}}}}, nil
}
func (*fakeBackend) ReadResource(_ context.Context, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: p.URI, Text: p.URI}}}, nil
}
func (*fakeBackend) Complete(context.Context, *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	return &mcp.CompleteResult{}, nil
}

func (b *fakeBackend) Tools() []*mcp.Tool                 { return b.tools }
func (b *fakeBackend) setTools(tools []*mcp.Tool)         { b.tools = tools }
func (*fakeBackend) RawProtocolVersion() (string, bool)   { return "", false }
func (*fakeBackend) Endpoint() string                     { return "" }
func (*fakeBackend) ServerError(err error) *jsonrpc.Error { return sdkServerError(err) }
func (*fakeBackend) CallToolRaw(context.Context, string, []wire.RawParam, func(*mcp.ProgressNotificationParams)) (json.RawMessage, bool, error) {
	return nil, false, errors.New("fakeBackend carries no raw calls")
}

func (*fakeBackend) CallTool(_ context.Context, p *mcp.CallToolParams, _ func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: p.Name}}}, nil
}

func TestSetWithoutBackend(t *testing.T) {
	g, hs := newTestGateway(t, Options{})
	g.Set(Connection{Name: "n", Prefix: "n"})
	if g.Exposed("n") != 0 {
		t.Errorf("Exposed = %d, want 0", g.Exposed("n"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	_, err := dial(t, g, hs).call(ctx, "n_t", nil)
	if want := "connection n is not connected: no backend session"; rpcMessage(err) != want {
		t.Errorf("n_t: %q, want %q", rpcMessage(err), want)
	}
}

// TestResultNamesTheGateway: the protocol's own _meta keys of a backend's
// result (io.modelcontextprotocol/serverInfo) describe the backend's hop; the
// caller must see the gateway as its server, other _meta keys unchanged.
func TestResultNamesTheGateway(t *testing.T) {
	g, hs := newTestGateway(t, Options{Version: "gw-test"})
	tb := newTestBackend("backend-server")
	tb.srv.AddTool(&mcp.Tool{Name: "meta", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{
				Meta:    mcp.Meta{"example.com/kept": "yes", mcp.MetaKeyServerInfo: map[string]any{"name": "forged"}},
				Content: []mcp.Content{&mcp.TextContent{Text: "ok"}},
			}, nil
		})
	be, tools, _ := tb.connect(t)
	g.Set(Connection{Name: "b", Prefix: "b", Backend: withTools(be, tools)})
	d := dial(t, g, hs)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	res, err := d.call(ctx, "b_meta", map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Meta["example.com/kept"] != "yes" {
		t.Errorf("the backend's own _meta key was dropped: %v", res.Meta)
	}
	if info, ok := res.Meta[mcp.MetaKeyServerInfo]; ok {
		if m, _ := info.(map[string]any); m == nil || m["name"] == "forged" || m["name"] == "backend-server" {
			t.Errorf("serverInfo in the result names the backend: %v", info)
		}
	}
}
