package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// The OTEL_* variables Setup reads to decide whether to trace. The
// exporter reads the other OTEL_EXPORTER_OTLP_* ones (exportconfig.go); the
// SDK reads OTEL_TRACES_SAMPLER, OTEL_BSP_*, OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES.
const (
	envSDKDisabled    = "OTEL_SDK_DISABLED"
	envTracesExporter = "OTEL_TRACES_EXPORTER"
	envEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	envTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	envProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	envTracesProtocol = "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"
)

// Pipeline is the export pipeline Setup built; its zero value (tracing off)
// is ready to use.
type Pipeline struct {
	tp *sdktrace.TracerProvider // nil when tracing is off
}

// Enabled reports whether spans are exported.
func (p *Pipeline) Enabled() bool { return p != nil && p.tp != nil }

// Logger returns l with trace and span ids on the lines logged with a
// traced context (see NewLogHandler) when tracing is on, l itself when off.
func (p *Pipeline) Logger(l *slog.Logger) *slog.Logger {
	if !p.Enabled() {
		return l
	}
	return slog.New(NewLogHandler(l.Handler()))
}

// Shutdown exports the spans still buffered and stops the exporter, within
// ctx. Nothing to do when tracing is off.
func (p *Pipeline) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("tracing: shutdown: %w", err)
	}
	return nil
}

// Setup installs tether's tracer provider and W3C propagator as the
// OpenTelemetry globals when the environment asks for tracing: when
// OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set,
// or OTEL_TRACES_EXPORTER=otlp; never when OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none. Spans go over OTLP/HTTP (http/protobuf) through
// a batch processor. Otherwise it installs nothing and the OpenTelemetry
// API stays a no-op.
//
// As the OpenTelemetry specification asks of an SDK, a setting tether does
// not support (another exporter, the grpc protocol) or cannot use (an
// endpoint that is not an http(s) URL, a certificate file that does not
// load) is logged and leaves tracing off rather than stopping tether; one
// it can do without (a malformed header entry, timeout or compression) is
// logged and ignored. log receives that, the exporter's errors (repeats at
// most once a minute) and one line when tracing is on.
func Setup(ctx context.Context, version string, log *slog.Logger) (*Pipeline, error) {
	on, note := wanted(os.Getenv)
	if note != "" {
		log.Warn("tracing: " + note)
	}
	if !on {
		return &Pipeline{}, nil
	}
	cfg, notes, err := exportConfigFromEnv(os.Getenv, os.ReadFile)
	for _, n := range notes {
		log.Warn("tracing: " + n)
	}
	if err != nil {
		log.Warn("tracing: " + err.Error() + "; tracing stays off")
		return &Pipeline{}, nil
	}
	exp := newExporter(cfg, version)
	// Later options win: the environment (OTEL_SERVICE_NAME,
	// OTEL_RESOURCE_ATTRIBUTES) overrides tether's defaults.
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(
			attribute.String("service.name", "tether"),
			attribute.String("service.version", version),
		),
		resource.WithFromEnv(),
	)
	if err != nil {
		// A partial resource (a bad OTEL_RESOURCE_ATTRIBUTES entry) is
		// still usable: say so and go on.
		log.Warn("tracing: resource", "err", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetErrorHandler(newErrorLog(log, time.Minute))
	otel.SetLogger(logr.FromSlogHandler(log.Handler()))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	log.Info("tracing on", "exporter", "otlp", "protocol", "http/protobuf", "endpoint", RedactURL(cfg.url))
	return &Pipeline{tp: tp}, nil
}

// wanted decides from the environment whether to trace, and whether a
// setting is worth a warning.
func wanted(getenv func(string) string) (on bool, note string) {
	if strings.EqualFold(strings.TrimSpace(getenv(envSDKDisabled)), "true") {
		return false, ""
	}
	otlp := false
	if v := strings.TrimSpace(getenv(envTracesExporter)); v != "" {
		var unsupported []string
		for _, e := range strings.Split(v, ",") {
			switch e = strings.ToLower(strings.TrimSpace(e)); e {
			case "none":
				return false, ""
			case "otlp":
				otlp = true
			case "":
			default:
				unsupported = append(unsupported, e)
			}
		}
		if len(unsupported) > 0 {
			note = fmt.Sprintf("%s=%s: tether exports traces with otlp only, ignoring %s",
				envTracesExporter, v, strings.Join(unsupported, ","))
		}
		if !otlp {
			return false, note + "; tracing stays off"
		}
	}
	if !otlp && getenv(envEndpoint) == "" && getenv(envTracesEndpoint) == "" {
		return false, note
	}
	proto := getenv(envTracesProtocol)
	if proto == "" {
		proto = getenv(envProtocol)
	}
	if proto = strings.TrimSpace(proto); proto != "" && proto != "http/protobuf" {
		if note != "" {
			note += "; "
		}
		return false, note + fmt.Sprintf("OTLP protocol %q: tether exports traces over http/protobuf only; tracing stays off", proto)
	}
	return true, note
}

// errorLog logs the SDK's errors (failed exports, mostly) as warnings; the
// same message again within every is counted, not logged, so that a
// collector that is down costs one line a minute, not one per batch.
type errorLog struct {
	log   *slog.Logger
	every time.Duration

	mu         sync.Mutex
	last       string
	lastLogged time.Time
	suppressed int
}

func newErrorLog(log *slog.Logger, every time.Duration) *errorLog {
	return &errorLog{log: log, every: every}
}

func (e *errorLog) Handle(err error) {
	msg := err.Error()
	now := time.Now()
	e.mu.Lock()
	if msg == e.last && now.Sub(e.lastLogged) < e.every {
		e.suppressed++
		e.mu.Unlock()
		return
	}
	suppressed := e.suppressed
	e.last, e.lastLogged, e.suppressed = msg, now, 0
	e.mu.Unlock()
	e.log.Warn("tracing: export error", "err", msg, "repeats", suppressed)
}
