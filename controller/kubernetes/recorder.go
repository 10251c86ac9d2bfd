package kubernetes

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	mathrand "math/rand/v2"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
)

// eventsResource is the core v1 Event resource: what `kubectl get events`
// and `kubectl describe` show, and what the Role of examples/kubernetes
// grants (create, patch).
var eventsResource = schema.GroupVersionResource{Version: "v1", Resource: "events"}

// namespaceTerminatingCause is core/v1's NamespaceTerminatingCause: the
// API server refuses objects in a namespace being deleted.
const namespaceTerminatingCause metav1.CauseType = "NamespaceTerminating"

// Event types.
const (
	eventTypeNormal  = "Normal"
	eventTypeWarning = "Warning"
)

// ObjectRef names the object an Event is about (its involvedObject).
type ObjectRef struct {
	APIVersion, Kind, Namespace, Name string
	UID                               types.UID
}

// RecorderOptions configures a Recorder.
type RecorderOptions struct {
	Client dynamic.Interface
	// Component and Host are the Events' source: tether and this replica.
	Component, Host string
	Logger          *slog.Logger
}

// The correlation's limits, client-go's (tools/record): at most 10 messages
// that differ for one object and reason in 10 minutes before they are
// combined into one Event; per object and type, a burst of 25 Events, then
// one every 5 minutes; 4096 entries in each cache.
const (
	aggregateMaxMessages = 10
	aggregateInterval    = 10 * time.Minute
	spamBurst            = 25
	spamEvery            = 5 * time.Minute
	correlationCacheSize = 4096
	// eventQueueSize bounds the Events waiting to be written; more are
	// dropped (logged), as client-go's broadcaster drops them.
	eventQueueSize = 1000
	// closeGrace is how long Close lets the queue drain.
	closeGrace = 3 * time.Second
)

// Recorder records core v1 Events through the dynamic client, in the
// background: Event never blocks. It correlates them as client-go's
// EventCorrelator does, so that the API server sees few writes: an Event
// the same as one written before (same object, type, reason and message)
// increments that Event's count and lastTimestamp (a patch) instead of
// creating another; more than 10 different messages for one object and
// reason within 10 minutes are combined into one Event; and each object
// gets a burst of 25 Events, then one every 5 minutes. A write that fails
// for want of the API server is tried again (12 tries, 10 s apart); one the
// API server rejects is dropped.
//
// It is written here rather than taken from client-go's tools/record, whose
// sink is the typed core/v1 client: that client links the scheme of every
// API group, too much resident memory for the README's target.
type Recorder struct {
	client dynamic.Interface
	log    *slog.Logger
	// component and host are the Events' source.
	component, host string
	srcKey          string
	now             func() time.Time
	// retryDelay is the wait between tries of a failed write; maxTries
	// bounds them.
	retryDelay time.Duration
	maxTries   int

	mu     sync.Mutex
	closed bool
	queue  chan pendingEvent

	ctx      context.Context
	cancel   context.CancelFunc
	finished chan struct{}

	// The correlation state belongs to the writing goroutine.
	aggregates *lru[string, *aggregateRecord]
	seen       *lru[string, seenEvent]
	spam       *lru[string, *rate.Limiter]
	lastNano   int64 // of the last Event's name
}

// pendingEvent is an Event as Event received it.
type pendingEvent struct {
	ref                  ObjectRef
	typ, reason, message string
	at                   time.Time
}

// aggregateRecord is what the aggregation remembers of one object and
// reason: the messages seen, and when the last came.
type aggregateRecord struct {
	messages map[string]bool
	last     time.Time
}

// seenEvent is an Event written before: its name, count and first time.
type seenEvent struct {
	name  string
	count int64
	first string
}

// NewRecorder returns a recorder whose writing goroutine runs until Close.
func NewRecorder(opts RecorderOptions) *Recorder {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Recorder{
		client:     opts.Client,
		log:        opts.Logger,
		component:  opts.Component,
		host:       opts.Host,
		srcKey:     opts.Component + "\x00" + opts.Host,
		now:        time.Now,
		retryDelay: 10 * time.Second,
		maxTries:   12,
		queue:      make(chan pendingEvent, eventQueueSize),
		ctx:        ctx,
		cancel:     cancel,
		finished:   make(chan struct{}),
		aggregates: newLRU[string, *aggregateRecord](correlationCacheSize),
		seen:       newLRU[string, seenEvent](correlationCacheSize),
		spam:       newLRU[string, *rate.Limiter](correlationCacheSize),
	}
	go r.run()
	return r
}

