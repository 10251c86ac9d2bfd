package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
	"github.com/tether-mcp/tether/controller/supervisor"
	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"
)

// QueueName names the workqueue in its metrics (workqueue_*{name="connections"}).
const QueueName = "connections"

// Options configures a Controller.
type Options struct {
	// Desired is the store Source writes and the reconciler reads.
	Desired *desired.Store
	Source  Source
	Status  StatusSink
	Workers int
	// Connector opens sessions (SDKConnector in tether run).
	Connector supervisor.Connector
	Exposer   Exposer
	Metrics   Metrics
	// QueueMetrics, when set, receives the workqueue's metrics.
	QueueMetrics workqueue.MetricsProvider
	Logger       *slog.Logger
	// ShutdownTimeout bounds closing every connection on shutdown.
	ShutdownTimeout time.Duration
	// ConnectTimeout bounds one connect attempt (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// Catalogs keeps servers' catalogs between runs (nil: in memory only).
	Catalogs CatalogStore
	// TracerProvider records the reconciler's spans; nil means the global
	// provider (see controller/tracing).
	TracerProvider trace.TracerProvider
}

// Controller wires the source, the workqueue, the workers and the
// reconciler together. It knows neither files nor objects: the Source and
// the StatusSink do.
type Controller struct {
	opts       Options
	log        *slog.Logger
	desired    *desired.Store
	queue      workqueue.TypedRateLimitingInterface[string]
	reconciler *Reconciler
	metrics    Metrics

	ready    atomic.Bool
	handover atomic.Bool // Run ends without final status (HandOver)
	synced   chan struct{}
	syncOnce sync.Once
	// firstOutcomes is closed once every connection reached its first
	// outcome (firstoutcome.go).
	firstOutcomes chan struct{}
}

// New builds a controller; Run starts it.
func New(opts Options) *Controller {
	if opts.Workers <= 0 {
		opts.Workers = 4
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Metrics == nil {
		opts.Metrics = noopMetrics{}
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 15 * time.Second
	}
	c := &Controller{
		opts:    opts,
		log:     opts.Logger,
		desired: opts.Desired,
		metrics: opts.Metrics,
		synced:  make(chan struct{}),

		firstOutcomes: make(chan struct{}),
	}
	// Reconcile errors (status writes that failed, panics) back off per
	// item; connect failures do not come through here, they have their own
	// per-connection backoff (RequeueAfter). The bucket keeps a storm of
	// events from turning into a storm of reconciles.
	limiter := workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[string]{Limiter: rate.NewLimiter(rate.Limit(50), 300)},
	)
	c.queue = workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{
		Name:            QueueName,
		MetricsProvider: opts.QueueMetrics,
	})
	c.reconciler = NewReconciler(ReconcilerOptions{
		Desired:        opts.Desired,
		Status:         opts.Status,
		Connector:      opts.Connector,
		Exposer:        opts.Exposer,
		Metrics:        opts.Metrics,
		Logger:         opts.Logger,
		Enqueue:        c.queue.Add,
		Busy:           func() bool { return c.queue.Len() > opts.Workers },
		ConnectTimeout: opts.ConnectTimeout,
		TracerProvider: opts.TracerProvider,
		Catalogs:       opts.Catalogs,
	})
	return c
}

// Wake brings a connection that is not connected back at once, for a call
// that needs it (reconnect on use): an OnDemand server is started, a
// connection waiting to retry skips what is left of its backoff. It returns
// once the gateway serves the connection again, or with why not.
func (c *Controller) Wake(ctx context.Context, name string) error {
	return c.reconciler.Wake(ctx, name)
}

// Enqueue asks for a connection to be reconciled (e.g. after the gateway's
// collisions changed).
func (c *Controller) Enqueue(name string) { c.queue.Add(name) }

// RetryNow lets name's next attempt start at once, ending a backoff wait
// or the wait for new OAuth tokens, and asks for its reconcile (tether run
// calls it when `tether login` stored tokens for it). A name not reconciled
// yet is left alone: its first attempt comes anyway.
func (c *Controller) RetryNow(name string) {
	if c.reconciler.RetryNow(name) {
		c.queue.Add(name)
	}
}

// EnqueueAll asks for every connection to be reconciled.
func (c *Controller) EnqueueAll() {
	for _, n := range c.desired.Names() {
		c.queue.Add(n)
	}
}

