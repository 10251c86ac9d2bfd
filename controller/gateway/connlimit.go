package gateway

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The bound on the gateway's open client connections (--max-connections,
// docs/contract.md, "Limits on what clients send"). A listener that stopped
// accepting at the bound kept descriptors bounded but let a flood of
// stalled connections (a POST's headers and one byte of its body) hold
// every slot until the body deadline, and a legitimate client waited in the
// kernel's backlog behind the whole flood (20,000 connections drained in
// 9.5 minutes). The gateway accepts instead, and at the bound closes the
// connection that has stalled the longest to make room: a client that has
// sent its request is served at once, an attacker that sends nothing more
// loses its slot. When every connection is answering a request, the oldest
// standalone stream (GET) makes room: sessions holding streams filled the
// bound for good and locked every new client out, and an MCP client opens
// its stream again (the go-sdk allows one a session). A connection
// accepted or gone idle a moment ago belongs to a client at work, whose
// POST would meet the close: it goes after the streams (shedRank), while
// such connections are few (atWorkBudget). A
// connection with a call being answered is never shed.
//
// A 2026-07-28 client's subscriptions/listen is a POST answered for the
// client's life: it is a call being answered, and never shed, since the
// go-sdk client does not open a closed listen again (its subscriptions
// would be lost without a word). Listens hold at most half the bound
// instead (holdListen): one past that is answered at once with an error
// naming --max-connections, and the other half stays for clients that
// connect and call, whatever number of listens a flood opens.

// Phases of a client connection, as the shedding policy sees them.
const (
	// connWaiting: no request in progress — a new connection whose request
	// headers are not in yet. Sheddable.
	connWaiting int32 = iota
	// connBody: a request's handler runs but its body has not arrived in
	// full. Sheddable: a client that sends its body promptly leaves this
	// phase before it could be the longest stalled.
	connBody
	// connIdle: a keep-alive connection between requests. Sheddable, but
	// after every stalled request: it is a legitimate client's as often as
	// not, and a closed idle connection costs it a reconnect. One that went
	// idle a moment ago goes after the streams (idleReuseGrace).
	connIdle
	// connStream: a session's standalone stream (GET) is being served.
	// Sheddable, last of all, the oldest first: its client opens another.
	connStream
	// connServing: a request was read in full and is being answered (a
	// call and its response stream). Never shed.
	connServing
	// connShed: chosen to make room and being closed. Final: a request
	// whose body arrives meanwhile is not served (enter fails), so the
	// choice and the close act on the same phase.
	connShed
)

// connLimiter holds the gateway's open connections, at most max.
type connLimiter struct {
	max int

	mu    sync.Mutex
	conns map[*limitedConn]struct{}

	shed, refused atomic.Int64 // connections closed at the bound (tests, logs)
	warnedAt      atomic.Int64 // unix nanoseconds of the last WARN

	// listens counts the subscriptions/listen requests being answered on
	// the limiter's connections, at most maxListens (holdListen).
	listens        atomic.Int64
	maxListens     int64
	listensRefused atomic.Int64 // listens answered with the bound's error (tests, logs)
	listenWarnedAt atomic.Int64 // unix nanoseconds of the last WARN about them
}

func newConnLimiter(max int) *connLimiter {
	return &connLimiter{max: max, conns: make(map[*limitedConn]struct{}, max), maxListens: int64(maxListensOf(max))}
}

// maxListensOf is how many subscriptions/listen requests may be open at
// once on a limiter bounding max connections: half of them, rounded down.
// A listen is never shed, so without this share listens as many as the
// bound locked every new client out for the listeners' lives.
func maxListensOf(max int) int { return max / 2 }

// errListensFull is the answer to a subscriptions/listen past the listens'
// share of --max-connections.
func errListensFull(bound int64) string {
	return fmt.Sprintf("tether: cannot open subscriptions/listen: %d listens are open, the gateway's bound on them (half of --max-connections, so that listens never hold every connection); retry once a listen ends", bound)
}

// holdListen takes a listen's place on the limiter that holds the
// connection of ctx, and gives release to call when the listen ends. ok is
// false, and nothing taken, when the limiter's listens are at their bound.
// A request on no limited connection (the gateway's bare Handler) takes
// nothing.
func holdListen(ctx context.Context) (release func(), bound int64, ok bool) {
	c, limited := ctx.Value(connKey{}).(*limitedConn)
	if !limited {
		return func() {}, 0, true
	}
	l := c.l
	if l.listens.Add(1) > l.maxListens {
		l.listens.Add(-1)
		l.listensRefused.Add(1)
		return nil, l.maxListens, false
	}
	return func() { l.listens.Add(-1) }, l.maxListens, true
}

