package connection

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// How soon tether resumes an event stream a server ended (docs/contract.md
// §5a, "Limits on what servers send"; docs/reliability.md). A server's SSE
// retry field sets the delay, but a server that sends retry: 1 and closes
// its stream after every event, each with a fresh id (which counts as
// progress, so streamMaxRetries never ends it), would otherwise have tether
// reconnect as fast as the loopback allows, for the session's life (the
// standalone stream) or the call's (a call's stream). Both roads that
// resume a stream tether reads itself, streamableConn.follow and
// rawExchange.call, wait resumeDelay (Session.waitToResume); the go-sdk's
// own transport (2026-07-28 and OAuth sessions), whose rule has no hook, is
// held to the same floor at the session's HTTP client (resumeGate).
const (
	// resumeFloor is the least delay before a resumption, whatever the
	// server says: one stream then costs at most 4 requests a second.
	// SEP-1699 servers that poll set retry in hundreds of milliseconds to
	// seconds (the conformance suite's sse-retry scenario asks for 500 ms
	// and fails a client that waits twice that): they get what they ask,
	// every time, however often they end their streams.
	resumeFloor = 250 * time.Millisecond
	// resumeMaxDelay caps the delay, the server's retry included: a stream
	// resumed later than that misses what it would bring for no reason.
	resumeMaxDelay = reconnectMaxDelay
)

// resumeDelay is the delay before resuming a stream whose server asked for
// retry (0: it did not say; the go-sdk's backoff then), within
// [resumeFloor, resumeMaxDelay].
func resumeDelay(retry time.Duration) time.Duration {
	if retry <= 0 {
		retry = reconnectDelay(1)
	}
	return min(max(retry, resumeFloor), resumeMaxDelay)
}

// waitToResume waits resumeDelay(retry), or until ctx ends (its error
// then), and says in the log when the server asked for less than the floor.
func (s *Session) waitToResume(ctx context.Context, retry time.Duration) error {
	if retry > 0 && retry < resumeFloor {
		s.streamsPaced()
	}
	d := resumeDelay(retry)
	if s.conn != nil && s.conn.resumeWait != nil {
		return s.conn.resumeWait(ctx, d)
	}
	return sleepCtx(ctx, d)
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
// apart, so the session's resumptions together keep the floor: one goes out
// resumeFloor or more after the one before was answered. Safe for
// concurrent use; one per session (headerRoundTripper).
type resumeGate struct {
	now   func() time.Time // nil: time.Now
	paced func()           // told when a resumption is held; nil: nobody is

	mu   sync.Mutex
	last time.Time // when the last resumption was answered, or will go
}

func (g *resumeGate) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

// admit holds a resumption request until the gate lets it go, or until
// ctx ends (its error then). Requests of resumptions tether paced itself,
// and every other request, pass at once. answered, called once the
// request's answer came (or it failed), is when the next resumption's
// delay starts.
func (g *resumeGate) admit(req *http.Request) (answered func(), err error) {
	if g == nil || req.Method != http.MethodGet || req.Header.Get(hdrLastEventID) == "" || req.Context().Value(pacedKey{}) != nil {
		return func() {}, nil
	}
	g.mu.Lock()
	now := g.clock()
	// The go-sdk waited the server's delay already: only the floor counts.
	at := g.last.Add(resumeFloor)
	if at.Before(now) {
		at = now
	}
	g.last = at // a resumption admitted meanwhile waits for this one
	g.mu.Unlock()
	if at.After(now) && g.paced != nil {
		g.paced()
	}
	answered = func() {
		g.mu.Lock()
		if t := g.clock(); t.After(g.last) {
			g.last = t
		}
		g.mu.Unlock()
	}
	if err := sleepCtx(req.Context(), at.Sub(now)); err != nil {
		return nil, err
	}
	return answered, nil
}

// newResumeGate is the session's resumeGate, which tells streamsPaced.
func (s *Session) newResumeGate() *resumeGate {
	return &resumeGate{paced: s.streamsPaced}
}

// streamsPaced says in the log, at most once a minute, that the server
// asked to resume an event stream sooner than tether does: what an
// operator sees of a server that would storm, whose connection stays up
// (docs/reliability.md, row H7).
func (s *Session) streamsPaced() {
	now := time.Now().UnixNano()
	last := s.pacedAt.Load()
	if last != 0 && now-last < int64(time.Minute) || !s.pacedAt.CompareAndSwap(last, now) {
		return
	}
	s.log.Warn("event stream resumed later than the server asked",
		"reason", "the server asked to resume an event stream sooner than "+resumeFloor.String()+" after it ended; tether waits "+resumeFloor.String()+" (docs/contract.md §5a)")
}
