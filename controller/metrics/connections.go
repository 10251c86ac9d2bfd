package metrics

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/tether-mcp/tether/spec"
)

// The per-connection series are not client_golang vecs. Nineteen vec
// children per connection (label pairs, created timestamps, and each
// histogram's hot and cold counts and native-histogram state) took ~10 KB of
// live heap per connection (BenchmarkConnectionMemory), ~10 MB at 1,000
// connections. Instead each connection has one compact record of ~400
// bytes, and a custom collector turns the records into series at scrape
// time, the way kube-state-metrics does at scale. A scrape shows exactly
// what the vecs showed: same names, help, types, labels and values, and the
// same created timestamps for the protobuf format.

// Family descriptions of the per-connection series.
var (
	descUp = prometheus.NewDesc("tether_connection_up",
		"1 while the connection has a live MCP session (phase Connected or Degraded), else 0.",
		[]string{"connection"}, nil)
	descState = prometheus.NewDesc("tether_connection_state",
		"The connection's phase, one-hot: 1 for the current state, 0 for every other.",
		[]string{"connection", "state"}, nil)
	descTools = prometheus.NewDesc("tether_connection_tools",
		"Tools the connection exposes through the gateway, after its allow/deny filters.",
		[]string{"connection"}, nil)
	descAttempts = prometheus.NewDesc("tether_connection_attempts_total",
		"Connection attempts, by result (success or failure).",
		[]string{"connection", "result"}, nil)
	descLastTransition = prometheus.NewDesc("tether_connection_last_transition_timestamp_seconds",
		"Unix time at which the connection entered its current phase.",
		[]string{"connection"}, nil)
	descHealthCheck = prometheus.NewDesc("tether_connection_health_check_duration_seconds",
		"Duration of the health checks of a connected session, failed ones included.",
		[]string{"connection"}, nil)
	descToolCalls = prometheus.NewDesc("tether_gateway_tool_calls_total",
		"tools/call requests the gateway routed to a connection, by result (ok, error, timeout or canceled).",
		[]string{"connection", "result"}, nil)
	descToolCallTime = prometheus.NewDesc("tether_gateway_tool_call_duration_seconds",
		"Duration of the tools/call requests the gateway routed to a connection.",
		[]string{"connection"}, nil)
	descCatalogChanges = prometheus.NewDesc("tether_connection_catalog_changes_total",
		"Definitions (tools, prompts, resources, templates) the server's catalog gained or lost, by change (added or removed).",
		[]string{"connection", "change"}, nil)
	descCollisions = prometheus.NewDesc("tether_gateway_tool_collisions",
		"Exposed tool names this connection lost to another connection and does not serve.",
		[]string{"connection"}, nil)
)

// The bounded second labels, built once and shared by every scrape: a
// scrape must not allocate what never changes. Each list is in label value
// order, and Collect sends connections in name order, so that every family
// reaches the registry already in the order it sorts them into; sorting
// ~19,000 series that arrive in map order was an eighth of a scrape's CPU.
var (
	labelConnection = "connection"
	stateLabels     = labelPairs("state", len(spec.Phases), func(i int) string { return stateLabel(spec.Phases[i]) })
	attemptLabels   = labelPairs("result", len(attemptResults), func(i int) string { return attemptResults[i] })
	callLabels      = labelPairs("result", len(callResults), func(i int) string { return callResults[i] })
	catalogLabels   = labelPairs("change", len(catalogChanges), func(i int) string { return catalogChanges[i] })
)

// Indexes into connection.catalog, in the order of catalogChanges.
const (
	catalogAdded = iota
	catalogRemoved
	numCatalogChanges
)

var catalogChanges = [numCatalogChanges]string{"added", "removed"}

// indexedPair is a label pair and the index of its value in the list it
// was made from (spec.Phases, attemptResults, callResults).
type indexedPair struct {
	index int
	pair  *dto.LabelPair
}

func labelPairs(name string, n int, value func(int) string) []indexedPair {
	out := make([]indexedPair, n)
	for i := range out {
		out[i] = indexedPair{i, &dto.LabelPair{Name: &name, Value: new(value(i))}}
	}
	slices.SortFunc(out, func(a, b indexedPair) int { return strings.Compare(a.pair.GetValue(), b.pair.GetValue()) })
	return out
}

