// Package tracingtest helps tests look at tether's spans: an OTLP/HTTP
// receiver that decodes what a real exporter sends, and a span recorder
// behind the global tracer provider for code that traces through the
// OpenTelemetry globals. It is for tests only.
package tracingtest

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Span is one span as an OTLP receiver got it, flattened for assertions.
type Span struct {
	Service       string // resource service.name
	Scope         string
	Name          string
	TraceID       string // hex
	SpanID        string
	ParentSpanID  string // "" for a root span
	Kind          tracepb.Span_SpanKind
	Attrs         map[string]string // values rendered as text
	StatusCode    tracepb.Status_StatusCode
	StatusMessage string
	Links         []string // linked span ids
	Start, End    time.Time
}

// Receiver is an OTLP/HTTP trace receiver (POST /v1/traces,
// application/x-protobuf, optionally gzip) on a loopback port.
type Receiver struct {
	*httptest.Server

	mu       sync.Mutex
	spans    []Span
	requests int
	errs     []string
}

// NewReceiver starts a receiver that stops when the test ends.
func NewReceiver(t testing.TB) *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(r.Close)
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	if req.Method != http.MethodPost || req.URL.Path != "/v1/traces" {
		r.fail(w, http.StatusNotFound, fmt.Sprintf("%s %s", req.Method, req.URL.Path))
		return
	}
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		r.fail(w, http.StatusUnsupportedMediaType, "content type "+ct)
		return
	}
	var body io.Reader = req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			r.fail(w, http.StatusBadRequest, err.Error())
			return
		}
		body = zr
	}
	data, err := io.ReadAll(body)
	if err != nil {
		r.fail(w, http.StatusBadRequest, err.Error())
		return
	}
	var msg coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		r.fail(w, http.StatusBadRequest, "decoding ExportTraceServiceRequest: "+err.Error())
		return
	}
	spans := flatten(&msg)
	out, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	if err != nil {
		r.fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	r.mu.Lock()
	r.spans = append(r.spans, spans...)
	r.requests++
	r.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

func (r *Receiver) fail(w http.ResponseWriter, code int, msg string) {
	r.mu.Lock()
	r.errs = append(r.errs, msg)
	r.mu.Unlock()
	http.Error(w, msg, code)
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Span(nil), r.spans...)
}

// Errors returns what the receiver refused (wrong path, type, payload).
func (r *Receiver) Errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// WaitFor polls until ok accepts the spans received so far and returns
// them, or fails the test after timeout with what arrived.
func (r *Receiver) WaitFor(t testing.TB, timeout time.Duration, what string, ok func([]Span) bool) []Span {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		spans := r.Spans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("OTLP receiver: no %s within %v; refused %q; got %d spans:\n%s", what, timeout, r.Errors(), len(spans), Dump(spans))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Dump renders spans one per line, for failure messages.
func Dump(spans []Span) string {
	var b strings.Builder
	for _, s := range spans {
		fmt.Fprintf(&b, "  %s span=%s parent=%s trace=%s status=%v %q attrs=%v links=%v\n",
			s.Name, s.SpanID, s.ParentSpanID, s.TraceID, s.StatusCode, s.StatusMessage, s.Attrs, s.Links)
	}
	return b.String()
}

func flatten(msg *coltracepb.ExportTraceServiceRequest) []Span {
	var out []Span
	for _, rs := range msg.GetResourceSpans() {
		service := attrs(rs.GetResource().GetAttributes())["service.name"]
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s := Span{
					Service:       service,
					Scope:         ss.GetScope().GetName(),
					Name:          sp.GetName(),
					TraceID:       hex.EncodeToString(sp.GetTraceId()),
					SpanID:        hex.EncodeToString(sp.GetSpanId()),
					Kind:          sp.GetKind(),
					Attrs:         attrs(sp.GetAttributes()),
					StatusCode:    sp.GetStatus().GetCode(),
					StatusMessage: sp.GetStatus().GetMessage(),
					Start:         time.Unix(0, int64(sp.GetStartTimeUnixNano())),
					End:           time.Unix(0, int64(sp.GetEndTimeUnixNano())),
				}
				if p := sp.GetParentSpanId(); len(p) > 0 && !bytes.Equal(p, make([]byte, len(p))) {
					s.ParentSpanID = hex.EncodeToString(p)
				}
				for _, l := range sp.GetLinks() {
					s.Links = append(s.Links, hex.EncodeToString(l.GetSpanId()))
				}
				out = append(out, s)
			}
		}
	}
	return out
}

func attrs(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		m[kv.GetKey()] = value(kv.GetValue())
	}
	return m
}

func value(v *commonpb.AnyValue) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	}
	return v.String()
}
