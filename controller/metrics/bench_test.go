package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/httpguard"
	"github.com/tether-mcp/tether/spec"
)

// benchConnections is the scale tether is measured at (README, Performance).
const benchConnections = 1000

func benchNames() []string {
	names := make([]string, benchConnections)
	for i := range names {
		names[i] = fmt.Sprintf("connection-%04d", i)
	}
	return names
}

// populate gives every connection what a connected one has after a while:
// its phase, tools, an attempt, a few probes and calls of each result.
func populate(m *Metrics, names []string) {
	for _, n := range names {
		m.ConnectionAdded(n)
		m.SetPhase(n, spec.PhaseConnecting)
		m.ObserveAttempt(n, true)
		m.SetPhase(n, spec.PhaseConnected)
		m.SetTools(n, 12)
		m.SetCollisions(n, 0)
		for i := range 3 {
			m.ObserveHealthCheck(n, time.Duration(i+1)*time.Millisecond)
		}
		for _, r := range callResults {
			m.ObserveCall(n, r, 2*time.Millisecond)
		}
	}
}

func heapAlloc() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkConnectionMemory reports the live heap one connection's series
// cost (B/conn): the HeapAlloc delta, after a GC, of populating 1,000
// connections, divided by 1,000. Names are made before the first reading:
// they belong to the manifests, not to the metrics.
func BenchmarkConnectionMemory(b *testing.B) {
	names := benchNames()
	var perConn float64
	for b.Loop() {
		m := New("bench")
		before := heapAlloc()
		populate(m, names)
		after := heapAlloc()
		runtime.KeepAlive(m)
		perConn += (float64(after) - float64(before)) / benchConnections
	}
	b.ReportMetric(perConn/float64(b.N), "B/conn")
}

// BenchmarkObserveCall is the gateway's hot path: one call per tools/call,
// spread over 1,000 known connections.
func BenchmarkObserveCall(b *testing.B) {
	names := benchNames()
	m := New("bench")
	populate(m, names)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.ObserveCall(names[i%benchConnections], CallOK, 3*time.Millisecond)
		i++
	}
}

// BenchmarkObserveCallParallel is the same from every P at once, as the
// gateway serves concurrent calls.
func BenchmarkObserveCallParallel(b *testing.B) {
	names := benchNames()
	m := New("bench")
	populate(m, names)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.ObserveCall(names[i%benchConnections], CallOK, 3*time.Millisecond)
			i++
		}
	})
}

// BenchmarkObserveHealthCheck is the probe's path, once per probe.
func BenchmarkObserveHealthCheck(b *testing.B) {
	names := benchNames()
	m := New("bench")
	populate(m, names)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		m.ObserveHealthCheck(names[i%benchConnections], 4*time.Millisecond)
		i++
	}
}

// discard is a ResponseWriter that keeps nothing, so that a scrape costs
// what the handler does and not what a buffer grows to.
type discard struct{ h http.Header }

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(int)             {}

// BenchmarkScrape is one GET /metrics (text format, uncompressed) at 1,000
// connections: every collector, the Go and process ones included. It also
// reports the CPU time of the scrape (cpu-ns/op), GC included, which a busy
// machine disturbs less than ns/op.
func BenchmarkScrape(b *testing.B) {
	m := New("bench")
	populate(m, benchNames())
	h := m.Handler(nil, httpguard.Origins{})
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		start := cpuTime()
		w := &discard{h: http.Header{}}
		h.ServeHTTP(w, req)
		cpu += cpuTime() - start
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}