// Indexes into connection.attempts and connection.calls, in the order of
// attemptResults and callResults.
const (
	attemptSuccess = iota
	attemptFailure
	numAttemptResults
)

const (
	callOK = iota
	callError
	callTimeout
	callCanceled
	numCallResults
)

// connection is one connection's series between scrapes: 384 bytes on
// 64-bit platforms, one size class; tools and collisions are int32 to stay
// in it (a connection exposes far fewer than 2^31 tools). mu guards every
// field after it and is held for a few additions at most; a scrape copies
// them under it, so what it sends is one consistent state (a histogram's
// count is its +Inf bucket, its sum covers the same observations, the call
// counters add up to the call histogram's count).
type connection struct {
	name    string
	created int64 // Unix ns of ConnectionAdded: the created timestamp of the counters and histograms

	mu         sync.Mutex
	transition int64 // Unix ns at which phase was entered
	tools      int32
	collisions int32
	removed    bool  // set by ConnectionRemoved, for a scrape that listed c before
	phase      uint8 // index into spec.Phases
	attempts   [numAttemptResults]uint64
	calls      [numCallResults]uint64
	catalog    [numCatalogChanges]uint64
	// Per bucket, not cumulative; the last element counts what lies above
	// every bound, so the histogram's count is the sum of them all.
	health      [len(healthCheckBuckets) + 1]uint64
	healthSum   float64
	callTime    [len(toolCallBuckets) + 1]uint64
	callTimeSum float64
}

// phaseIndex is p's index in spec.Phases; ok is false for a phase not in it.
func phaseIndex(p spec.Phase) (i uint8, ok bool) {
	for i, q := range spec.Phases {
		if p == q {
			return uint8(i), true
		}
	}
	return 0, false
}

// bucket is the index of the bucket v falls in, as client_golang chooses
// it: the first upper bound >= v, else the one above every bound (NaN
// included).
func bucket(bounds []float64, v float64) int {
	for i, b := range bounds {
		if v <= b {
			return i
		}
	}
	return len(bounds)
}

// connectionSet holds the known connections and collects their series. Its
// lock is held only to find, add, remove or list records, never while a
// record is updated or a scrape sends series, so a scrape neither blocks a
// tool call nor waits behind one.
type connectionSet struct {
	mu     sync.RWMutex
	byName map[string]*connection
}

func newConnectionSet() *connectionSet {
	return &connectionSet{byName: map[string]*connection{}}
}

// get returns name's record, or nil when name is not a known connection.
func (s *connectionSet) get(name string) *connection {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.byName[name]
}

// add records name, zeroed and Pending since now, unless it is known.
func (s *connectionSet) add(name string, now func() time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.byName[name]; ok {
		return
	}
	pending, _ := phaseIndex(spec.PhasePending)
	t := now().UnixNano()
	s.byName[name] = &connection{name: name, created: t, transition: t, phase: pending}
}

// remove forgets name. An update that looked the record up before lands on
// a record nothing reads any more, and a scrape that listed it before sees
// removed and skips it: a removed connection's series never come back.
func (s *connectionSet) remove(name string) {
	s.mu.Lock()
	c := s.byName[name]
	delete(s.byName, name)
	s.mu.Unlock()
	if c != nil {
		c.mu.Lock()
		c.removed = true
		c.mu.Unlock()
	}
}

// Describe sends the ten per-connection families, so that the registry
// checks every collected series against them as it does a vec's.
func (s *connectionSet) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		descUp, descState, descTools, descAttempts, descLastTransition,
		descHealthCheck, descToolCalls, descToolCallTime, descCatalogChanges, descCollisions,
	} {
		ch <- d
	}
}

