//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/spec"
)

// tracedContext carries a sampled span context with a tracestate, as the
// gateway's mcp.tool_call span does.
func tracedContext(t *testing.T, parent context.Context) (context.Context, string) {
	t.Helper()
	ts, err := trace.ParseTraceState("tether=t1")
	if err != nil {
		t.Fatal(err)
	}
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0x0a, 0xf7, 0x65, 0x19, 0x16, 0xcd, 0x43, 0xdd, 0x84, 0x48, 0xeb, 0x21, 0x1c, 0x80, 0x31, 0x9c},
		SpanID:     trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31},
		TraceFlags: trace.FlagsSampled,
		TraceState: ts,
	})
	return trace.ContextWithSpanContext(parent, sc), "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
}

// TestCallToolSendsTraceContext: the upstream _meta carries the ctx's trace
// context beside the session's own progress token, and nothing of the
// caller's _meta.
func TestCallToolSendsTraceContext(t *testing.T) {
	metas := make(chan mcp.Meta, 4)
	srv := mcp.NewServer(&mcp.Implementation{Name: "meta", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			metas <- req.Params.Meta
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	if got := s.Endpoint(); got != hs.URL {
		t.Errorf("Endpoint = %q, want %q", got, hs.URL)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tests := []struct {
		name          string
		traced        bool
		progress      bool
		wantKeys      []string
		wantAbsentKey string
	}{
		{"traced with progress", true, true, []string{"traceparent", "tracestate", "progressToken"}, "io.modelcontextprotocol/protocolVersion"},
		{"traced", true, false, []string{"traceparent", "tracestate"}, "progressToken"},
		{"untraced", false, false, nil, "traceparent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cctx, want := ctx, ""
			if tt.traced {
				cctx, want = tracedContext(t, ctx)
			}
			var progress func(*mcp.ProgressNotificationParams)
			if tt.progress {
				progress = func(*mcp.ProgressNotificationParams) {}
			}
			p := &mcp.CallToolParams{Name: "echo", Meta: mcp.Meta{
				"io.modelcontextprotocol/protocolVersion": "2099-01-01",
				"traceparent": "00-11111111111111111111111111111111-2222222222222222-01",
			}}
			if _, err := s.CallTool(cctx, p, progress); err != nil {
				t.Fatal(err)
			}
			m := <-metas
			for _, k := range tt.wantKeys {
				if _, ok := m[k]; !ok {
					t.Errorf("upstream _meta %v lacks %s", m, k)
				}
			}
			if _, ok := m[tt.wantAbsentKey]; ok {
				t.Errorf("upstream _meta %v has %s", m, tt.wantAbsentKey)
			}
			if tt.traced && (m["traceparent"] != want || m["tracestate"] != "tether=t1") {
				t.Errorf("upstream trace context %v/%v, want %s/tether=t1 (from ctx, not the caller's _meta)", m["traceparent"], m["tracestate"], want)
			}
		})
	}
}

// TestPeersAcceptTraceContext: real servers answer calls whose _meta
// carries traceparent and tracestate (with a progress token, too).
func TestPeersAcceptTraceContext(t *testing.T) {
	cases := []struct {
		name string
		spec func(t *testing.T) *spec.Spec
		tool string
		args any
	}{
		{"npm-everything/stdio", func(t *testing.T) *spec.Spec { return stdioSpec(npmEverything(t), "stdio") },
			"trigger-long-running-operation", map[string]any{"duration": 0.2, "steps": 2}},
		{"go-everything/stdio", func(t *testing.T) *spec.Spec { return stdioSpec(goEverything(t)) },
			"test_tool_with_progress", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := connect(t, Request{Spec: tc.spec(t)})
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			ctx, _ = tracedContext(t, ctx)
			log := newProgressLog()
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args}, log.add)
			if err != nil || res.IsError {
				t.Fatalf("a traced call failed: %v %+v", err, res)
			}
			if len(log.list()) == 0 {
				t.Error("no progress: the trace keys displaced the progress token")
			}
		})
	}
}
