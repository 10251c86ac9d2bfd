package connection

//lint:file-ignore SA1019 relaying a server's log messages (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The go-sdk's client hands a session's notifications to their handlers
// one after another, on one goroutine. A log message relayed there to a
// downstream client that does not read its stream (a full TCP window)
// held that goroutine for as long as the write took, and with it every
// other client's messages and the markers their requests' answers wait for
// (order.go): one slow client delayed every other client of the backend by
// up to relayDrain. So the handler only queues a message, per downstream
// client, and a goroutine of that queue writes it; a request's marker goes
// into its client's queue too, so that the answer waits for that client's
// messages ahead of it and for nobody else's (docs/reliability.md G12).

// Bounds of one downstream client's queue on one session: a client that
// does not read holds at most this much of tether's memory per backend
// session it calls, and only while its requests are in flight there (the
// end of a request drops what is queued for it, forget), besides the one
// message its writer is writing, one marker per request in flight
// (reach) and one place per server request waiting to be relayed
// (flush). Past either, messages for it are dropped (counted, one WARN a
// minute); a message is always taken when none is queued, however
// large (the session's message bound caps it), so that each client gets
// its messages one by one however slowly it reads.
const (
	maxQueuedLogs     = 64
	maxQueuedLogBytes = 1 << 20
)

// logQueues are a session's queues of log messages for downstream
// clients, keyed by wire.Caller.Client(). A queue exists while it holds
// something or its goroutine writes; an idle session holds none.
type logQueues struct {
	mu sync.Mutex
	m  map[any]*logQueue

	log     *slog.Logger
	dropped atomic.Uint64
	warned  atomic.Int64 // unix nanos of the last WARN
	// flushing, when set, is told that flush waits for a client's
	// messages (tests).
	flushing func()
}

type logQueue struct {
	items []logItem
	msgs  int   // messages among items (markers are not counted)
	bytes int64 // their sizes
}

// logItem is a message for the client of fl (while fl's request lasts), a
// request's marker n reached (mark), or a server request's place behind
// the messages before it (written: flush).
type logItem struct {
	fl   *flight
	p    *mcp.LoggingMessageParams
	size int64

	mark *orderMark
	n    uint64

	written chan struct{}
}

// send queues p for the client of fl, written while fl's request lasts;
// size is what it holds (its data as JSON). Nothing is queued once fl's
// request ended: the end cancels fl.ctx before it forgets what is queued
// (inFlight), so a message relayed for fl meanwhile (relatedFlight found
// it just before) is not left behind in the queue.
func (q *logQueues) send(fl *flight, p *mcp.LoggingMessageParams, size int64) {
	key := fl.caller.Client()
	q.mu.Lock()
	if fl.ctx.Err() != nil {
		q.mu.Unlock()
		return
	}
	lq, start := q.queueLocked(key)
	if lq.msgs >= maxQueuedLogs || (lq.msgs > 0 && lq.bytes+size > maxQueuedLogBytes) {
		q.mu.Unlock()
		q.drop()
		return
	}
	lq.items = append(lq.items, logItem{fl: fl, p: p, size: size})
	lq.msgs++
	lq.bytes += size
	q.mu.Unlock()
	if start {
		go q.run(key, lq)
	}
}

// reach records marker n of m handled once every message queued before it
// for m's client was written: at once when none is.
//
// Only a request's last marker counts (its answer waits for the one before
// it, and they come in order), so a marker of m still queued gives its
// place up to this one, at the end: a queue holds one marker per request of
// its client, however many a server's events bring. Markers of two streams
// of one client that follow each other, while the client does not read and
// its messages are dropped, otherwise took a place each without bound.
func (q *logQueues) reach(m *orderMark, n uint64) {
	q.mu.Lock()
	lq := q.m[m.client]
	if lq == nil {
		q.mu.Unlock()
		m.reached(n)
		return
	}
	m.mu.Lock()
	ended := m.ended // done, then forgetMark: nothing is queued for m after that
	m.mu.Unlock()
	if ended {
		q.mu.Unlock()
		return
	}
	if i := slices.IndexFunc(lq.items, func(it logItem) bool { return it.mark == m }); i >= 0 {
		n = max(n, lq.items[i].n)
		lq.items = slices.Delete(lq.items, i, i+1)
	}
	lq.items = append(lq.items, logItem{mark: m, n: n})
	q.mu.Unlock()
}