// Collect sends every series of every known connection. It lists the
// records under the read lock and reads each under its own lock, so that
// a writer of the set never waits for a whole scrape.
func (s *connectionSet) Collect(ch chan<- prometheus.Metric) {
	s.mu.RLock()
	conns := make([]*connection, 0, len(s.byName))
	for _, c := range s.byName {
		conns = append(conns, c)
	}
	s.mu.RUnlock()
	slices.SortFunc(conns, func(a, b *connection) int { return strings.Compare(a.name, b.name) })

	for _, c := range conns {
		sc := c.scrape()
		if sc == nil {
			continue
		}
		for i := range sc.samples {
			ch <- &sc.samples[i]
		}
	}
}

// connectionScrape is one connection's series for one scrape. The samples
// point into it for their label pairs, values and buckets, so that a
// connection costs a scrape a few allocations rather than a few per series.
type connectionScrape struct {
	samples []sample
	pairs   []*dto.LabelPair // {connection, second label} of the two-label series
	conn    dto.LabelPair
	one     [1]*dto.LabelPair // {connection}
	created timestamppb.Timestamp

	gauges      [3]dto.Gauge // tools, last transition, collisions, when not 0 or 1
	gaugeValues [3]float64
	counters    [numAttemptResults + numCallResults + numCatalogChanges]dto.Counter
	counterVals [numAttemptResults + numCallResults + numCatalogChanges]float64

	health     histogramScrape
	healthCum  [len(healthCheckBuckets) + 1]uint64
	healthPtrs [len(healthCheckBuckets)]*dto.Bucket

	callTime     histogramScrape
	callTimeCum  [len(toolCallBuckets) + 1]uint64
	callTimePtrs [len(toolCallBuckets)]*dto.Bucket
}

// Gauges whose value is 0 or 1 (up, the one-hot state, and tools and
// collisions most of the time) share these: read-only, like the label pairs.
var (
	gaugeZero = &dto.Gauge{Value: new(0.0)}
	gaugeOne  = &dto.Gauge{Value: new(1.0)}
)

// scrape copies c's state under its lock and lays it out as samples; nil
// once c was removed.
func (c *connection) scrape() *connectionScrape {
	sc := &connectionScrape{}
	c.mu.Lock()
	if c.removed {
		c.mu.Unlock()
		return nil
	}
	phase, transition := c.phase, c.transition
	tools, collisions := c.tools, c.collisions
	attempts, calls, catalog := c.attempts, c.calls, c.catalog
	sc.healthCum, sc.health.sum = c.health, c.healthSum
	sc.callTimeCum, sc.callTime.sum = c.callTime, c.callTimeSum
	c.mu.Unlock()

	sc.conn.Name, sc.conn.Value = &labelConnection, &c.name
	sc.one[0] = &sc.conn
	sc.created.Seconds, sc.created.Nanos = c.created/1e9, int32(c.created%1e9)
	twoLabel := len(stateLabels) + len(attemptLabels) + len(callLabels) + len(catalogLabels)
	sc.samples = make([]sample, 0, 6+twoLabel)
	sc.pairs = make([]*dto.LabelPair, 0, 2*twoLabel)
	with := func(second *dto.LabelPair) []*dto.LabelPair {
		sc.pairs = append(sc.pairs, &sc.conn, second)
		return sc.pairs[len(sc.pairs)-2 : len(sc.pairs) : len(sc.pairs)]
	}
	gauges := 0
	gauge := func(d *prometheus.Desc, labels []*dto.LabelPair, v float64) {
		g := gaugeZero
		switch v {
		case 0:
		case 1:
			g = gaugeOne
		default:
			sc.gaugeValues[gauges] = v
			g = &sc.gauges[gauges]
			g.Value = &sc.gaugeValues[gauges]
			gauges++
		}
		sc.samples = append(sc.samples, sample{desc: d, labels: labels, gauge: g})
	}
	counters := 0
	counter := func(d *prometheus.Desc, labels []*dto.LabelPair, v uint64) {
		sc.counterVals[counters] = float64(v)
		ct := &sc.counters[counters]
		ct.Value, ct.CreatedTimestamp = &sc.counterVals[counters], &sc.created
		counters++
		sc.samples = append(sc.samples, sample{desc: d, labels: labels, counter: ct})
	}

	up := 0.0
	if p := spec.Phases[phase]; p == spec.PhaseConnected || p == spec.PhaseDegraded {
		up = 1
	}
	gauge(descUp, sc.one[:], up)
	for _, l := range stateLabels {
		v := 0.0
		if l.index == int(phase) {
			v = 1
		}
		gauge(descState, with(l.pair), v)
	}
	gauge(descTools, sc.one[:], float64(tools))
	for _, l := range attemptLabels {
		counter(descAttempts, with(l.pair), attempts[l.index])
	}
	gauge(descLastTransition, sc.one[:], float64(transition)/1e9)
	sc.samples = append(sc.samples, sample{desc: descHealthCheck, labels: sc.one[:],
		hist: sc.health.build(healthCheckBuckets[:], healthZeroBuckets, sc.healthCum[:], sc.healthPtrs[:], &sc.created)})
	for _, l := range callLabels {
		counter(descToolCalls, with(l.pair), calls[l.index])
	}
	sc.samples = append(sc.samples, sample{desc: descToolCallTime, labels: sc.one[:],
		hist: sc.callTime.build(toolCallBuckets[:], toolCallZeroBuckets, sc.callTimeCum[:], sc.callTimePtrs[:], &sc.created)})
	for _, l := range catalogLabels {
		counter(descCatalogChanges, with(l.pair), catalog[l.index])
	}
	gauge(descCollisions, sc.one[:], float64(collisions))
	return sc
}

