package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// Log attribute keys of the ids NewLogHandler adds.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// NewLogHandler wraps h so that a record logged with a context that carries
// a valid span context (Logger.InfoContext and friends) gets trace_id and
// span_id attributes, the hex ids a tracing backend searches by. Records
// logged without a context are passed on unchanged.
func NewLogHandler(h slog.Handler) slog.Handler { return logHandler{inner: h} }

type logHandler struct{ inner slog.Handler }

func (h logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h logHandler) Handle(ctx context.Context, rec slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		// A copied Record shares its attribute storage: clone before adding.
		rec = rec.Clone()
		rec.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
	}
	return h.inner.Handle(ctx, rec)
}

func (h logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{inner: h.inner.WithAttrs(attrs)}
}

func (h logHandler) WithGroup(name string) slog.Handler {
	return logHandler{inner: h.inner.WithGroup(name)}
}
