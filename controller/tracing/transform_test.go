package tracing

import (
	"math"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Helpers that build the expected OTLP values by hand, independently of
// the code under test.
func sv(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}
func iv(n int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: n}}
}
func bv(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}
func dv(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}
func arr(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}
func kv(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

// TestAttributeValues covers every attribute.Type, one at a time, through
// the real protobuf encoding.
func TestAttributeValues(t *testing.T) {
	tests := []struct {
		name string
		in   attribute.KeyValue
		want *commonpb.AnyValue
	}{
		{"empty", attribute.KeyValue{Key: "e"}, &commonpb.AnyValue{}},
		{"bool", attribute.Bool("b", true), bv(true)},
		{"int64", attribute.Int64("i", math.MinInt64), iv(math.MinInt64)},
		{"int", attribute.Int("i", 42), iv(42)},
		{"float64", attribute.Float64("f", -1.5), dv(-1.5)},
		{"float64 NaN-free extreme", attribute.Float64("f", math.MaxFloat64), dv(math.MaxFloat64)},
		{"string", attribute.String("s", "héllo"), sv("héllo")},
		{"empty string", attribute.String("s", ""), sv("")},
		{"bytes", attribute.ByteSlice("y", []byte{0, 1, 0xff}), &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 1, 0xff}}}},
		{"bool slice", attribute.BoolSlice("bs", []bool{true, false}), arr(bv(true), bv(false))},
		{"int64 slice", attribute.Int64Slice("is", []int64{1, -2, 3}), arr(iv(1), iv(-2), iv(3))},
		{"float64 slice", attribute.Float64Slice("fs", []float64{0.25, 2}), arr(dv(0.25), dv(2))},
		{"string slice", attribute.StringSlice("ss", []string{"a", "", "c"}), arr(sv("a"), sv(""), sv("c"))},
		{"empty string slice", attribute.StringSlice("ss", nil), arr()},
		{"slice of mixed values", attribute.Slice("m", attribute.IntValue(1), attribute.StringValue("two"),
			attribute.SliceValue(attribute.BoolValue(true))), arr(iv(1), sv("two"), arr(bv(true)))},
		{"map", attribute.Map("kv", attribute.String("a", "x"), attribute.Int("b", 2),
			attribute.KeyValue{Key: "c", Value: attribute.MapValue(attribute.Bool("d", false))}),
			&commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{
				kv("a", sv("x")), kv("b", iv(2)),
				kv("c", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{Values: []*commonpb.KeyValue{kv("d", bv(false))}}}}),
			}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := roundTrip(t, []sdktrace.ReadOnlySpan{tracetest.SpanStub{Name: "s", Attributes: []attribute.KeyValue{tt.in}}.Snapshot()})
			attrs := got.GetResourceSpans()[0].GetScopeSpans()[0].GetSpans()[0].GetAttributes()
			if len(attrs) != 1 || attrs[0].GetKey() != string(tt.in.Key) {
				t.Fatalf("attributes = %v, want one named %q", attrs, tt.in.Key)
			}
			if !proto.Equal(attrs[0].GetValue(), tt.want) {
				t.Errorf("value:\n got %v\nwant %v", prototext.Format(attrs[0].GetValue()), prototext.Format(tt.want))
			}
		})
	}
}

// roundTrip converts spans, encodes the request and decodes it with the
// official ExportTraceServiceRequest type, as a collector would.
func roundTrip(t *testing.T, spans []sdktrace.ReadOnlySpan) *coltracepb.ExportTraceServiceRequest {
	t.Helper()
	b, err := marshalExportRequest(resourceSpans(spans))
	if err != nil {
		t.Fatal(err)
	}
	var req coltracepb.ExportTraceServiceRequest
	if err := proto.Unmarshal(b, &req); err != nil {
		t.Fatalf("the payload does not decode as ExportTraceServiceRequest: %v", err)
	}
	return &req
}

