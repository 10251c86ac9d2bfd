package tracing

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/tracing/tracingtest"
)

func TestWanted(t *testing.T) {
	tests := []struct {
		name     string
		env      map[string]string
		on       bool
		notePart string
	}{
		{"nothing set", nil, false, ""},
		{"endpoint", map[string]string{envEndpoint: "http://127.0.0.1:4318"}, true, ""},
		{"traces endpoint", map[string]string{envTracesEndpoint: "http://c:4318/v1/traces"}, true, ""},
		{"exporter otlp alone", map[string]string{envTracesExporter: "otlp"}, true, ""},
		{"exporter none wins over endpoint", map[string]string{envTracesExporter: "none", envEndpoint: "http://c:4318"}, false, ""},
		{"sdk disabled", map[string]string{envSDKDisabled: "true", envEndpoint: "http://c:4318"}, false, ""},
		{"sdk disabled is case-insensitive", map[string]string{envSDKDisabled: "TRUE", envEndpoint: "http://c:4318"}, false, ""},
		{"sdk disabled false", map[string]string{envSDKDisabled: "false", envEndpoint: "http://c:4318"}, true, ""},
		{"unsupported exporter", map[string]string{envTracesExporter: "zipkin", envEndpoint: "http://c:4318"}, false, "otlp only"},
		{"otlp among others", map[string]string{envTracesExporter: "console, otlp"}, true, "ignoring console"},
		{"grpc protocol", map[string]string{envEndpoint: "http://c:4317", envProtocol: "grpc"}, false, `"grpc"`},
		{"traces protocol wins", map[string]string{envEndpoint: "http://c:4318", envProtocol: "grpc", envTracesProtocol: "http/protobuf"}, true, ""},
		{"http/json unsupported", map[string]string{envEndpoint: "http://c:4318", envTracesProtocol: "http/json"}, false, "http/protobuf only"},
		{"other OTEL vars alone", map[string]string{"OTEL_SERVICE_NAME": "x", "OTEL_EXPORTER_OTLP_HEADERS": "a=b"}, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			on, note := wanted(func(k string) string { return tt.env[k] })
			if on != tt.on {
				t.Errorf("on = %v, want %v (note %q)", on, tt.on, note)
			}
			if tt.notePart == "" && note != "" || !strings.Contains(note, tt.notePart) {
				t.Errorf("note = %q, want one containing %q", note, tt.notePart)
			}
		})
	}
}

func TestSetupOffInstallsNothing(t *testing.T) {
	for _, k := range []string{envSDKDisabled, envTracesExporter, envEndpoint, envTracesEndpoint, envProtocol, envTracesProtocol} {
		t.Setenv(k, "")
	}
	before := otel.GetTracerProvider()
	var logs bytes.Buffer
	p, err := Setup(context.Background(), "test", slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if p.Enabled() {
		t.Error("tracing on with no OTEL_* variable")
	}
	if otel.GetTracerProvider() != before {
		t.Error("Setup replaced the global tracer provider while off")
	}
	l := slog.New(slog.NewTextHandler(&logs, nil))
	if p.Logger(l) != l {
		t.Error("Logger wrapped the handler while off")
	}
	if err := p.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
	if logs.Len() != 0 {
		t.Errorf("Setup logged while off: %s", logs.String())
	}
	// The API's default stays a no-op: spans do not record.
	_, span := Tracer(nil).Start(context.Background(), "x")
	if span.IsRecording() {
		t.Error("a span records with tracing off")
	}
	span.End()
}

// TestSetupExports turns tracing on through the environment, as tether
// does, and finds a span with its resource in a real OTLP/HTTP payload.
func TestSetupExports(t *testing.T) {
	recv := tracingtest.NewReceiver(t)
	t.Setenv(envSDKDisabled, "")
	t.Setenv(envTracesExporter, "")
	t.Setenv(envProtocol, "")
	t.Setenv(envTracesProtocol, "")
	t.Setenv(envTracesEndpoint, "")
	t.Setenv(envEndpoint, recv.URL)
	t.Setenv("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20s3cret")
	t.Setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=test")
	t.Setenv("OTEL_SERVICE_NAME", "")
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	p, err := Setup(context.Background(), "v9.9.9", log)
	if err != nil {
		t.Fatal(err)
	}
	if !p.Enabled() {
		t.Fatalf("tracing off with %s set; log: %s", envEndpoint, logs.String())
	}
	if !strings.Contains(logs.String(), "tracing on") || !strings.Contains(logs.String(), recv.URL+"/v1/traces") {
		t.Errorf("no 'tracing on' line naming the endpoint: %s", logs.String())
	}
	if strings.Contains(logs.String(), "s3cret") {
		t.Errorf("a header value reached the log: %s", logs.String())
	}
	if len(otel.GetTextMapPropagator().Fields()) == 0 {
		t.Error("no global propagator installed")
	}
	_, span := Tracer(nil).Start(context.Background(), "setup-test", trace.WithAttributes(Server.String("one")))
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil { // flushes the batch
		t.Fatal(err)
	}
	spans := recv.WaitFor(t, 5*time.Second, "setup-test span", func(s []tracingtest.Span) bool { return len(s) > 0 })
	got := spans[0]
	if got.Name != "setup-test" || got.Service != "tether" || got.Scope != ScopeName || got.Attrs["mcp.server"] != "one" {
		t.Errorf("span = %+v", got)
	}
}

func TestErrorLogSuppressesRepeats(t *testing.T) {
	var logs bytes.Buffer
	e := newErrorLog(slog.New(slog.NewTextHandler(&logs, nil)), time.Hour)
	for range 5 {
		e.Handle(errors.New("connection refused"))
	}
	e.Handle(errors.New("timeout"))
	if n := strings.Count(logs.String(), "connection refused"); n != 1 {
		t.Errorf("the same error logged %d times, want 1:\n%s", n, logs.String())
	}
	if !strings.Contains(logs.String(), "timeout") {
		t.Errorf("a new error was suppressed:\n%s", logs.String())
	}
}
