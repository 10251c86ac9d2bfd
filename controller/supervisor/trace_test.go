package supervisor

import (
	"slices"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/tracing"
)

// TestSpansNumberTheAttempts: each connect attempt's span and the backoff
// wait before it carry the attempt's number, counted from 1 since the last
// success.
func TestSpansNumberTheAttempts(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	m := newMachine(t)
	m.sup.opts.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("test")
	m.report(refused) // attempt 1
	m.step()          // the wait before attempt 2
	m.sup.RetryNow()
	m.start() // attempt 2
	m.sup.Stop("test")

	numbers := func(name string) []int64 {
		var got []int64
		for _, s := range rec.Started() {
			if s.Name() != name {
				continue
			}
			for _, a := range s.Attributes() {
				if a.Key == tracing.Attempt {
					got = append(got, a.Value.AsInt64())
				}
			}
		}
		return got
	}
	if got := numbers(tracing.SpanConnectAttempt); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("connect attempts numbered %v, want [1 2]", got)
	}
	if got := numbers(tracing.SpanBackoffWait); !slices.Equal(got, []int64{2}) {
		t.Errorf("backoff waits numbered %v, want [2]", got)
	}
	// The line that says the wait numbers the attempt it precedes and
	// belongs to the wait's span.
	var wait trace.SpanContext
	for _, s := range rec.Started() {
		if s.Name() == tracing.SpanBackoffWait {
			wait = s.SpanContext()
		}
	}
	lines := m.moves.logged("waiting before the next attempt")
	if len(lines) != 1 || lines[0].attrs["attempt"].Int64() != 2 || !lines[0].span.Equal(wait) || !wait.IsValid() {
		t.Errorf("the wait's lines %+v, want one for attempt 2 in span %v", lines, wait.SpanID())
	}
}
