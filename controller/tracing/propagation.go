package tracing

import (
	"context"
	"net/http"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// MCP carries W3C trace context in a request's _meta under the same keys as
// the HTTP headers (the convention of the MCP OpenTelemetry SEP). tether
// speaks exactly that, whatever OTEL_PROPAGATORS says: a backend or a caller
// understands the convention or ignores the keys.
const (
	MetaTraceparent = "traceparent"
	MetaTracestate  = "tracestate"
)

var w3c = propagation.TraceContext{}

// metaCarrier reads and writes string values of an MCP _meta map.
type metaCarrier mcp.Meta

func (m metaCarrier) Get(key string) string {
	s, _ := m[key].(string)
	return s
}

func (m metaCarrier) Set(key, value string) { m[key] = value }

func (m metaCarrier) Keys() []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// InjectMeta sets traceparent (and tracestate, when there is one) in meta
// from the span context of ctx and returns meta, allocated when it was nil.
// Without a valid span context it returns meta unchanged. When tracing is
// off, ctx may still carry the caller's span context (see ExtractCall): it
// is passed on unchanged, as a W3C intermediary that does not trace should.
func InjectMeta(ctx context.Context, meta mcp.Meta) mcp.Meta {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	w3c.Inject(ctx, metaCarrier(meta))
	return meta
}

// ExtractCall returns ctx with the caller's remote span context: from the
// request's _meta.traceparent, else from the HTTP traceparent header (header
// is nil over stdio). _meta wins: it belongs to this one request, while a
// header may have been set by a proxy or for the whole HTTP exchange.
// Without a valid traceparent, ctx is returned as it is.
func ExtractCall(ctx context.Context, meta mcp.Meta, header http.Header) context.Context {
	if _, ok := meta[MetaTraceparent].(string); ok {
		if out := w3c.Extract(ctx, metaCarrier(meta)); trace.SpanContextFromContext(out).IsRemote() {
			return out
		}
	}
	// The canonical key spares Get an allocation on every call.
	if header != nil && header.Get("Traceparent") != "" {
		return w3c.Extract(ctx, propagation.HeaderCarrier(header))
	}
	return ctx
}