// warnListensFull reports whether a WARN about refused listens is due on
// the limiter of ctx: one a minute at most, so that a flood does not
// flood the log.
func warnListensFull(ctx context.Context) bool {
	c, limited := ctx.Value(connKey{}).(*limitedConn)
	if !limited {
		return false
	}
	now := time.Now().UnixNano()
	last := c.l.listenWarnedAt.Load()
	return now-last > int64(time.Minute) && c.l.listenWarnedAt.CompareAndSwap(last, now)
}

// limitedConn is a client connection the limiter holds, with its phase,
// the time of its last progress (accepted, a byte read, a phase entered),
// the time it was accepted, and the time of its phase's first step (the
// phase entered, moved once to the first byte read in it).
type limitedConn struct {
	net.Conn
	l        *connLimiter
	phase    atomic.Int32
	since    atomic.Int64 // unix nanoseconds
	accepted atomic.Int64 // unix nanoseconds
	stepped  atomic.Int64 // unix nanoseconds
	read     atomic.Bool  // a byte was read in the phase
}

// enter moves c to phase; false once c is shed (the phase is final).
func (c *limitedConn) enter(phase int32) bool {
	for {
		cur := c.phase.Load()
		if cur == connShed {
			return false
		}
		if c.phase.CompareAndSwap(cur, phase) {
			now := time.Now().UnixNano()
			c.read.Store(false)
			c.since.Store(now)
			c.stepped.Store(now)
			return true
		}
	}
}

// Read counts every byte that arrives as progress: a client trickling its
// body is stalled since its last byte, not since its request began. The
// first byte of a phase also moves stepped: the next request of an idle
// connection has begun.
func (c *limitedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		now := time.Now().UnixNano()
		c.since.Store(now)
		if !c.read.Load() && c.read.CompareAndSwap(false, true) {
			c.stepped.Store(now)
		}
	}
	return n, err
}

func (c *limitedConn) Close() error {
	c.l.release(c)
	return c.Conn.Close()
}

// admit takes c into the limiter. At the bound it picks the connection to
// shed for it and moves it to connShed (the caller closes it, outside the
// lock); when every held connection has a call being answered, c is
// refused. The victim is claimed with a compare-and-swap from the phase it
// was chosen in: a connection whose body came in meanwhile is serving and
// not taken (the choice is made again), and once taken it cannot start
// serving (enter).
func (l *connLimiter) admit(c net.Conn) (lc, victim *limitedConn, ok bool) {
	lc = &limitedConn{Conn: c, l: l}
	lc.enter(connWaiting)
	lc.accepted.Store(lc.since.Load())
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) >= l.max {
		for {
			v, phase := l.victim()
			if v == nil {
				return nil, nil, false
			}
			if v.phase.CompareAndSwap(phase, connShed) {
				victim = v
				break
			}
		}
		delete(l.conns, victim)
	}
	l.conns[lc] = struct{}{}
	return lc, victim, true
}

// idleReuseGrace is how long a keep-alive connection that just went idle
// (or on which the first bytes of a next request just arrived) is taken
// for a client between two requests. Bytes that go on trickling in do not
// extend it: a request whose headers take longer is stalled, not on its
// way, and shed before the streams. Its next request is on its way or about to be:
// closed now, that request meets the close, and an HTTP client sends a
// POST that met a closed connection no more (the go-sdk's client failed
// its initialized notification with "server closed idle connection", at
// the bound with every other connection a stream). Such a connection is
// shed after the standalone streams, whose clients open them again.
const idleReuseGrace = time.Second

// newConnGrace is how long a connection whose request is not in yet is
// taken for a new one rather than a stalled one, counted from its accept
// (bytes trickled in do not extend it). An MCP client opens two at once
// (initialized and its stream's GET): at the bound with every other
// connection a stream, the second's admission shed the first a
// millisecond after its accept, before its request could be read, and
// its POST got EOF. A new connection is shed after the standalone
// streams; a flood of new connections faster than the bound per grace
// then closes streams, which their clients open again, before its own.
const newConnGrace = 250 * time.Millisecond

// atWorkBudget is how many connections at most are spared as clients'
// at work (newConnGrace, idleReuseGrace) at the bound: a sixteenth of it,
// and 4 at least. Each spared connection can cost a standalone stream its
// slot; past the budget (a client opening connections every millisecond,
// or making a cheap request on each of its connections every second) they
// are shed as stalled ones are, before the streams.
func atWorkBudget(bound int) int { return max(4, bound/16) }

