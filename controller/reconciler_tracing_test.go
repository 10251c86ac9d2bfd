package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/spec"
)

// spanAttr returns a span attribute rendered as text, "" when absent.
func spanAttr(s sdktrace.ReadOnlySpan, key string) string {
	for _, kv := range s.Attributes() {
		if string(kv.Key) == key {
			return kv.Value.String()
		}
	}
	return ""
}

// spansNamed returns the ended spans called name, in the order they started.
func spansNamed(rec *tracetest.SpanRecorder, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range rec.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	for i := 1; i < len(out); i++ { // insertion sort: a handful of spans
		for j := i; j > 0 && out[j].StartTime().Before(out[j-1].StartTime()); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// byID indexes ended spans by span id.
func byID(rec *tracetest.SpanRecorder) map[trace.SpanID]sdktrace.ReadOnlySpan {
	m := map[trace.SpanID]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		m[s.SpanContext().SpanID()] = s
	}
	return m
}

func linksTo(s sdktrace.ReadOnlySpan, target sdktrace.ReadOnlySpan) bool {
	for _, l := range s.Links() {
		if l.SpanContext.SpanID() == target.SpanContext().SpanID() {
			return true
		}
	}
	return false
}

func dumpSpans(rec *tracetest.SpanRecorder) string {
	var b strings.Builder
	for _, s := range rec.Ended() {
		b.WriteString("  " + s.Name() + " span=" + s.SpanContext().SpanID().String() + " parent=" + s.Parent().SpanID().String())
		for _, kv := range s.Attributes() {
			b.WriteString(" " + string(kv.Key) + "=" + kv.Value.String())
		}
		b.WriteString(" status=" + s.Status().Code.String() + " " + s.Status().Description + "\n")
	}
	return b.String()
}

// waitSpans waits until ok accepts the recorder's ended spans.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 10s; spans:\n%s", what, dumpSpans(rec))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// syncBuf is a log sink the controller's goroutines write to.
type syncBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the JSON log records whose msg is msg.
func (b *syncBuf) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range bytes.Split(b.buf.Bytes(), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, l)
		}
		if m["msg"] == msg {
			out = append(out, m)
		}
	}
	return out
}