// flush returns once the messages queued for fl's client before it were
// written, at most relayDrain later (a client that does not read delays
// its own questions as it delays its own answers), or when ctx ends. A
// server that sends a log message and then asks the client something
// (sampling, elicitation, roots) has them reach the client in that order,
// as they did when the go-sdk's handler wrote each message itself: the
// go-sdk hands the request over only once the message before it was
// handled, which is now its queueing (relayTo). For a 2026-07-28 client
// the question is its round's answer, after which that round takes no
// message: one written later was lost.
func (q *logQueues) flush(ctx context.Context, fl *flight) {
	q.mu.Lock()
	lq := q.m[fl.caller.Client()]
	if lq == nil { // nothing queued, nothing being written
		q.mu.Unlock()
		return
	}
	written := make(chan struct{})
	lq.items = append(lq.items, logItem{written: written})
	q.mu.Unlock()
	if q.flushing != nil {
		q.flushing()
	}
	t := time.NewTimer(relayDrain)
	defer t.Stop()
	select {
	case <-written:
		return
	case <-t.C:
	case <-ctx.Done():
	}
	// Given up: its place goes, as an ended request's marker does.
	q.mu.Lock()
	if lq := q.m[fl.caller.Client()]; lq != nil {
		lq.items = slices.DeleteFunc(lq.items, func(it logItem) bool { return it.written == written })
	}
	q.mu.Unlock()
}

// forgetMark drops m's marker from its client's queue: m's request ended,
// and nobody waits for it.
func (q *logQueues) forgetMark(m *orderMark) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.m[m.client]
	if lq == nil {
		return
	}
	lq.items = slices.DeleteFunc(lq.items, func(it logItem) bool { return it.mark == m })
}

// queueLocked returns key's queue, made if need be; start says its
// goroutine is to be started.
func (q *logQueues) queueLocked(key any) (*logQueue, bool) {
	if lq := q.m[key]; lq != nil {
		return lq, false
	}
	if q.m == nil {
		q.m = map[any]*logQueue{}
	}
	lq := &logQueue{}
	q.m[key] = lq
	return lq, true
}

// run writes key's queue until it is empty, then forgets it. A message
// whose request ended is not written (its stream is gone, and so is the
// session's once the session ended: every request's ctx derives from it).
// A write lasts as long as the downstream lets it: a legacy SSE client's
// stream has the gateway's stream write timeout, but a call's own stream
// (a POST's response, where the gateway bounds no write: a large answer to
// a slow reader may take long) and stdio have none, so a client that holds
// such a stream open and does not read holds its writer until it reads,
// closes, or the gateway shuts down (which closes its connections once
// --shutdown-timeout passed). The session's Close does not wait for it,
// which would hold a backend's close on such a client; what the writer
// holds is the session's queues, their bounds, and the one message.
func (q *logQueues) run(key any, lq *logQueue) {
	for {
		q.mu.Lock()
		if len(lq.items) == 0 {
			delete(q.m, key)
			q.mu.Unlock()
			return
		}
		it := lq.items[0]
		lq.items[0] = logItem{}
		lq.items = lq.items[1:]
		if it.p != nil {
			lq.msgs--
			lq.bytes -= it.size
		}
		q.mu.Unlock()
		switch {
		case it.mark != nil:
			it.mark.reached(it.n)
		case it.written != nil:
			close(it.written)
		case it.fl.ctx.Err() == nil:
			it.fl.caller.Log(it.p)
		}
	}
}

// forget drops what is queued for fl, whose request ended: its stream is
// gone, and a client that does not read would otherwise hold its messages
// until its writer got to them. A client's queue so holds messages of its
// requests in flight only.
func (q *logQueues) forget(fl *flight) {
	q.mu.Lock()
	defer q.mu.Unlock()
	lq := q.m[fl.caller.Client()]
	if lq == nil {
		return
	}
	kept := lq.items[:0]
	for _, it := range lq.items {
		if it.fl == fl && it.p != nil {
			lq.msgs--
			lq.bytes -= it.size
			continue
		}
		kept = append(kept, it)
	}
	clear(lq.items[len(kept):])
	lq.items = kept
}

// drop counts a message dropped for a client whose queue is full, with
// one WARN a minute.
func (q *logQueues) drop() {
	n := q.dropped.Add(1)
	last := q.warned.Load()
	now := time.Now().UnixNano()
	if (n == 1 || now-last > int64(time.Minute)) && q.warned.CompareAndSwap(last, now) && q.log != nil {
		q.log.Warn("dropped server log messages for a client that is not reading them", "dropped", n,
			"queued", maxQueuedLogs, "queuedBytes", maxQueuedLogBytes)
	}
}