// HandOver makes Run end without writing final status: the directory goes
// to another tether that carries on at once (a bridge taking over,
// docs/reliability.md), and "tether stopped" in every status file would
// be a lie in the meantime. Call it before Run's ctx ends.
func (c *Controller) HandOver() { c.handover.Store(true) }

// Ready reports whether the source has synced and every connection of its
// first listing has been reconciled once.
func (c *Controller) Ready() bool { return c.ready.Load() }

func (c *Controller) changed(names []string) {
	for _, n := range names {
		c.queue.Add(n)
	}
}

func (c *Controller) onSynced() { c.syncOnce.Do(func() { close(c.synced) }) }

// Run starts the source and the workers and blocks until ctx is done; then
// it stops accepting work, waits for the source to stop and closes every
// connection, both within the shutdown bound, and writes final status.
func (c *Controller) Run(ctx context.Context) error {
	srcCtx, stopSource := context.WithCancel(context.Background())
	srcErr := make(chan error, 1)
	go func() { srcErr <- c.opts.Source.Run(srcCtx, c.changed, c.onSynced) }()

	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}

	// Ready once every name of the first listing went through Reconcile.
	// It gives up when Run ends, for whatever reason (a failed source too).
	readyCtx, stopReady := context.WithCancel(ctx)
	defer stopReady()
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-c.synced:
		case <-readyCtx.Done():
			return
		}
		for _, n := range c.desired.Names() {
			for !c.reconciledOnce(n) {
				select {
				case <-readyCtx.Done():
					return
				case <-time.After(20 * time.Millisecond):
				}
			}
		}
		c.ready.Store(true)
		c.log.Info("initial manifests reconciled", "connections", len(c.desired.Names()))
	}()

	wg.Add(1)
	go func() {
		defer wg.Done()
		c.watchFirstOutcomes(readyCtx)
	}()

	var err error
	sourceRuns := true
	select {
	case <-ctx.Done():
	case err = <-srcErr:
		sourceRuns = false
		if err == nil {
			err = errors.New("stopped by itself")
		}
		err = fmt.Errorf("desired-state source: %w", err)
	}
	c.log.Info("shutting down")
	stopReady()
	stopSource()
	c.queue.ShutDownWithDrain()
	wg.Wait()

	sctx, cancel := context.WithTimeout(context.Background(), c.opts.ShutdownTimeout)
	defer cancel()
	if sourceRuns {
		// The source may be finishing a listing, saving its last valid
		// specs (manifest.Source saves them after it told the names):
		// the process must not exit under it.
		select {
		case <-srcErr:
		default:
			c.log.Debug("waiting for the desired-state source to stop")
			select {
			case <-srcErr:
			case <-sctx.Done():
				c.log.Warn("the desired-state source did not stop within the shutdown bound", "bound", c.opts.ShutdownTimeout)
			}
		}
	}
	if serr := c.reconciler.Shutdown(sctx); serr != nil {
		c.log.Warn("connections did not all close within the shutdown bound", "bound", c.opts.ShutdownTimeout)
	}
	if c.handover.Load() {
		c.log.Info("handing the connections over to the next owner: no final status written")
	} else {
		c.reconciler.FinalStatus()
	}
	return err
}

func (c *Controller) reconciledOnce(name string) bool {
	if c.reconciler.Seen(name) {
		return true
	}
	_, exists := c.desired.Get(name)
	return !exists // removed meanwhile: nothing left to wait for
}

// processNext takes one name off the queue and turns Reconcile's answer into
// queue bookkeeping: Forget on success, AddRateLimited on error, AddAfter
// for RequeueAfter.
func (c *Controller) processNext(ctx context.Context) bool {
	name, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(name)

	start := time.Now()
	res, err := c.reconcileSafely(ctx, name)
	switch {
	case err != nil:
		c.metrics.ObserveReconcile("error", time.Since(start))
		c.log.Error("reconcile failed; retrying", "connection", name, "err", err)
		c.queue.AddRateLimited(name)
	case res.RequeueAfter > 0:
		c.metrics.ObserveReconcile("requeue", time.Since(start))
		c.queue.Forget(name)
		c.queue.AddAfter(name, res.RequeueAfter)
	default:
		c.metrics.ObserveReconcile("success", time.Since(start))
		c.queue.Forget(name)
	}
	return true
}

func (c *Controller) reconcileSafely(ctx context.Context, name string) (res Result, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic in reconcile: %v\n%s", p, debug.Stack())
			res = Result{}
		}
	}()
	return c.reconciler.Reconcile(ctx, name)
}