// victim is the connection stalled the longest: of those waiting for a
// request or its body (accepted newConnGrace ago at least), the one with
// the oldest progress; failing those, the oldest idle one (idle for
// idleReuseGrace at least); failing those, the oldest standalone stream;
// failing those, the new and the just idle ones (clients at work, while
// they are atWorkBudget at most: more are ranked as the others), the
// oldest progress first; nil if every connection has a call being
// answered. It returns the phase it saw. Linear: it runs only at the
// bound, over max connections.
func (l *connLimiter) victim() (*limitedConn, int32) {
	now := time.Now().UnixNano()
	busy := 0
	for c := range l.conns {
		if atWork(c.phase.Load(), now-c.stepped.Load(), now-c.accepted.Load()) {
			busy++
		}
	}
	spare := busy <= atWorkBudget(l.max)
	var best *limitedConn
	var bestPhase, bestRank int32
	var bestSince int64
	for c := range l.conns {
		p := c.phase.Load()
		if p == connServing || p == connShed {
			continue
		}
		s := c.since.Load()
		rank := shedRank(p, spare && atWork(p, now-c.stepped.Load(), now-c.accepted.Load()))
		if best == nil || rank < bestRank || (rank == bestRank && s < bestSince) {
			best, bestPhase, bestRank, bestSince = c, p, rank, s
		}
	}
	return best, bestPhase
}

// atWork reports whether a connection in phase is taken for a client at
// work: accepted less than newConnGrace ago with its request not in yet,
// or idle since, or with the first bytes of its next request since, less
// than idleReuseGrace ago. step is the time since it entered its phase or
// got the phase's first byte, age the time since its accept.
func atWork(phase int32, step, age int64) bool {
	switch phase {
	case connWaiting, connBody:
		return age < int64(newConnGrace)
	case connIdle:
		return step < int64(idleReuseGrace)
	}
	return false
}

// shedRank orders the sheddable phases, first shed first: a request not
// yet in (waiting or its body), an idle connection, a standalone stream,
// then a connection spared as a client's at work.
func shedRank(phase int32, spared bool) int32 {
	if spared {
		return 3
	}
	switch phase {
	case connWaiting, connBody:
		return 0
	case connIdle:
		return 1
	}
	return 2 // connStream
}

func (l *connLimiter) release(c *limitedConn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
}

// connState follows net/http's view of each connection (http.Server's
// ConnState): headers are read in StateNew or StateIdle, StateActive is
// entered with a request's headers in, before its handler runs.
func (l *connLimiter) connState(nc net.Conn, s http.ConnState) {
	c, ok := nc.(*limitedConn)
	if !ok {
		return
	}
	switch s {
	case http.StateActive:
		c.enter(connBody) // serving once the body is in (markServing)
	case http.StateIdle:
		c.enter(connIdle)
	case http.StateHijacked:
		// A bridge's session on the control socket (ServeLocal): a
		// session being served, never shed for a new connection; its
		// handler bounds how many there are.
		c.enter(connServing)
	}
}

// connKey carries a request's *limitedConn in its context.
type connKey struct{}

func connContext(ctx context.Context, nc net.Conn) context.Context {
	if c, ok := nc.(*limitedConn); ok {
		return context.WithValue(ctx, connKey{}, c)
	}
	return ctx
}

// markServing moves the connection of the request whose context is ctx to
// connServing (its request is in, and it is never shed while answered), or
// to connStream for a standalone stream (GET). False if the connection was
// shed before: it is being closed and the request must not be served.
func markServing(ctx context.Context, method string) bool {
	c, ok := ctx.Value(connKey{}).(*limitedConn)
	if !ok {
		return true
	}
	if method == http.MethodGet {
		return c.enter(connStream)
	}
	return c.enter(connServing)
}

// limitListener is ln with the limiter's admission on every Accept. The
// descriptors of client connections stay at most max (plus, for an
// instant, the one being admitted).
type limitListener struct {
	net.Listener
	l    *connLimiter
	warn func(shed, refused int64)
}

func (ll *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := ll.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc, victim, ok := ll.l.admit(c)
		if victim != nil {
			_ = victim.Conn.Close()
			ll.noteShed(&ll.l.shed)
		}
		if !ok {
			_ = c.Close()
			ll.noteShed(&ll.l.refused)
			continue
		}
		return lc, nil
	}
}

// noteShed counts a closed connection and WARNs once a minute at most: a
// flood must not flood the log.
func (ll *limitListener) noteShed(n *atomic.Int64) {
	n.Add(1)
	now := time.Now().UnixNano()
	last := ll.l.warnedAt.Load()
	if now-last > int64(time.Minute) && ll.l.warnedAt.CompareAndSwap(last, now) && ll.warn != nil {
		ll.warn(ll.l.shed.Load(), ll.l.refused.Load())
	}
}