// TestTraceFailTwiceThenConnect runs the whole controller (workers, queue,
// requeue after backoff) against a connector that fails twice, and checks
// the span tree: every attempt is a child of the reconcile that started
// it, every wait a child of the reconcile that decided it, and links chain
// attempt → wait → next attempt.
func TestTraceFailTwiceThenConnect(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "one.yaml"),
		[]byte(manifestYAML("one", "  backoff: {initial: 10ms, max: 40ms}\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	conn := &fakeConnector{}
	conn.push(errors.New("connection refused #1"), errors.New("connection refused #2"), newFakeSession("a"))
	logs := &syncBuf{}
	ctrl := New(onTree(dir, Options{
		Connector:      conn,
		Logger:         slog.New(tracing.NewLogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))),
		TracerProvider: tp,
		Workers:        1,
	}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	// The fake connector answers at once: an attempt may end before the
	// reconcile that started it. Wait for both.
	waitSpans(t, rec, "successful mcp.connect_attempt and its reconcile", func() bool {
		all := byID(rec)
		for _, s := range spansNamed(rec, tracing.SpanConnectAttempt) {
			if spanAttr(s, string(tracing.Result)) == tracing.ResultSuccess {
				_, parentEnded := all[s.Parent().SpanID()]
				return parentEnded
			}
		}
		return false
	})
	attempts := spansNamed(rec, tracing.SpanConnectAttempt)
	waits := spansNamed(rec, tracing.SpanBackoffWait)
	all := byID(rec)
	if len(attempts) != 3 || len(waits) != 2 {
		t.Fatalf("got %d attempts and %d waits, want 3 and 2:\n%s", len(attempts), len(waits), dumpSpans(rec))
	}

	want := []struct {
		result, errPart string
		status          codes.Code
	}{
		{tracing.ResultFailure, "connection refused #1", codes.Error},
		{tracing.ResultFailure, "connection refused #2", codes.Error},
		{tracing.ResultSuccess, "", codes.Unset},
	}
	for i, a := range attempts {
		w := want[i]
		for key, val := range map[string]string{
			string(tracing.Server):    "one",
			string(tracing.Endpoint):  "server",
			string(tracing.Transport): "stdio",
			string(tracing.Attempt):   []string{"1", "2", "3"}[i],
			string(tracing.Result):    w.result,
		} {
			if got := spanAttr(a, key); got != val {
				t.Errorf("attempt %d: %s = %q, want %q", i+1, key, got, val)
			}
		}
		if a.Status().Code != w.status || !strings.Contains(a.Status().Description, w.errPart) {
			t.Errorf("attempt %d: status %v %q, want %v containing %q", i+1, a.Status().Code, a.Status().Description, w.status, w.errPart)
		}
		if a.SpanKind() != trace.SpanKindClient {
			t.Errorf("attempt %d: kind %v, want client", i+1, a.SpanKind())
		}
		parent, ok := all[a.Parent().SpanID()]
		if !ok || parent.Name() != tracing.SpanReconcile || parent.SpanContext().TraceID() != a.SpanContext().TraceID() {
			t.Errorf("attempt %d: parent is not an ended mcp.reconcile of its trace (found %v)", i+1, ok)
		}
		if i > 0 && !linksTo(a, waits[i-1]) {
			t.Errorf("attempt %d does not link to the wait before it", i+1)
		}
	}
	for i, w := range waits {
		parent, ok := all[w.Parent().SpanID()]
		if !ok || parent.Name() != tracing.SpanReconcile {
			t.Errorf("wait %d: parent is not an mcp.reconcile", i+1)
		} else if parent.SpanContext().SpanID() == attempts[i+1].Parent().SpanID() {
			t.Errorf("wait %d and the attempt after it have the same reconcile: the wait was not a requeue", i+1)
		}
		if got := spanAttr(w, string(tracing.Attempt)); got != []string{"2", "3"}[i] {
			t.Errorf("wait %d: attempt = %s, want the attempt it precedes", i+1, got)
		}
		if got := spanAttr(w, string(tracing.BackoffOutcome)); got != "retry" {
			t.Errorf("wait %d: outcome = %q, want retry", i+1, got)
		}
		// 10ms then 20ms, jittered down by at most 20%.
		maxMs := []int{10, 20}[i]
		if d, err := strconv.Atoi(spanAttr(w, string(tracing.BackoffDelayMs))); err != nil || d < maxMs*8/10 || d > maxMs {
			t.Errorf("wait %d: delay_ms = %d (%v), want in [%d, %d]", i+1, d, err, maxMs*8/10, maxMs)
		}
		if !linksTo(w, attempts[i]) {
			t.Errorf("wait %d does not link to the failed attempt", i+1)
		}
		// The wait covers the gap between the two attempts.
		if w.StartTime().Before(attempts[i].EndTime()) || w.EndTime().After(attempts[i+1].StartTime()) {
			t.Errorf("wait %d [%v, %v] is not between attempt %d's end %v and the next start %v",
				i+1, w.StartTime(), w.EndTime(), i+1, attempts[i].EndTime(), attempts[i+1].StartTime())
		}
	}
	for _, r := range spansNamed(rec, tracing.SpanReconcile) {
		if spanAttr(r, string(tracing.Server)) != "one" || r.Status().Code == codes.Error || r.Parent().IsValid() {
			t.Errorf("reconcile span %s: server %q, status %v, parent valid %v", r.SpanContext().SpanID(),
				spanAttr(r, string(tracing.Server)), r.Status().Code, r.Parent().IsValid())
		}
	}

	// Log lines about the attempts carry their span's ids.
	connecting := logs.lines(t, "connecting")
	failed := logs.lines(t, "connection attempt failed; will retry")
	if len(connecting) < 3 || len(failed) < 2 {
		t.Fatalf("%d connecting and %d failed lines, want 3 and 2", len(connecting), len(failed))
	}
	for i := range 3 {
		id := attempts[i].SpanContext()
		if connecting[i]["span_id"] != id.SpanID().String() || connecting[i]["trace_id"] != id.TraceID().String() ||
			connecting[i]["connection"] != "one" {
			t.Errorf("connecting line %d = %v, want the ids of attempt %d", i+1, connecting[i], i+1)
		}
		if i < 2 && failed[i]["span_id"] != id.SpanID().String() {
			t.Errorf("failure line %d = %v, want the span id of attempt %d", i+1, failed[i], i+1)
		}
	}
}

// newTracedHarness is newHarness with a tracer provider that records.
func newTracedHarness(t *testing.T) (*harness, *tracetest.SpanRecorder) {
	t.Helper()
	rec := tracetest.NewSpanRecorder()
	h := newHarnessWith(t, func(o *ReconcilerOptions) {
		o.TracerProvider = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	})
	return h, rec
}

// TestTraceHealthCheckFailure: failed probes are mcp.health_check spans with
// an error status and a running count; the reconcile that takes the
// connection down starts a backoff wait, which the reconnect ends.
func TestTraceHealthCheckFailure(t *testing.T) {
	h, rec := newTracedHarness(t)
	s1 := newFakeSession("a")
	s1.probeErr = func() error { return errors.New("ping: connection refused") }
	h.conn.push(s1, newFakeSession("a"))
	h.apply("one.yaml", manifestYAML("one", "  healthCheck: {interval: 10ms, timeout: 1s, failureThreshold: 2}\n"))
	connectOnce(h, "one.yaml", "one")
	h.waitEnqueued("one") // first failure
	h.waitEnqueued("one") // second failure: down
	h.reconcile("one")
	if st := h.statusOf("one.yaml", "one"); st.Phase != spec.PhaseReconnecting {
		t.Fatalf("phase = %s, want Reconnecting", st.Phase)
	}
	h.retryNow("one")
	connectOnce(h, "one.yaml", "one")

	checks := spansNamed(rec, tracing.SpanHealthCheck)
	if len(checks) < 2 {
		t.Fatalf("%d health checks, want 2:\n%s", len(checks), dumpSpans(rec))
	}
	for i, c := range checks[:2] {
		for key, val := range map[string]string{
			string(tracing.Server):          "one",
			string(tracing.Endpoint):        "server",
			string(tracing.Result):          tracing.ResultFailure,
			string(tracing.HealthFailures):  []string{"1", "2"}[i],
			string(tracing.HealthThreshold): "2",
		} {
			if got := spanAttr(c, key); got != val {
				t.Errorf("check %d: %s = %q, want %q", i+1, key, got, val)
			}
		}
		if c.Status().Code != codes.Error || !strings.Contains(c.Status().Description, "connection refused") {
			t.Errorf("check %d: status %v %q", i+1, c.Status().Code, c.Status().Description)
		}
		if c.Parent().IsValid() {
			t.Errorf("check %d has a parent; a probe is a root span", i+1)
		}
		if len(c.Events()) == 0 || c.Events()[0].Name != "exception" {
			t.Errorf("check %d: the error is not recorded as an event", i+1)
		}
	}

	waits := spansNamed(rec, tracing.SpanBackoffWait)
	attempts := spansNamed(rec, tracing.SpanConnectAttempt)
	if len(waits) != 1 || len(attempts) != 2 {
		t.Fatalf("%d waits and %d attempts, want 1 and 2:\n%s", len(waits), len(attempts), dumpSpans(rec))
	}
	w := waits[0]
	if len(w.Links()) != 0 {
		t.Errorf("a wait after a lost session links to %v; there is no failed attempt to link", w.Links())
	}
	if spanAttr(w, string(tracing.BackoffDelayMs)) != "100" || spanAttr(w, string(tracing.BackoffOutcome)) != "retry" {
		t.Errorf("wait: delay %s outcome %s, want 100 and retry", spanAttr(w, string(tracing.BackoffDelayMs)), spanAttr(w, string(tracing.BackoffOutcome)))
	}
	if w.StartTime().Before(checks[1].EndTime().Add(-time.Millisecond)) {
		t.Errorf("the wait started before the second failed check ended")
	}
	if !linksTo(attempts[1], w) || spanAttr(attempts[1], string(tracing.Result)) != tracing.ResultSuccess {
		t.Errorf("the reconnect does not follow the wait: links %v result %s", attempts[1].Links(), spanAttr(attempts[1], string(tracing.Result)))
	}
}

// TestTraceAbandonedWait: a wait that never leads to an attempt (the
// connection is suspended) still ends, saying why.
func TestTraceAbandonedWait(t *testing.T) {
	h, rec := newTracedHarness(t)
	h.conn.push(errors.New("refused"))
	h.apply("one.yaml", manifestYAML("one", ""))
	h.reconcile("one")
	h.waitEnqueued("one")
	if res := h.reconcile("one"); res.RequeueAfter == 0 {
		t.Fatal("no backoff after a failure")
	}
	if n := len(spansNamed(rec, tracing.SpanBackoffWait)); n != 0 {
		t.Fatalf("%d waits ended before anything ended them", n)
	}
	h.apply("one.yaml", manifestYAML("one", "  suspend: true\n"))
	h.reconcile("one")
	waits := spansNamed(rec, tracing.SpanBackoffWait)
	if len(waits) != 1 || spanAttr(waits[0], string(tracing.BackoffOutcome)) != "suspended" {
		t.Fatalf("waits after suspend:\n%s", dumpSpans(rec))
	}
}
