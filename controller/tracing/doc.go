// Package tracing is tether's OpenTelemetry tracing: the span and attribute
// names the reconciler and the gateway record, the W3C trace context carried
// in MCP's _meta (traceparent, tracestate), a slog handler that stamps log
// lines with trace and span ids, and Setup, which builds the OTLP/HTTP export
// pipeline from the standard OTEL_* environment variables.
//
// Tracing is off unless an OTEL_* variable asks for it. Off means no
// exporter, no batch goroutine and the OpenTelemetry API's no-op tracer:
// instrumented code pays a context lookup per span and nothing more.
//
// The package owns only the global tracer provider and propagator it
// installs in Setup. It records no span itself; the reconciler, the gateway
// and the connection package do, through Tracer and the helpers here.
//
// # Configuration
//
// Only the standard variables: OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, or OTEL_TRACES_EXPORTER=otlp for the
// default http://localhost:4318) turns tracing on; OTEL_SDK_DISABLED=true
// and OTEL_TRACES_EXPORTER=none keep it off. The protocol is http/protobuf;
// grpc or http/json leave tracing off, with a warning. The SDK reads
// OTEL_TRACES_SAMPLER(_ARG), OTEL_BSP_*, OTEL_SERVICE_NAME (default
// "tether") and OTEL_RESOURCE_ATTRIBUTES.
//
// The exporter is this package's own (the official otlptracehttp module
// links gRPC, which costs every tether megabytes of memory, traced or not).
// It reads, as the OTLP exporter specification says, each variable in a
// general and a traces form, OTEL_EXPORTER_OTLP_X and
// OTEL_EXPORTER_OTLP_TRACES_X, the traces one winning when set:
//
//   - ENDPOINT: a base URL to which /v1/traces is appended; the traces
//     form is used as it is. http:// or https:// only.
//   - HEADERS: key=value pairs separated by commas, values
//     percent-decoded, sent with every export. The traces form replaces
//     the general one. Values are credentials: they appear in no log
//     line, error or metric, and redirects are followed only within the
//     collector's origin so that they are not sent elsewhere.
//   - TIMEOUT: milliseconds one export may take, retries included
//     (default 10000).
//   - COMPRESSION: gzip or none (default).
//   - CERTIFICATE: a PEM file of the CAs that verify the collector, instead
//     of the system roots; CLIENT_CERTIFICATE and CLIENT_KEY: the client's
//     certificate and key, both from the same form. https only.
//
// An export is retried on 429, 502, 503 and 504 and when the collector
// cannot be reached, with exponential backoff and jitter, waiting at least
// what Retry-After asks, as long as the timeout allows. A partial success
// is not retried; it is logged like an export error.
//
// A value the exporter can do without (a malformed header entry, timeout
// or compression) is logged and ignored; one it cannot (an endpoint that is
// not an http(s) URL, a certificate that does not load) is logged and
// leaves tracing off.
//
// # Spans
//
//   - mcp.reconcile: one Reconcile call. Root span.
//   - mcp.connect_attempt: one connect attempt (spawn or dial, initialize,
//     tools/list), child of the reconcile that started it; it ends when the
//     attempt's goroutine has the outcome, which is usually after that
//     reconcile ended. Linked to the backoff_wait it followed.
//   - mcp.backoff_wait: the wait between a failure and the next attempt,
//     child of the reconcile that decided the delay. It starts when the
//     delay is decided and ends when the next attempt starts (or when the
//     wait is abandoned: suspend, removal, shutdown), so its duration is the
//     wait the connection really had, queue latency included. Linked to the
//     failed attempt it follows.
//   - mcp.health_check: one probe of a live session. Root span.
//   - mcp.tool_call: one tools/call through the gateway, continuing the
//     caller's trace context (_meta.traceparent, else the HTTP traceparent
//     header); the backend call carries this span as its _meta.traceparent.
//
// Every span names its connection (mcp.server) and, where it is known, the
// endpoint (mcp.endpoint: a URL without credentials or query values, or the
// stdio command without its arguments). A span's status is Error when its
// result is not a success, with the redacted error as description.
package tracing