// TestSpanConversion compares a whole request field by field with one
// built by hand: ids, parent, kind, times, attributes, events, links,
// status, dropped counts, trace state, flags, resources and scopes, grouped
// per resource and per scope in the order their first span came.
func TestSpanConversion(t *testing.T) {
	ts, err := trace.ParseTraceState("vendor=a,other=b")
	if err != nil {
		t.Fatal(err)
	}
	linkTS, _ := trace.ParseTraceState("l=1")
	tid2 := trace.TraceID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	sid2 := trace.SpanID{0xbb, 1, 2, 3, 4, 5, 6, 7}
	sid3 := trace.SpanID{0xcc, 1, 2, 3, 4, 5, 6, 7}
	parentSID := trace.SpanID{0xdd, 1, 2, 3, 4, 5, 6, 7}
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts})
	remoteParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: parentSID, TraceFlags: trace.FlagsSampled, Remote: true})
	localParent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid2, SpanID: sid2, TraceState: linkTS, Remote: true})
	linkedLocal := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid2, SpanID: sid3, TraceFlags: trace.FlagsSampled})

	start := time.Unix(1700000000, 123456789)
	end := start.Add(1500 * time.Millisecond)
	resA := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
		attribute.String("service.name", "tether"), attribute.String("service.version", "v1"))
	resB := resource.NewSchemaless(attribute.String("service.name", "other"))
	scope1 := instrumentation.Scope{Name: ScopeName, Version: "1.0", SchemaURL: "https://example.com/s", Attributes: attribute.NewSet(attribute.Bool("scope.attr", true))}
	scope2 := instrumentation.Scope{Name: "second"}

	spans := tracetest.SpanStubs{
		{
			Name: "full", SpanContext: sc, Parent: remoteParent, SpanKind: trace.SpanKindServer,
			StartTime: start, EndTime: end,
			Attributes: []attribute.KeyValue{Server.String("one"), Attempt.Int(3)},
			Events: []sdktrace.Event{
				{Name: "ev1", Time: start.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.Bool("x", true)}, DroppedAttributeCount: 2},
				{Name: "ev2", Time: start.Add(2 * time.Millisecond)},
			},
			Links: []sdktrace.Link{
				{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("why", "retry")}, DroppedAttributeCount: 1},
				{SpanContext: linkedLocal},
			},
			Status:            sdktrace.Status{Code: codes.Error, Description: "boom"},
			DroppedAttributes: 4, DroppedEvents: 5, DroppedLinks: 6,
			Resource: resA, InstrumentationScope: scope1,
		},
		// Same resource, another scope.
		{Name: "second-scope", SpanContext: sc, SpanKind: trace.SpanKindClient, StartTime: start, EndTime: end,
			Status: sdktrace.Status{Code: codes.Ok}, Resource: resA, InstrumentationScope: scope2},
		// Another resource, no scope, local parent, unset status and end.
		{Name: "other-resource", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid2, SpanID: sid3}),
			Parent: localParent, SpanKind: trace.SpanKindProducer, StartTime: start, Resource: resB},
		// Back to the first resource and scope: grouped with the first.
		{Name: "first-again", SpanContext: sc, SpanKind: trace.SpanKindConsumer, StartTime: start, EndTime: end,
			Resource: resA, InstrumentationScope: scope1},
		// An equal resource built separately groups with resA too.
		{Name: "equal-resource", SpanContext: sc, SpanKind: trace.SpanKindInternal, StartTime: start, EndTime: end,
			Resource: resource.NewWithAttributes("https://opentelemetry.io/schemas/1.26.0",
				attribute.String("service.version", "v1"), attribute.String("service.name", "tether")),
			InstrumentationScope: scope1},
	}.Snapshots()

	const hasRemote, isRemote = 0x100, 0x200
	startNs, endNs := uint64(start.UnixNano()), uint64(end.UnixNano())
	plain := func(name string, kind tracepb.Span_SpanKind) *tracepb.Span {
		return &tracepb.Span{
			TraceId: tid[:], SpanId: sid[:], TraceState: "vendor=a,other=b", Name: name, Kind: kind,
			StartTimeUnixNano: startNs, EndTimeUnixNano: endNs, Status: &tracepb.Status{},
			Flags: 0x01 | hasRemote,
		}
	}
	secondScope := plain("second-scope", tracepb.Span_SPAN_KIND_CLIENT)
	secondScope.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK}
	want := &coltracepb.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{
		{
			Resource:  &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", sv("tether")), kv("service.version", sv("v1"))}},
			SchemaUrl: "https://opentelemetry.io/schemas/1.26.0",
			ScopeSpans: []*tracepb.ScopeSpans{
				{
					Scope:     &commonpb.InstrumentationScope{Name: ScopeName, Version: "1.0", Attributes: []*commonpb.KeyValue{kv("scope.attr", bv(true))}},
					SchemaUrl: "https://example.com/s",
					Spans: []*tracepb.Span{
						{
							TraceId: tid[:], SpanId: sid[:], ParentSpanId: parentSID[:], TraceState: "vendor=a,other=b",
							Name: "full", Kind: tracepb.Span_SPAN_KIND_SERVER,
							StartTimeUnixNano: startNs, EndTimeUnixNano: endNs,
							Attributes:             []*commonpb.KeyValue{kv("mcp.server", sv("one")), kv("mcp.attempt", iv(3))},
							DroppedAttributesCount: 4,
							Events: []*tracepb.Span_Event{
								{Name: "ev1", TimeUnixNano: startNs + 1e6, Attributes: []*commonpb.KeyValue{kv("x", bv(true))}, DroppedAttributesCount: 2},
								{Name: "ev2", TimeUnixNano: startNs + 2e6},
							},
							DroppedEventsCount: 5,
							Links: []*tracepb.Span_Link{
								{TraceId: tid2[:], SpanId: sid2[:], TraceState: "l=1", Attributes: []*commonpb.KeyValue{kv("why", sv("retry"))},
									DroppedAttributesCount: 1, Flags: hasRemote | isRemote},
								{TraceId: tid2[:], SpanId: sid3[:], Flags: 0x01 | hasRemote},
							},
							DroppedLinksCount: 6,
							Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "boom"},
							Flags:             0x01 | hasRemote | isRemote,
						},
						plain("first-again", tracepb.Span_SPAN_KIND_CONSUMER),
						plain("equal-resource", tracepb.Span_SPAN_KIND_INTERNAL),
					},
				},
				{Scope: &commonpb.InstrumentationScope{Name: "second"}, Spans: []*tracepb.Span{secondScope}},
			},
		},
		{
			Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", sv("other"))}},
			ScopeSpans: []*tracepb.ScopeSpans{{Spans: []*tracepb.Span{{
				TraceId: tid2[:], SpanId: sid3[:], ParentSpanId: sid[:], Name: "other-resource",
				Kind: tracepb.Span_SPAN_KIND_PRODUCER, StartTimeUnixNano: startNs, EndTimeUnixNano: 0,
				Status: &tracepb.Status{}, Flags: hasRemote,
			}}}},
		},
	}}

	got := roundTrip(t, spans)
	if !proto.Equal(got, want) {
		t.Errorf("request differs:\n got: %s\nwant: %s", prototext.Format(got), prototext.Format(want))
	}
}

func TestConversionEdgeCases(t *testing.T) {
	if rss := resourceSpans(nil); rss != nil {
		t.Errorf("no spans gave %v", rss)
	}
	b, err := marshalExportRequest(nil)
	if err != nil || len(b) != 0 {
		t.Errorf("empty request = %x, %v; want no bytes (an empty message)", b, err)
	}
	// A span without a resource (not what the SDK produces) still converts.
	got := roundTrip(t, []sdktrace.ReadOnlySpan{tracetest.SpanStub{Name: "bare", StartTime: time.Unix(-5, 0), DroppedEvents: -1}.Snapshot()})
	rs := got.GetResourceSpans()
	if len(rs) != 1 || rs[0].Resource != nil {
		t.Fatalf("resource spans = %v", prototext.Format(got))
	}
	sp := rs[0].GetScopeSpans()[0].GetSpans()[0]
	if sp.GetStartTimeUnixNano() != 0 || sp.GetDroppedEventsCount() != 0 {
		t.Errorf("a time before 1970 or a negative count must become 0: %v", prototext.Format(sp))
	}
	if clampUint32(math.MaxInt) != math.MaxUint32 {
		t.Error("clampUint32 does not clamp")
	}
}
