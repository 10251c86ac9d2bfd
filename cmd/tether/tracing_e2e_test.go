//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"

	"github.com/tether-mcp/tether/controller/tracing/tracingtest"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// startTetherEnv is startTetherServing with extra environment variables.
func startTetherEnv(t *testing.T, dir string, env []string) (*tether, string) {
	t.Helper()
	gw := testport.Free(t)
	tt := startTetherWithEnv(t, dir, env, "--listen", fmt.Sprintf("127.0.0.1:%d", gw))
	waitTCP(t, gw, 20*time.Second)
	return tt, fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)
}

// metaServer is an in-test go-sdk MCP server over streamable HTTP whose echo
// tool records the _meta of every call.
func metaServer(t *testing.T) (url string, metas <-chan map[string]any) {
	t.Helper()
	ch := make(chan map[string]any, 16)
	srv := mcp.NewServer(&mcp.Implementation{Name: "meta-recorder", Version: "1.0.0"}, nil)
	srv.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			ch <- req.Params.Meta
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echoed"}}}, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return hs.URL + "/mcp", ch
}

// otelEnv clears every OTEL_* variable the test process may have, then sets
// the given ones.
func otelEnv(set ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if k, _, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "OTEL_") {
			env = append(env, k+"=")
		}
	}
	return append(env, set...)
}

func findSpans(spans []tracingtest.Span, name, server string) []tracingtest.Span {
	var out []tracingtest.Span
	for _, s := range spans {
		if s.Name == name && s.Attrs["mcp.server"] == server {
			out = append(out, s)
		}
	}
	return out
}

func spanByID(spans []tracingtest.Span, id string) (tracingtest.Span, bool) {
	for _, s := range spans {
		if s.SpanID == id {
			return s, true
		}
	}
	return tracingtest.Span{}, false
}

