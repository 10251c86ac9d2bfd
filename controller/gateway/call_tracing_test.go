package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/controller/tracing/tracingtest"
	"github.com/tether-mcp/tether/spec"
)

// headerTransport adds a traceparent header to every request, as an
// HTTP-instrumented MCP client does.
type headerTransport struct{ traceparent string }

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Traceparent", h.traceparent)
	return http.DefaultTransport.RoundTrip(r)
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func attrOf(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// TestTraceToolCall calls tools through the gateway into a real go-sdk
// backend over streamable HTTP, through connection.Session as tether does,
// and checks the mcp.tool_call span: it continues the caller's trace (from
// _meta, else the HTTP header), names the tools, connection and endpoint,
// follows the result, and is the parent the backend sees in its _meta.
func TestTraceToolCall(t *testing.T) {
	rec := tracingtest.GlobalRecorder(t)
	tb := newTestBackend("one")
	bs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return tb.srv }, nil))
	t.Cleanup(bs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	sess, err := connection.Connect(ctx, connection.Request{
		Name: "one",
		Spec: &spec.Spec{HTTP: &spec.HTTPSpec{URL: bs.URL + "?key=s3cret"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sess.Close() })

	logs := &lockedBuf{}
	g, hs := newTestGateway(t, Options{
		Logger: slog.New(tracing.NewLogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
	})
	g.Set(Connection{Name: "one", Prefix: "one", Backend: sess})
	plain := dial(t, g, hs)

	const (
		callerTrace  = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan   = "00f067aa0ba902b7"
		headerTrace  = "11111111111111111111111111111111"
		headerParent = "00-" + headerTrace + "-2222222222222222-01"
	)
	tests := []struct {
		name       string
		header     string // traceparent header on the HTTP requests
		meta       mcp.Meta
		tool       string
		wantTrace  string // "" = a new trace
		wantParent string // "" = root span
		result     string
		status     codes.Code
	}{
		{"meta traceparent", "", mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01", "tracestate": "v=1"},
			"one_echo", callerTrace, callerSpan, ResultOK, codes.Unset},
		{"no trace context", "", nil, "one_echo", "", "", ResultOK, codes.Unset},
		{"isError result", "", nil, "one_fail", "", "", ResultError, codes.Error},
		{"HTTP header", headerParent, nil, "one_echo", headerTrace, "2222222222222222", ResultOK, codes.Unset},
		{"meta wins over header", headerParent, mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"},
			"one_echo", callerTrace, callerSpan, ResultOK, codes.Unset},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := plain
			if tt.header != "" {
				c := mcp.NewClient(&mcp.Implementation{Name: "traced-agent", Version: "0"}, nil)
				cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
					Endpoint: hs.URL, MaxRetries: -1,
					HTTPClient: &http.Client{Transport: headerTransport{tt.header}},
				}, classicSession)
				if err != nil {
					t.Fatal(err)
				}
				defer cs.Close()
				d = &downstream{cs: cs}
			}
			before := len(rec.Ended())
			if _, err := d.cs.CallTool(ctx, &mcp.CallToolParams{Meta: tt.meta, Name: tt.tool, Arguments: map[string]any{"msg": "hi"}}); err != nil {
				t.Fatalf("call: %v", err)
			}
			var got sdktrace.ReadOnlySpan
			for _, s := range rec.Ended()[before:] {
				if s.Name() == tracing.SpanToolCall {
					got = s
				}
			}
			if got == nil {
				t.Fatalf("no %s span ended", tracing.SpanToolCall)
			}
			sc := got.SpanContext()
			if tt.wantTrace != "" && sc.TraceID().String() != tt.wantTrace {
				t.Errorf("trace id %s, want the caller's %s", sc.TraceID(), tt.wantTrace)
			}
			if tt.wantTrace == "" && (got.Parent().IsValid() || sc.TraceID().String() == callerTrace) {
				t.Errorf("span continues a trace (%s, parent %s) although the call carried none", sc.TraceID(), got.Parent().SpanID())
			}
			if tt.wantParent != "" && (got.Parent().SpanID().String() != tt.wantParent || !got.Parent().IsRemote()) {
				t.Errorf("parent %s (remote %v), want the caller's %s", got.Parent().SpanID(), got.Parent().IsRemote(), tt.wantParent)
			}
			if got.SpanKind() != trace.SpanKindServer {
				t.Errorf("kind %v, want server", got.SpanKind())
			}
			backendTool := strings.TrimPrefix(tt.tool, "one_")
			for key, val := range map[string]string{
				string(tracing.ToolName):        tt.tool,
				string(tracing.BackendToolName): backendTool,
				string(tracing.Server):          "one",
				string(tracing.Result):          tt.result,
				string(tracing.Endpoint):        bs.URL + "?key=REDACTED",
			} {
				if v := attrOf(got, key); v != val {
					t.Errorf("%s = %q, want %q", key, v, val)
				}
			}
			if got.Status().Code != tt.status {
				t.Errorf("status %v %q, want %v", got.Status().Code, got.Status().Description, tt.status)
			}

			// The backend got this span as its parent, and none of the
			// caller's other _meta.
			select {
			case call := <-tb.calls:
				want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
				if call.Meta["traceparent"] != want {
					t.Errorf("backend _meta.traceparent = %v, want %s", call.Meta["traceparent"], want)
				}
				if tt.meta["tracestate"] != nil && call.Meta["tracestate"] != tt.meta["tracestate"] {
					t.Errorf("backend _meta.tracestate = %v, want the caller's %v", call.Meta["tracestate"], tt.meta["tracestate"])
				}
			case <-time.After(waitTimeout):
				t.Fatal("the backend saw no call")
			}

			// The debug line of the call carries the span's ids.
			if !strings.Contains(logs.String(), `"msg":"gateway tool call","connection":"one","tool":"`+tt.tool+`"`) ||
				!strings.Contains(logs.String(), `"span_id":"`+sc.SpanID().String()+`"`) {
				t.Errorf("no gateway tool call line with span_id %s:\n%s", sc.SpanID(), logs.String())
			}
		})
	}

	t.Run("connection down", func(t *testing.T) {
		g.SetUnavailable("one", "one", "connection lost")
		before := len(rec.Ended())
		_, err := plain.cs.CallTool(ctx, &mcp.CallToolParams{Name: "one_echo", Meta: mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"}})
		if err == nil {
			t.Fatal("a call to a down connection succeeded")
		}
		var got sdktrace.ReadOnlySpan
		for _, s := range rec.Ended()[before:] {
			if s.Name() == tracing.SpanToolCall {
				got = s
			}
		}
		if got == nil {
			t.Fatal("no span for a call to a down connection")
		}
		if got.SpanContext().TraceID().String() != callerTrace || attrOf(got, string(tracing.Server)) != "one" ||
			attrOf(got, string(tracing.Result)) != ResultError || got.Status().Code != codes.Error ||
			!strings.Contains(got.Status().Description, "one") {
			t.Errorf("span: trace %s server %q result %q status %v %q", got.SpanContext().TraceID(),
				attrOf(got, string(tracing.Server)), attrOf(got, string(tracing.Result)), got.Status().Code, got.Status().Description)
		}
	})
}
