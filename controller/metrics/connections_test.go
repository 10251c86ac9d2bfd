package metrics

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tether-mcp/tether/controller/httpguard"
	"github.com/tether-mcp/tether/spec"
)

// TestHistogramsBucketAsClientGolang feeds the same durations to a
// connection and to a client_golang histogram of the same layout, and wants
// the same buckets, count and sum: bounds themselves (le is inclusive), a
// nanosecond above, zero, negative and far above the last bound.
func TestHistogramsBucketAsClientGolang(t *testing.T) {
	for _, tc := range []struct {
		family  string
		bounds  []float64
		observe func(m *Metrics, d time.Duration)
	}{
		{"tether_connection_health_check_duration_seconds", healthCheckBuckets[:],
			func(m *Metrics, d time.Duration) { m.ObserveHealthCheck("c", d) }},
		{"tether_gateway_tool_call_duration_seconds", toolCallBuckets[:],
			func(m *Metrics, d time.Duration) { m.ObserveCall("c", CallOK, d) }},
	} {
		t.Run(tc.family, func(t *testing.T) {
			m, _ := newTestMetrics(time.Unix(1000, 0))
			m.ConnectionAdded("c")
			ref := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "ref", Help: "ref", Buckets: tc.bounds})
			ds := []time.Duration{0, -time.Nanosecond, time.Hour}
			for _, b := range tc.bounds {
				d := time.Duration(math.Round(b * 1e9))
				ds = append(ds, d, d+time.Nanosecond)
			}
			for _, d := range ds {
				tc.observe(m, d)
				ref.Observe(d.Seconds())
			}
			var want dto.Metric
			if err := ref.Write(&want); err != nil {
				t.Fatal(err)
			}
			got := familyOf(t, m, tc.family)
			if len(got) != 1 {
				t.Fatalf("%d series of %s, want 1", len(got), tc.family)
			}
			if diff := histogramDiff(got[0].GetHistogram(), want.GetHistogram()); diff != "" {
				t.Errorf("after %d observations: %s", len(ds), diff)
			}
		})
	}
}

// histogramDiff says how got differs from want in count, sum and buckets.
func histogramDiff(got, want *dto.Histogram) string {
	var out []string
	if got.GetSampleCount() != want.GetSampleCount() {
		out = append(out, fmt.Sprintf("count %d, want %d", got.GetSampleCount(), want.GetSampleCount()))
	}
	if got.GetSampleSum() != want.GetSampleSum() {
		out = append(out, fmt.Sprintf("sum %v, want %v", got.GetSampleSum(), want.GetSampleSum()))
	}
	if len(got.GetBucket()) != len(want.GetBucket()) {
		return strings.Join(append(out, fmt.Sprintf("%d buckets, want %d", len(got.GetBucket()), len(want.GetBucket()))), "; ")
	}
	for i, b := range got.GetBucket() {
		w := want.GetBucket()[i]
		if b.GetUpperBound() != w.GetUpperBound() || b.GetCumulativeCount() != w.GetCumulativeCount() {
			out = append(out, fmt.Sprintf("bucket le=%v: %d, want le=%v: %d",
				b.GetUpperBound(), b.GetCumulativeCount(), w.GetUpperBound(), w.GetCumulativeCount()))
		}
	}
	return strings.Join(out, "; ")
}

// TestScrapesAreConsistentUnderObservations scrapes while calls and probes
// land on the same connection, half of them above every bound (so only in
// +Inf), and wants every scrape to show one state: the last finite bucket
// holds the small observations, the count adds the large ones, the sum is
// exactly theirs (0.25 and 100 add up without rounding), and the call
// counter agrees with the call histogram.
func TestScrapesAreConsistentUnderObservations(t *testing.T) {
	const small, large = 250 * time.Millisecond, 100 * time.Second
	m, _ := newTestMetrics(time.Unix(1000, 0))
	m.ConnectionAdded("c")

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				d := small
				if (i+g)%2 == 1 {
					d = large
				}
				m.ObserveCall("c", CallOK, d)
				m.ObserveHealthCheck("c", d)
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	// Scrape until enough scrapes landed between observations that the
	// check means something.
	seen := map[uint64]bool{}
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < 20 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d distinct call counts scraped in 10s", len(seen))
		}
		mfs, err := m.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		var calls float64
		var callCount uint64
		for _, mf := range mfs {
			switch mf.GetName() {
			case "tether_gateway_tool_calls_total":
				for _, s := range mf.GetMetric() {
					if labelValue(s, "result") == CallOK {
						calls = s.GetCounter().GetValue()
					}
				}
			case "tether_gateway_tool_call_duration_seconds", "tether_connection_health_check_duration_seconds":
				h := mf.GetMetric()[0].GetHistogram()
				buckets := h.GetBucket()
				last := buckets[len(buckets)-1].GetCumulativeCount()
				count := h.GetSampleCount()
				if last > count {
					t.Fatalf("%s: last finite bucket %d above the count %d", mf.GetName(), last, count)
				}
				want := small.Seconds()*float64(last) + large.Seconds()*float64(count-last)
				if h.GetSampleSum() != want {
					t.Fatalf("%s: sum %v for %d observations of %v and %d of %v, want %v",
						mf.GetName(), h.GetSampleSum(), last, small, count-last, large, want)
				}
				if mf.GetName() == "tether_gateway_tool_call_duration_seconds" {
					callCount = count
				}
			}
		}
		if calls != float64(callCount) {
			t.Fatalf("calls_total{result=ok} %v, but the call histogram counts %d", calls, callCount)
		}
		if callCount > 0 {
			seen[callCount] = true
		}
	}
}