// TestTracingEndToEnd runs tether with OTEL_EXPORTER_OTLP_ENDPOINT pointing
// at an OTLP/HTTP receiver in the test, which decodes the exporter's real
// protobuf payloads: a connection that keeps failing, one to a real peer
// (the go-sdk conformance server over stdio) and one to a server that
// records _meta, and a traced tool call through the gateway.
func TestTracingEndToEnd(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	bin := builtBinaries(t)
	metaURL, metas := metaServer(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, httpManifest("good", metaURL+"?token=s3cret", "streamable", quickHealth))
	peer := filepath.Join(dir, "peer.yaml")
	writeFile(t, peer, stdioManifest("peer", filepath.Join(bin, "everything-server"), nil, ""))
	bad := filepath.Join(dir, "bad.yaml")
	writeFile(t, bad, httpManifest("bad", fmt.Sprintf("http://127.0.0.1:%d/mcp", testport.Free(t)), "streamable", quickBackoff))

	tt, gateway := startTetherEnv(t, dir, otelEnv(
		"OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL,
		"OTEL_BSP_SCHEDULE_DELAY=100", // ms: spans arrive while the test waits
	))
	waitStatus(t, good, "good", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	waitStatus(t, peer, "peer", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	tt.waitLog(t, 10*time.Second, "tracing on")

	const callerTrace, callerSpan = "0af7651916cd43dd8448eb211c80319c", "b7ad6b7169203331"
	client := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: gateway})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tool := range []string{"good_echo", "peer_test_simple_text"} {
		res, err := client.session.CallTool(ctx, &mcp.CallToolParams{
			Name: tool,
			Meta: mcp.Meta{"traceparent": "00-" + callerTrace + "-" + callerSpan + "-01"},
		})
		if err != nil || res.IsError {
			t.Fatalf("%s through the gateway: %v %+v", tool, err, res)
		}
	}
	var backendMeta map[string]any
	select {
	case backendMeta = <-metas:
	case <-time.After(10 * time.Second):
		t.Fatal("the backend saw no call")
	}

	// An attempt can end before the reconcile that started it, and the
	// batch processor may then export them in two batches: wait for every
	// attempt's reconcile too.
	spans := recv.WaitFor(t, 20*time.Second, "tool calls, attempts and their reconciles, waits and health checks", func(s []tracingtest.Span) bool {
		return len(findSpans(s, "mcp.tool_call", "good")) == 1 && len(findSpans(s, "mcp.tool_call", "peer")) == 1 &&
			len(findSpans(s, "mcp.backoff_wait", "bad")) >= 2 && slices.ContainsFunc(findSpans(s, "mcp.health_check", "good"), succeeded) &&
			len(findSpans(s, "mcp.connect_attempt", "peer")) == 1 &&
			parentsArrived(s, findSpans(s, "mcp.connect_attempt", "bad")) && parentsArrived(s, findSpans(s, "mcp.connect_attempt", "peer"))
	})

	// The tool call continues the caller's trace, and the backend got the
	// tool call span as its parent.
	call := findSpans(spans, "mcp.tool_call", "good")[0]
	if call.TraceID != callerTrace || call.ParentSpanID != callerSpan || call.Kind != tracepb.Span_SPAN_KIND_SERVER {
		t.Errorf("tool call: trace %s parent %s kind %v, want the caller's %s/%s, server", call.TraceID, call.ParentSpanID, call.Kind, callerTrace, callerSpan)
	}
	for k, v := range map[string]string{
		"mcp.tool.name": "good_echo", "mcp.backend.tool.name": "echo", "mcp.result": "ok",
		"mcp.endpoint": metaURL + "?token=REDACTED",
	} {
		if call.Attrs[k] != v {
			t.Errorf("tool call %s = %q, want %q", k, call.Attrs[k], v)
		}
	}
	if want := "00-" + callerTrace + "-" + call.SpanID + "-01"; backendMeta["traceparent"] != want {
		t.Errorf("backend _meta.traceparent = %v, want %s", backendMeta["traceparent"], want)
	}
	if pc := findSpans(spans, "mcp.tool_call", "peer")[0]; pc.TraceID != callerTrace || pc.Attrs["mcp.result"] != "ok" {
		t.Errorf("peer tool call: trace %s result %q", pc.TraceID, pc.Attrs["mcp.result"])
	}

	// Attempts: children of reconciles of the same trace, with the result
	// as status; failed ones followed by linked waits.
	peerAttempt := findSpans(spans, "mcp.connect_attempt", "peer")[0]
	if peerAttempt.Attrs["mcp.result"] != "success" || peerAttempt.Attrs["mcp.transport"] != "stdio" ||
		peerAttempt.Attrs["mcp.endpoint"] != filepath.Join(bin, "everything-server") || peerAttempt.Attrs["mcp.attempt"] != "1" {
		t.Errorf("peer attempt attrs = %v", peerAttempt.Attrs)
	}
	for _, a := range append(findSpans(spans, "mcp.connect_attempt", "bad"), peerAttempt) {
		parent, ok := spanByID(spans, a.ParentSpanID)
		if !ok || parent.Name != "mcp.reconcile" || parent.TraceID != a.TraceID || parent.Attrs["mcp.server"] != a.Attrs["mcp.server"] {
			t.Errorf("attempt %s of %s: parent %s is not its reconcile (found %v: %s)", a.SpanID, a.Attrs["mcp.server"], a.ParentSpanID, ok, parent.Name)
		}
	}
	badAttempts := findSpans(spans, "mcp.connect_attempt", "bad")
	for _, a := range badAttempts {
		if a.Attrs["mcp.result"] != "failure" || a.StatusCode != tracepb.Status_STATUS_CODE_ERROR || a.StatusMessage == "" {
			t.Errorf("failed attempt %s: result %q status %v %q", a.Attrs["mcp.attempt"], a.Attrs["mcp.result"], a.StatusCode, a.StatusMessage)
		}
	}
	for _, w := range findSpans(spans, "mcp.backoff_wait", "bad") {
		failed, ok := spanByID(spans, firstOr(w.Links))
		if !ok || failed.Name != "mcp.connect_attempt" || failed.Attrs["mcp.result"] != "failure" {
			t.Errorf("wait %s does not link to a failed attempt (links %v)", w.SpanID, w.Links)
		}
		if w.Attrs["mcp.backoff.delay_ms"] == "" || w.Attrs["mcp.backoff.outcome"] != "retry" {
			t.Errorf("wait attrs = %v", w.Attrs)
		}
	}
	// A successful one: on a loaded machine a probe can run past its
	// timeout (300ms) and fail.
	checks := findSpans(spans, "mcp.health_check", "good")
	hc := checks[slices.IndexFunc(checks, succeeded)]
	if hc.ParentSpanID != "" || hc.Attrs["mcp.endpoint"] != metaURL+"?token=REDACTED" {
		t.Errorf("health check = %+v", hc)
	}
	for _, s := range spans {
		if s.Service != "tether" || s.Scope != "github.com/tether-mcp/tether" {
			t.Fatalf("span %s: service %q scope %q", s.Name, s.Service, s.Scope)
		}
		for k, v := range s.Attrs {
			if strings.Contains(v, "s3cret") {
				t.Errorf("span %s attribute %s shows a secret: %s", s.Name, k, v)
			}
		}
	}

	// Log lines about traced operations carry the ids.
	connecting := regexp.MustCompile(`msg=connecting connection=peer attempt=1 transport=stdio trace_id=(\w+) span_id=(\w+)`).
		FindStringSubmatch(tt.logs.String())
	if connecting == nil || connecting[1] != peerAttempt.TraceID || connecting[2] != peerAttempt.SpanID {
		t.Errorf("the connecting line of peer does not carry its attempt's ids (%s/%s): %q", peerAttempt.TraceID, peerAttempt.SpanID, connecting)
	}
	tt.waitLog(t, 10*time.Second, "span_id="+call.SpanID) // the tool call's
	if refused := recv.Errors(); len(refused) > 0 {
		t.Errorf("the receiver refused payloads: %q", refused)
	}

	// Shutdown exports the final reconciles and exits cleanly.
	before := len(recv.Spans())
	tt.stop()
	if tt.err != nil {
		t.Fatalf("tether exited with %v", tt.err)
	}
	if after := recv.Spans(); len(after) <= before {
		t.Errorf("no spans exported at shutdown (%d before, %d after)", before, len(after))
	}
}

