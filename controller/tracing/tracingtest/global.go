package tracingtest

import (
	"context"
	"sync"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// The OpenTelemetry global provider can be set once usefully (tracers
// obtained before delegate to the first one set), so GlobalRecorder installs
// one provider per test binary and points its processor at the current
// test's recorder.
var (
	globalOnce sync.Once
	target     switchProcessor
)

// GlobalRecorder records the spans started through the global tracer
// provider until the test ends. Tests that use it must not run in parallel
// with each other.
func GlobalRecorder(t testing.TB) *tracetest.SpanRecorder {
	globalOnce.Do(func() {
		otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(&target)))
	})
	rec := tracetest.NewSpanRecorder()
	target.set(rec)
	t.Cleanup(func() { target.set(nil) })
	return rec
}

// switchProcessor forwards to the current recorder, if any.
type switchProcessor struct {
	mu  sync.Mutex
	cur sdktrace.SpanProcessor
}

func (p *switchProcessor) set(sp sdktrace.SpanProcessor) {
	p.mu.Lock()
	p.cur = sp
	p.mu.Unlock()
}

func (p *switchProcessor) get() sdktrace.SpanProcessor {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur
}

func (p *switchProcessor) OnStart(ctx context.Context, s sdktrace.ReadWriteSpan) {
	if cur := p.get(); cur != nil {
		cur.OnStart(ctx, s)
	}
}

func (p *switchProcessor) OnEnd(s sdktrace.ReadOnlySpan) {
	if cur := p.get(); cur != nil {
		cur.OnEnd(s)
	}
}

func (p *switchProcessor) Shutdown(context.Context) error   { return nil }
func (p *switchProcessor) ForceFlush(context.Context) error { return nil }
