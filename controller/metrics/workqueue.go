package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// queueMetrics are the client-go workqueue metrics under the names, help
// texts and buckets controller-runtime gives them, so dashboards and alerts
// written for controller-runtime controllers work on tether unchanged.
type queueMetrics struct {
	depth          *prometheus.GaugeVec
	adds           *prometheus.CounterVec
	latency        *prometheus.HistogramVec
	workDuration   *prometheus.HistogramVec
	unfinished     *prometheus.GaugeVec
	longestRunning *prometheus.GaugeVec
	retries        *prometheus.CounterVec
}

func newQueueMetrics() *queueMetrics {
	name := []string{"name"}
	// 10ns to 1000s, as controller-runtime: queue latency spans a hot
	// queue's nanoseconds to a stuck worker's minutes.
	buckets := prometheus.ExponentialBuckets(10e-9, 10, 12)
	return &queueMetrics{
		depth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "depth",
			Help: "Current depth of workqueue",
		}, name),
		adds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "adds_total",
			Help: "Total number of adds handled by workqueue",
		}, name),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "queue_duration_seconds",
			Help:    "How long in seconds an item stays in workqueue before being requested",
			Buckets: buckets,
		}, name),
		workDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Subsystem: "workqueue", Name: "work_duration_seconds",
			Help:    "How long in seconds processing an item from workqueue takes.",
			Buckets: buckets,
		}, name),
		unfinished: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "unfinished_work_seconds",
			Help: "How many seconds of work has been done that is in progress and hasn't " +
				"been observed by work_duration. Large values indicate stuck threads. One can " +
				"deduce the number of stuck threads by observing the rate at which this increases.",
		}, name),
		longestRunning: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Subsystem: "workqueue", Name: "longest_running_processor_seconds",
			Help: "How many seconds has the longest running processor for workqueue been running.",
		}, name),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Subsystem: "workqueue", Name: "retries_total",
			Help: "Total number of retries handled by workqueue",
		}, name),
	}
}

func (q *queueMetrics) register(reg prometheus.Registerer) {
	reg.MustRegister(q.depth, q.adds, q.latency, q.workDuration, q.unfinished, q.longestRunning, q.retries)
}

// QueueProvider returns the workqueue.MetricsProvider that feeds the
// workqueue_* metrics, labelled with the queue's name. A queue must be given
// a non-empty Name, or client-go emits nothing.
func (m *Metrics) QueueProvider() workqueue.MetricsProvider { return m.queue }

// The workqueue.MetricsProvider methods. Each returns the series of the
// queue's name, created now so that it shows zero before the first item.

func (q *queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.depth.WithLabelValues(name)
}

func (q *queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.adds.WithLabelValues(name)
}

func (q *queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.latency.WithLabelValues(name)
}

func (q *queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.workDuration.WithLabelValues(name)
}

func (q *queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.unfinished.WithLabelValues(name)
}

func (q *queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.longestRunning.WithLabelValues(name)
}

func (q *queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.retries.WithLabelValues(name)
}
