package tracing

import (
	"net/url"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/spec"
)

// ScopeName is the instrumentation scope of every tether span.
const ScopeName = "github.com/tether-mcp/tether"

// Span names.
const (
	SpanReconcile      = "mcp.reconcile"
	SpanConnectAttempt = "mcp.connect_attempt"
	SpanBackoffWait    = "mcp.backoff_wait"
	SpanHealthCheck    = "mcp.health_check"
	SpanToolCall       = "mcp.tool_call"
)

// Attribute keys.
const (
	// Server is the connection's name (metadata.name).
	Server = attribute.Key("mcp.server")
	// Endpoint is the URL or the stdio command, see Endpoint.
	Endpoint = attribute.Key("mcp.endpoint")
	// Transport is stdio, streamable or sse.
	Transport = attribute.Key("mcp.transport")
	// Attempt numbers connect attempts since the last success, from 1.
	Attempt = attribute.Key("mcp.attempt")
	// Result is the outcome: success | failure for attempts and health
	// checks, ok | error | timeout | canceled for tool calls (the values of
	// tether_gateway_tool_calls_total), success | error | requeue for
	// reconciles (those of tether_reconcile_total).
	Result = attribute.Key("mcp.result")
	// Phase is the connection's phase after a reconcile.
	Phase = attribute.Key("mcp.phase")
	// RequeueAfterMs is the delay a reconcile asked for, in milliseconds.
	RequeueAfterMs = attribute.Key("mcp.requeue_after_ms")
	// BackoffDelayMs is the backoff delay decided after a failure, in
	// milliseconds.
	BackoffDelayMs = attribute.Key("mcp.backoff.delay_ms")
	// BackoffOutcome says how a wait ended: retry, or why it was abandoned.
	BackoffOutcome = attribute.Key("mcp.backoff.outcome")
	// HealthFailures counts failed health checks in a row, this one included.
	HealthFailures = attribute.Key("mcp.health.failures")
	// HealthThreshold is failureThreshold: the count that takes the
	// connection down.
	HealthThreshold = attribute.Key("mcp.health.threshold")
	// ToolName is the tool name the gateway exposes (<prefix>_<tool>).
	ToolName = attribute.Key("mcp.tool.name")
	// BackendToolName is the backend's own name of the tool.
	BackendToolName = attribute.Key("mcp.backend.tool.name")
)

// Results of connect attempts and health checks.
const (
	ResultSuccess = "success"
	ResultFailure = "failure"
)

// Tracer returns tether's tracer from tp, or from the global provider when
// tp is nil. The global one delegates to whatever Setup installs, also when
// it was obtained before Setup ran.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(ScopeName)
}

// EndpointOf describes where a connection goes, for spans: the HTTP URL
// without user information, fragment or query values, the stdio command
// without its arguments, or a container's image (arguments and query strings are where people put
// tokens when they do not use valueFrom).
func EndpointOf(sp *spec.Spec) string {
	switch {
	case sp == nil:
		return ""
	case sp.HTTP != nil:
		return RedactURL(sp.HTTP.URL)
	case sp.Stdio != nil:
		return sp.Stdio.Command
	case sp.Container != nil:
		return "container " + sp.Container.Image
	}
	return ""
}

// RedactURL drops a URL's user information and fragment and replaces every
// query value with "REDACTED". A URL that does not parse is not shown.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	u.User = nil
	u.Fragment, u.RawFragment = "", ""
	if u.RawQuery != "" {
		q := u.Query()
		for k := range q {
			q[k] = []string{"REDACTED"}
		}
		u.RawQuery = q.Encode()
	}
	return u.String()
}