// Event queues an Event about ref; it never blocks.
func (r *Recorder) Event(ref ObjectRef, eventtype, reason, message string) {
	ev := pendingEvent{ref: ref, typ: eventtype, reason: reason, message: message, at: r.now()}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.queue <- ev:
	default:
		r.log.Warn("dropping an Event: too many wait to be written", "object", origin(ref.Namespace, ref.Name), "reason", reason)
	}
}

// Close stops taking Events, lets the queued ones be written for a few
// seconds, and returns when the writing goroutine has ended.
func (r *Recorder) Close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.queue)
	}
	r.mu.Unlock()
	select {
	case <-r.finished:
	case <-time.After(closeGrace):
		r.cancel()
		<-r.finished
	}
	r.cancel()
}

func (r *Recorder) run() {
	defer close(r.finished)
	for ev := range r.queue {
		if r.ctx.Err() != nil {
			continue // closing: drop what is left
		}
		w, ok := r.correlate(ev)
		if !ok {
			continue
		}
		r.writeWithRetries(w)
	}
}

// eventWrite is one write of an Event: a new Event, or the count, time and
// message of one written before (patch).
type eventWrite struct {
	key, name, namespace string
	ref                  ObjectRef
	typ, reason, message string
	count                int64
	first, last          string
	patch                bool
}

// correlate turns an Event into a write, or drops it (false) when its
// object has had too many: client-go's EventCorrelate (aggregate, then
// deduplicate, then rate-limit).
func (r *Recorder) correlate(ev pendingEvent) (eventWrite, bool) {
	ts := ev.at.UTC().Format(time.RFC3339)
	ns := ev.ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	object := strings.Join([]string{r.srcKey, ev.ref.APIVersion, ev.ref.Kind, ev.ref.Namespace, ev.ref.Name, string(ev.ref.UID), ev.typ}, "\x00")
	w := eventWrite{
		namespace: ns, ref: ev.ref, typ: ev.typ, reason: ev.reason, message: ev.message,
		name: r.eventName(ev.ref.Name, ev.at), count: 1, first: ts, last: ts,
		key: object + "\x00" + ev.reason + "\x00" + ev.message,
	}

	// Aggregate: many different messages for one reason become one Event.
	aggKey := object + "\x00" + ev.reason
	agg, ok := r.aggregates.get(aggKey)
	if !ok || ev.at.Sub(agg.last) > aggregateInterval {
		agg = &aggregateRecord{messages: map[string]bool{}}
	}
	agg.messages[ev.message] = true
	agg.last = ev.at
	r.aggregates.add(aggKey, agg)
	if len(agg.messages) >= aggregateMaxMessages {
		for m := range agg.messages { // keep the set from growing
			delete(agg.messages, m)
			break
		}
		w.message = "(combined from similar events): " + ev.message
		w.key = aggKey
	}

	// Deduplicate: the same Event again updates the one written before.
	if prev, ok := r.seen.get(w.key); ok && prev.count > 0 {
		w.name, w.first, w.count, w.patch = prev.name, prev.first, prev.count+1, true
	}
	r.seen.add(w.key, seenEvent{name: w.name, count: w.count, first: w.first})

	// Rate-limit per object and type.
	lim, ok := r.spam.get(object)
	if !ok {
		lim = rate.NewLimiter(rate.Every(spamEvery), spamBurst)
		r.spam.add(object, lim)
	}
	if !lim.AllowN(ev.at, 1) {
		r.log.Debug("Event not written: too many about this object", "object", origin(ev.ref.Namespace, ev.ref.Name), "reason", ev.reason)
		return eventWrite{}, false
	}
	return w, true
}

// eventName is client-go's: the object's name and the time in hex, here
// made unique among this recorder's Events when two come in the same
// nanosecond (or clock tick).
func (r *Recorder) eventName(object string, at time.Time) string {
	n := at.UnixNano()
	if n <= r.lastNano {
		n = r.lastNano + 1
	}
	r.lastNano = n
	return fmt.Sprintf("%s.%x", object, n)
}