// TestRemovedConnectionNeverComesBack removes a connection while calls,
// probes and phase changes keep arriving for it, and wants no scrape after
// the removal to show it, not even one that listed it before (the record
// it holds says removed).
func TestRemovedConnectionNeverComesBack(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	m.ConnectionAdded("c")
	m.ConnectionAdded("other")
	listed := m.conns.get("c") // as a scrape under way holds it

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				m.ObserveCall("c", CallOK, time.Millisecond)
				m.ObserveHealthCheck("c", time.Millisecond)
				m.ObserveAttempt("c", true)
				m.SetTools("c", 3)
				m.SetCollisions("c", 1)
				m.SetPhase("c", spec.PhaseConnected)
				m.SetPhase("c", spec.PhaseDegraded)
			}
		}()
	}
	defer func() {
		close(stop)
		wg.Wait()
	}()

	m.ConnectionRemoved("c")
	if sc := listed.scrape(); sc != nil {
		t.Errorf("a record listed before ConnectionRemoved still yields %d series after it", len(sc.samples))
	}
	for range 50 {
		if got := seriesOf(t, m, "c"); len(got) != 0 {
			t.Fatalf("removed connection scraped again:\n%s", strings.Join(got, "\n"))
		}
		if got := seriesOf(t, m, "other"); len(got) == 0 {
			t.Fatal("the connection left in place lost its series")
		}
	}
}

// TestDescribeCoversCollect wants Describe to list exactly the families
// Collect sends, so that the registry's checks of a checked collector hold.
func TestDescribeCoversCollect(t *testing.T) {
	s := newConnectionSet()
	s.add("c", time.Now)

	described := map[string]bool{}
	dch := make(chan *prometheus.Desc)
	go func() {
		s.Describe(dch)
		close(dch)
	}()
	for d := range dch {
		described[d.String()] = true
	}

	collected := map[string]bool{}
	mch := make(chan prometheus.Metric)
	go func() {
		s.Collect(mch)
		close(mch)
	}()
	for m := range mch {
		collected[m.Desc().String()] = true
	}

	for d := range collected {
		if !described[d] {
			t.Errorf("collected but not described: %s", d)
		}
	}
	for d := range described {
		if !collected[d] {
			t.Errorf("described but not collected: %s", d)
		}
	}
	if want := 10; len(described) != want {
		t.Errorf("%d families described, want %d", len(described), want)
	}

	// A pedantic registry checks every series against its Desc.
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	if _, err := reg.Gather(); err != nil {
		t.Errorf("pedantic gather: %v", err)
	}
}

// TestResultIndexesMatchLabels keeps the record's counter indexes and the
// result labels a scrape pairs them with in one order.
func TestResultIndexesMatchLabels(t *testing.T) {
	for _, tc := range []struct {
		labels []string
		index  map[string]int
	}{
		{attemptResults, map[string]int{AttemptSuccess: attemptSuccess, AttemptFailure: attemptFailure}},
		{callResults, map[string]int{CallOK: callOK, CallError: callError, CallTimeout: callTimeout, CallCanceled: callCanceled}},
	} {
		if len(tc.labels) != len(tc.index) {
			t.Errorf("%d labels %v for %d indexes", len(tc.labels), tc.labels, len(tc.index))
		}
		for i, l := range tc.labels {
			if tc.index[l] != i {
				t.Errorf("label %q is number %d, its counter index %d", l, i, tc.index[l])
			}
		}
	}
}

// TestConcurrentScrapes runs scrapes in every format side by side while
// observations land: the label pairs, 0/1 gauges and empty buckets a
// scrape shares with the others are only read (the protobuf encoder's size
// cache is atomic), which the race detector checks here.
func TestConcurrentScrapes(t *testing.T) {
	m, _ := newTestMetrics(time.Unix(1000, 0))
	for _, n := range []string{"a", "b"} {
		m.ConnectionAdded(n)
		m.SetPhase(n, spec.PhaseConnected)
	}
	h := m.Handler(nil, httpguard.Origins{})

	stop := make(chan struct{})
	var observers sync.WaitGroup
	observers.Add(1)
	go func() {
		defer observers.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			m.ObserveCall("a", CallOK, 3*time.Millisecond)
			m.ObserveHealthCheck("b", time.Millisecond)
		}
	}()
	defer func() {
		close(stop)
		observers.Wait()
	}()

	formats := []struct{ accept, want string }{
		{"", `tether_connection_up{connection="a"} 1`},
		{"application/openmetrics-text; version=1.0.0", `tether_connection_up{connection="b"} 1`},
		{"application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited", "tether_connection_up"},
	}
	var scrapers sync.WaitGroup
	errs := make(chan string, 2*len(formats)*5)
	for range 2 {
		for _, f := range formats {
			scrapers.Add(1)
			go func() {
				defer scrapers.Done()
				for range 5 {
					req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
					if f.accept != "" {
						req.Header.Set("Accept", f.accept)
					}
					rec := httptest.NewRecorder()
					h.ServeHTTP(rec, req)
					if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), f.want) {
						errs <- fmt.Sprintf("Accept %q: %d, body without %q", f.accept, rec.Code, f.want)
					}
				}
			}()
		}
	}
	scrapers.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