func succeeded(s tracingtest.Span) bool { return s.Attrs["mcp.result"] == "success" }

// parentsArrived reports whether the parent of every span of children is
// in spans.
func parentsArrived(spans, children []tracingtest.Span) bool {
	for _, s := range children {
		if _, ok := spanByID(spans, s.ParentSpanID); !ok {
			return false
		}
	}
	return true
}

func firstOr(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// TestTracingOff: OTEL_TRACES_EXPORTER=none wins over an endpoint; nothing
// reaches the receiver, and log lines carry no ids.
func TestTracingOff(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	metaURL, metas := metaServer(t)
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, httpManifest("good", metaURL, "streamable", ""))
	tt, gateway := startTetherEnv(t, dir, otelEnv(
		"OTEL_EXPORTER_OTLP_ENDPOINT="+recv.URL,
		"OTEL_TRACES_EXPORTER=none",
	))
	waitStatus(t, good, "good", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	client := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: gateway})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := client.session.CallTool(ctx, &mcp.CallToolParams{Name: "good_echo", Meta: mcp.Meta{"traceparent": parent}}); err != nil {
		t.Fatal(err)
	}
	// Not tracing, tether still passes the caller's context on unchanged.
	if m := <-metas; m["traceparent"] != parent {
		t.Errorf("backend _meta.traceparent = %v, want the caller's %s", m["traceparent"], parent)
	}
	tt.stop() // a running pipeline would flush here
	if n := len(recv.Spans()); n != 0 {
		t.Errorf("%d spans exported with OTEL_TRACES_EXPORTER=none", n)
	}
	logs := tt.logs.String()
	if strings.Contains(logs, "trace_id=") || strings.Contains(logs, "tracing on") {
		t.Errorf("tracing looks on:\n%s", logs)
	}
	if !slices.ContainsFunc(strings.Split(logs, "\n"), func(l string) bool { return strings.Contains(l, "gateway tool call") }) {
		t.Errorf("no gateway tool call line: the check above proves nothing")
	}
}