// histogramScrape is a histogram as one scrape sends it.
type histogramScrape struct {
	h   dto.Histogram
	sum float64
}

// Empty buckets, one per bound of each layout, shared by every histogram
// in every scrape: most buckets of most connections are empty, and a
// bucket message is the largest part of a scrape.
var (
	healthZeroBuckets   = zeroBuckets(healthCheckBuckets[:])
	toolCallZeroBuckets = zeroBuckets(toolCallBuckets[:])
)

func zeroBuckets(bounds []float64) []*dto.Bucket {
	zero := new(uint64(0))
	out := make([]*dto.Bucket, len(bounds))
	for i := range bounds {
		out[i] = &dto.Bucket{CumulativeCount: zero, UpperBound: &bounds[i]}
	}
	return out
}

// build makes the classic histogram of counts (per bucket, the last one
// above every bound), turning counts cumulative in place so that the +Inf
// bucket and the count are one and the same number. ptrs receives one
// bucket per bound: zeros[i] when empty, else one allocated with the others
// that are not.
func (hs *histogramScrape) build(bounds []float64, zeros []*dto.Bucket, counts []uint64, ptrs []*dto.Bucket, created *timestamppb.Timestamp) *dto.Histogram {
	var cum uint64
	nonEmpty := 0
	for i := range bounds {
		cum += counts[i]
		counts[i] = cum
		if cum > 0 {
			nonEmpty++
		}
	}
	counts[len(bounds)] += cum
	buckets := make([]dto.Bucket, nonEmpty)
	for i := range bounds {
		if counts[i] == 0 {
			ptrs[i] = zeros[i]
			continue
		}
		b := &buckets[len(buckets)-nonEmpty]
		nonEmpty--
		b.CumulativeCount, b.UpperBound = &counts[i], &bounds[i]
		ptrs[i] = b
	}
	hs.h.SampleCount = &counts[len(bounds)]
	hs.h.SampleSum = &hs.sum
	hs.h.Bucket = ptrs
	hs.h.CreatedTimestamp = created
	return &hs.h
}

// sample is one series of one scrape: what prometheus.MustNewConstMetric
// and MustNewConstHistogram build, but pointing into its connectionScrape
// (or at shared read-only messages) instead of allocating its own label
// pairs, value and buckets. It is complete before it is sent, and Write
// only reads it.
type sample struct {
	desc    *prometheus.Desc
	labels  []*dto.LabelPair
	gauge   *dto.Gauge
	counter *dto.Counter
	hist    *dto.Histogram
}

// Desc implements prometheus.Metric.
func (s *sample) Desc() *prometheus.Desc { return s.desc }

// Write implements prometheus.Metric.
func (s *sample) Write(out *dto.Metric) error {
	out.Label = s.labels
	out.Gauge, out.Counter, out.Histogram = s.gauge, s.counter, s.hist
	return nil
}
