package tracing

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/tether-mcp/tether/spec"
)

func TestEndpointOf(t *testing.T) {
	tests := []struct {
		name string
		sp   *spec.Spec
		want string
	}{
		{"nil", nil, ""},
		{"stdio drops args", &spec.Spec{Stdio: &spec.StdioSpec{Command: "npx", Args: []string{"--token=abc"}}}, "npx"},
		{"plain url", &spec.Spec{HTTP: &spec.HTTPSpec{URL: "http://127.0.0.1:8080/mcp"}}, "http://127.0.0.1:8080/mcp"},
		{"userinfo", &spec.Spec{HTTP: &spec.HTTPSpec{URL: "https://user:pw@example.com/mcp"}}, "https://example.com/mcp"},
		{"token as user", &spec.Spec{HTTP: &spec.HTTPSpec{URL: "https://ghp_abc@example.com/mcp"}}, "https://example.com/mcp"},
		{"query values", &spec.Spec{HTTP: &spec.HTTPSpec{URL: "https://example.com/mcp?api_key=abc&x=1#frag"}}, "https://example.com/mcp?api_key=REDACTED&x=REDACTED"},
		{"unparseable", &spec.Spec{HTTP: &spec.HTTPSpec{URL: "http://[::1%zz/secret"}}, "(invalid URL)"},
		{"container image, not its args", &spec.Spec{Container: &spec.ContainerSpec{Image: "srv:1", Args: []string{"--token=abc"}}}, "container srv:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := EndpointOf(tt.sp); got != tt.want {
				t.Errorf("EndpointOf = %q, want %q", got, tt.want)
			}
		})
	}
}

var (
	tid = trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	sid = trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7}
)

const (
	parentHeader = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	otherParent  = "00-11111111111111111111111111111111-2222222222222222-01"
)

func TestInjectMeta(t *testing.T) {
	if m := InjectMeta(context.Background(), nil); m != nil {
		t.Errorf("InjectMeta without a span = %v, want nil", m)
	}
	ts, _ := trace.ParseTraceState("vendor=x")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	m := InjectMeta(ctx, mcp.Meta{"progressToken": "p1"})
	if m[MetaTraceparent] != parentHeader || m[MetaTracestate] != "vendor=x" || m["progressToken"] != "p1" {
		t.Errorf("meta = %v", m)
	}
	// It travels as the JSON the MCP convention names.
	data, _ := json.Marshal(&mcp.CallToolParams{Meta: InjectMeta(ctx, nil), Name: "t"})
	if !strings.Contains(string(data), `"_meta":{"traceparent":"`+parentHeader+`"`) {
		t.Errorf("params JSON = %s", data)
	}
}

func TestExtractCall(t *testing.T) {
	hdr := func(v string) http.Header { h := http.Header{}; h.Set("Traceparent", v); return h }
	tests := []struct {
		name   string
		meta   mcp.Meta
		header http.Header
		want   string // trace id, "" for none
	}{
		{"nothing", nil, nil, ""},
		{"meta", mcp.Meta{MetaTraceparent: parentHeader}, nil, tid.String()},
		{"header", nil, hdr(parentHeader), tid.String()},
		{"meta wins over header", mcp.Meta{MetaTraceparent: parentHeader}, hdr(otherParent), tid.String()},
		{"bad meta falls back to header", mcp.Meta{MetaTraceparent: "garbage"}, hdr(otherParent), "11111111111111111111111111111111"},
		{"non-string meta ignored", mcp.Meta{MetaTraceparent: 42}, nil, ""},
		{"all-zero trace id refused", mcp.Meta{MetaTraceparent: "00-00000000000000000000000000000000-00f067aa0ba902b7-01"}, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sc := trace.SpanContextFromContext(ExtractCall(context.Background(), tt.meta, tt.header))
			got := ""
			if sc.IsValid() {
				got = sc.TraceID().String()
				if !sc.IsRemote() {
					t.Error("extracted span context is not marked remote")
				}
			}
			if got != tt.want {
				t.Errorf("trace id = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestLogHandler(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(NewLogHandler(slog.NewJSONHandler(&buf, nil))).With("connection", "one")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	log.Info("untraced")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("%d lines: %s", len(lines), buf.String())
	}
	var traced, untraced map[string]any
	_ = json.Unmarshal(lines[0], &traced)
	_ = json.Unmarshal(lines[1], &untraced)
	if traced[LogTraceID] != tid.String() || traced[LogSpanID] != sid.String() || traced["connection"] != "one" {
		t.Errorf("traced line = %v", traced)
	}
	if _, ok := untraced[LogTraceID]; ok || untraced["connection"] != "one" {
		t.Errorf("untraced line = %v", untraced)
	}
}

// TestOffPassesContextThrough: with tracing off the API's tracer records
// nothing, yet a call that came with a traceparent hands the same one to
// the backend, as a W3C intermediary that does not trace should.
func TestOffPassesContextThrough(t *testing.T) {
	ctx := ExtractCall(context.Background(), mcp.Meta{MetaTraceparent: parentHeader}, nil)
	for name, tp := range map[string]trace.TracerProvider{"global default": nil, "noop": noop.NewTracerProvider()} {
		t.Run(name, func(t *testing.T) {
			sctx, span := Tracer(tp).Start(ctx, SpanToolCall)
			defer span.End()
			if span.IsRecording() {
				t.Fatal("span records with tracing off")
			}
			if m := InjectMeta(sctx, nil); m[MetaTraceparent] != parentHeader {
				t.Errorf("backend would get %v, want the caller's %s", m[MetaTraceparent], parentHeader)
			}
		})
	}
}
