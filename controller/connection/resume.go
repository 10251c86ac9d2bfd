package connection

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// How often tether resumes an event stream a server ended (docs/contract.md
// §5a, "Limits on what servers send"; docs/reliability.md). A server's SSE
// retry field sets the delay, but a server that sends retry: 0 and closes
// its stream after every event, each with a fresh id (which counts as
// progress, so streamMaxRetries never ends it), would otherwise have tether
// reconnect as fast as the loopback allows, for the session's life (the
// standalone stream) or the call's (a call's stream). Both roads that
// resume a stream tether reads itself, streamableConn.follow and
// rawExchange.call, take their delay from a resumePace; the go-sdk's own
// transport (2026-07-28 and OAuth sessions), whose rule has no hook, is
// held to the same pace at the session's HTTP client (resumeGate).
const (
	// resumeFloor is the least delay before a resumption, whatever the
	// server says: SEP-1699 servers that poll set retry in hundreds of
	// milliseconds to seconds (the conformance suite's sse-retry scenario
	// asks for 500 ms and fails a client that waits twice that), so the
	// floor is below what they ask and above what a reconnect storm needs.
	resumeFloor = 250 * time.Millisecond
	// resumeQuick: a stream that ended sooner after its response came
	// ended quickly. A polling server holds its stream until it has
	// something to say; one that ends every stream at once is asked again
	// less and less often.
	resumeQuick = time.Second
	// resumeQuickFree quick ends in a row are resumed at the floor; each
	// quick end past them doubles it, up to resumeMaxDelay.
	resumeQuickFree = 4
	// resumeMaxDelay caps the delay, the server's retry included: a stream
	// resumed later than that misses what it would bring for no reason.
	resumeMaxDelay = reconnectMaxDelay
)

// resumePace is the pace of one event stream's resumptions: a call's stream
// or a session's standalone stream. Not safe for concurrent use; one
// goroutine reads a stream.
type resumePace struct {
	now func() time.Time // nil: time.Now
	// slowed is told when the floor first grows in a run of quick ends
	// (Session.streamsSlowed); nil: nobody is.
	slowed func()
	opened time.Time // when the stream being read was answered
	quick  int       // quick ends in a row
}

func (p *resumePace) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// started marks the moment a stream (the first or a resumed one) was
// answered.
func (p *resumePace) started() { p.opened = p.clock() }

// next is the delay before resuming the stream that just ended, whose
// server asked for retry (0: it did not say; the go-sdk's backoff then):
// at least resumeFloor, doubled for each quick end past resumeQuickFree in
// a row, at most resumeMaxDelay.
func (p *resumePace) next(retry time.Duration) time.Duration {
	if p.clock().Sub(p.opened) < resumeQuick {
		if p.quick++; p.quick == resumeQuickFree+1 && p.slowed != nil {
			p.slowed()
		}
	} else {
		p.quick = 0
	}
	d := retry
	if d <= 0 {
		d = reconnectDelay(1)
	}
	floor := resumeFloor
	for i := resumeQuickFree; i < p.quick && floor < resumeMaxDelay; i++ {
		floor *= 2
	}
	return min(max(d, floor), resumeMaxDelay)
}

// pacedKey marks the request of a resumption tether paced itself
// (streamableConn.reconnect, rawExchange.resume): the session's resumeGate
// lets it pass.
type pacedKey struct{}

func withPaced(ctx context.Context) context.Context {
	return context.WithValue(ctx, pacedKey{}, struct{}{})
}

// resumeGate paces the resumptions the go-sdk's own transport makes of a
// session's event streams (a GET with Last-Event-ID), which take the
// server's retry as it is (its connectSSE, v1.8.0: no floor; the go-sdk
// exports no setting for it). The gate cannot tell that transport's streams
// apart, so the session's resumptions together keep resumePace's rule: one
// goes out resumeFloor or more after the one before, and further apart
// while they keep coming within resumeQuick of each other. Safe for
// concurrent use; one per session (headerRoundTripper).
type resumeGate struct {
	mu   sync.Mutex
	pace resumePace // opened: when the last resumption went, or will go
}

// admit holds a resumption request until the gate lets it go, or until
// ctx ends (its error then). Requests of resumptions tether paced itself,
// and every other request, pass at once. answered, called once the
// request's answer came (or it failed), is when the next resumption's
// delay starts: a server sees two resumptions resumeFloor apart at least.
func (g *resumeGate) admit(req *http.Request) (answered func(), err error) {
	if g == nil || req.Method != http.MethodGet || req.Header.Get(hdrLastEventID) == "" || req.Context().Value(pacedKey{}) != nil {
		return func() {}, nil
	}
	g.mu.Lock()
	now := g.pace.clock()
	// The go-sdk waited the server's delay already: only the floor counts.
	at := g.pace.opened.Add(g.pace.next(resumeFloor))
	if at.Before(now) {
		at = now
	}
	g.pace.opened = at // a resumption admitted meanwhile waits for this one
	g.mu.Unlock()
	answered = func() {
		g.mu.Lock()
		if t := g.pace.clock(); t.After(g.pace.opened) {
			g.pace.opened = t
		}
		g.mu.Unlock()
	}
	if err := sleepCtx(req.Context(), at.Sub(now)); err != nil {
		return nil, err
	}
	return answered, nil
}

// newResumeGate is the session's resumeGate, which tells streamsSlowed.
func (s *Session) newResumeGate() *resumeGate {
	return &resumeGate{pace: resumePace{slowed: s.streamsSlowed}}
}

// streamsSlowed says in the log, at most once a minute, that the server
// keeps ending its event streams at once and that tether resumes them less
// often: what an operator sees of such a server, whose connection stays
// up (docs/reliability.md, row H7).
func (s *Session) streamsSlowed() {
	now := time.Now().UnixNano()
	last := s.slowedAt.Load()
	if last != 0 && now-last < int64(time.Minute) || !s.slowedAt.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("event streams slowed",
		"reason", fmt.Sprintf("the server ended an event stream within %v of answering it %d times in a row; tether resumes it less often, down to once every %v (docs/contract.md §5a)", resumeQuick, resumeQuickFree+1, resumeMaxDelay))
}