// writeWithRetries writes w, again after a failure that is not the API
// server's answer, until maxTries or Close.
func (r *Recorder) writeWithRetries(w eventWrite) {
	for tries := 1; ; tries++ {
		err := r.write(w)
		if err == nil {
			return
		}
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			// The API server answered: the Event is wrong for it; trying
			// again would fail the same way. A namespace being deleted or a
			// name taken is no news (client-go logs them at V(5)).
			level := slog.LevelWarn
			if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, namespaceTerminatingCause) {
				level = slog.LevelDebug
			}
			r.log.Log(r.ctx, level, "the API server refused an Event", "object", origin(w.ref.Namespace, w.ref.Name), "reason", w.reason, "err", err)
			return
		}
		if tries >= r.maxTries {
			r.log.Warn("could not write an Event; giving up", "object", origin(w.ref.Namespace, w.ref.Name), "reason", w.reason, "tries", tries, "err", err)
			return
		}
		delay := r.retryDelay
		if tries == 1 {
			// Replicas that lost the API server together do not come
			// back in step.
			delay = time.Duration(mathrand.Float64() * float64(delay))
		}
		r.log.Debug("could not write an Event; trying again", "object", origin(w.ref.Namespace, w.ref.Name), "reason", w.reason, "in", delay, "err", err)
		select {
		case <-r.ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// write creates w's Event, or patches the one it updates (created anew when
// it is gone, e.g. after the API server's Event TTL).
func (r *Recorder) write(w eventWrite) error {
	events := r.client.Resource(eventsResource).Namespace(w.namespace)
	ctx, cancel := context.WithTimeout(r.ctx, 10*time.Second)
	defer cancel()
	var got *unstructured.Unstructured
	var err error = apierrors.NewNotFound(eventsResource.GroupResource(), w.name)
	if w.patch {
		patch, merr := json.Marshal(map[string]any{"count": w.count, "lastTimestamp": w.last, "message": w.message})
		if merr != nil {
			return merr
		}
		got, err = events.Patch(ctx, w.name, types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if apierrors.IsNotFound(err) {
		got, err = events.Create(ctx, r.eventObject(w), metav1.CreateOptions{})
	}
	if err != nil {
		return err
	}
	count, _, _ := unstructured.NestedInt64(got.Object, "count")
	first, _, _ := unstructured.NestedString(got.Object, "firstTimestamp")
	if count == 0 {
		count = w.count
	}
	if first == "" {
		first = w.first
	}
	r.seen.add(w.key, seenEvent{name: got.GetName(), count: count, first: first})
	return nil
}

// eventObject is w as a new core v1 Event.
func (r *Recorder) eventObject(w eventWrite) *unstructured.Unstructured {
	involved := map[string]any{"apiVersion": w.ref.APIVersion, "kind": w.ref.Kind, "name": w.ref.Name}
	if w.ref.Namespace != "" {
		involved["namespace"] = w.ref.Namespace
	}
	if w.ref.UID != "" {
		involved["uid"] = string(w.ref.UID)
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion":     "v1",
		"kind":           "Event",
		"metadata":       map[string]any{"name": w.name, "namespace": w.namespace},
		"involvedObject": involved,
		"type":           w.typ,
		"reason":         w.reason,
		"message":        w.message,
		"source":         map[string]any{"component": r.component, "host": r.host},
		"count":          w.count,
		"firstTimestamp": w.first,
		"lastTimestamp":  w.last,
	}}
}

// lru is a map that keeps its max most recently used entries.
type lru[K comparable, V any] struct {
	max   int
	order *list.List // of *lruEntry, the most recent first
	items map[K]*list.Element
}

type lruEntry[K comparable, V any] struct {
	key   K
	value V
}

func newLRU[K comparable, V any](max int) *lru[K, V] {
	return &lru[K, V]{max: max, order: list.New(), items: map[K]*list.Element{}}
}

func (c *lru[K, V]) get(k K) (V, bool) {
	e, ok := c.items[k]
	if !ok {
		var zero V
		return zero, false
	}
	c.order.MoveToFront(e)
	return e.Value.(*lruEntry[K, V]).value, true
}

func (c *lru[K, V]) add(k K, v V) {
	if e, ok := c.items[k]; ok {
		e.Value.(*lruEntry[K, V]).value = v
		c.order.MoveToFront(e)
		return
	}
	c.items[k] = c.order.PushFront(&lruEntry[K, V]{key: k, value: v})
	if c.order.Len() > c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.items, oldest.Value.(*lruEntry[K, V]).key)
	}
}
