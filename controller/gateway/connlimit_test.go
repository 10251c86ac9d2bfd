package gateway

import (
	"context"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// pipeConn is one end of an in-memory connection; the other end is closed
// with the test.
func pipeConn(t *testing.T) net.Conn {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	return a
}

// held admits a connection into l in phase, stalled since at.
func held(t *testing.T, l *connLimiter, phase int32, at time.Time) *limitedConn {
	t.Helper()
	c, victim, ok := l.admit(pipeConn(t))
	if !ok || victim != nil {
		t.Fatalf("admitting below the bound: ok=%v victim=%v", ok, victim)
	}
	c.phase.Store(phase)
	c.since.Store(at.UnixNano())
	c.accepted.Store(at.UnixNano())
	c.stepped.Store(at.UnixNano())
	return c
}

// TestConnLimiterSheds: at the bound, the connection stalled the longest
// makes room (a request not yet in before an idle keep-alive one, the
// oldest progress first; then the oldest standalone stream); a connection
// with a call being answered is never shed; when every connection has one,
// the new one is refused.
func TestConnLimiterSheds(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

	l := newConnLimiter(7)
	serving := held(t, l, connServing, at(0)) // the oldest of all
	idle := held(t, l, connIdle, at(1))
	body := held(t, l, connBody, at(3))
	waiting := held(t, l, connWaiting, at(2))
	young := held(t, l, connBody, at(4))
	youngStream := held(t, l, connStream, at(-1))
	oldStream := held(t, l, connStream, at(-2))

	for i, want := range []*limitedConn{waiting, body, young, idle, oldStream, youngStream} {
		c, victim, ok := l.admit(pipeConn(t))
		if !ok || victim != want {
			t.Fatalf("admission %d at the bound shed %p (ok=%v), want %p", i, victim, ok, want)
		}
		if got := victim.phase.Load(); got != connShed {
			t.Fatalf("admission %d: the shed connection is in phase %d, want %d", i, got, connShed)
		}
		c.enter(connServing)
	}
	// Now seven connections with calls being answered: the next is
	// refused, nothing shed.
	if _, victim, ok := l.admit(pipeConn(t)); ok || victim != nil {
		t.Fatalf("every connection serving: admitted=%v, shed %p; want refused", ok, victim)
	}
	if len(l.conns) != 7 {
		t.Fatalf("the limiter holds %d connections, want 7", len(l.conns))
	}
	if _, ok := l.conns[serving]; !ok {
		t.Fatal("a serving connection was shed")
	}
	// A connection that closes frees its slot.
	serving.Close()
	if _, victim, ok := l.admit(pipeConn(t)); !ok || victim != nil {
		t.Fatalf("after a close: admitted=%v, shed %p; want admitted, nothing shed", ok, victim)
	}
}

// TestConnLimiterProgress: a byte that arrives is progress, so a client
// trickling its body is stalled since its last byte.
func TestConnLimiterProgress(t *testing.T) {
	l := newConnLimiter(2)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	old := time.Now().Add(-time.Hour)
	trickle := held(t, l, connBody, old)
	trickle.Conn = a
	silent := held(t, l, connBody, old.Add(time.Second))
	go func() { _, _ = b.Write([]byte("{")) }()
	if _, err := trickle.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if _, victim, _ := l.admit(pipeConn(t)); victim != silent {
		t.Fatalf("shed %p, want the silent connection %p, not the one that just sent a byte", victim, silent)
	}
}

// TestConnLimiterPhases: net/http's states and the body's arrival move a
// real connection through the phases: its request's headers in, it is
// stalled until its body is in, then serving; without a body, serving at
// once (a GET, a standalone stream: connStream).
func TestConnLimiterPhases(t *testing.T) {
	l := newConnLimiter(4)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	phases := make(chan int32, 4)
	phaseOf := func(r *http.Request) int32 {
		return r.Context().Value(connKey{}).(*limitedConn).phase.Load()
	}
	h := withBodyDeadline(time.Minute, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		phases <- phaseOf(r)
		_, _ = io.ReadAll(r.Body)
		phases <- phaseOf(r)
	}))
	srv := &http.Server{Handler: h, ConnState: l.connState, ConnContext: connContext}
	go func() { _ = srv.Serve(&limitListener{Listener: ln, l: l}) }()
	defer srv.Shutdown(context.Background())

	resp, err := http.Post("http://"+ln.Addr().String(), "application/json", strings.NewReader(`{"x":1}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if before, after := <-phases, <-phases; before != connBody || after != connServing {
		t.Errorf("phases before and after the body: %d, %d; want %d, %d", before, after, connBody, connServing)
	}
	resp, err = http.Get("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if before, after := <-phases, <-phases; before != connStream || after != connStream {
		t.Errorf("phases of a GET (a standalone stream, no body): %d, %d; want %d", before, after, connStream)
	}
	req, _ := http.NewRequest(http.MethodDelete, "http://"+ln.Addr().String(), nil)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if before, after := <-phases, <-phases; before != connServing || after != connServing {
		t.Errorf("phases of a DELETE (no body): %d, %d; want %d", before, after, connServing)
	}
}

// TestConnLimiterKeepsHijackedConnections: a connection its handler took
// over (a bridge's session on the control socket) is serving, never shed.
func TestConnLimiterKeepsHijackedConnections(t *testing.T) {
	l := newConnLimiter(1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hijacked := make(chan net.Conn, 1)
	srv := &http.Server{ConnState: l.connState, ConnContext: connContext,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				t.Error(err)
				return
			}
			hijacked <- c
		})}
	go func() { _ = srv.Serve(&limitListener{Listener: ln, l: l}) }()
	defer srv.Close()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := io.WriteString(client, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	c := <-hijacked
	defer c.Close()
	if got := c.(*limitedConn).phase.Load(); got != connServing {
		t.Fatalf("a hijacked connection is in phase %d, want %d (serving)", got, connServing)
	}
	if _, victim, ok := l.admit(pipeConn(t)); ok || victim != nil {
		t.Fatalf("at the bound with a hijacked connection: admitted=%v, shed %p; want refused", ok, victim)
	}
}

// TestConnLimiterStreamsDoNotLockOut: when every connection holds a
// session's standalone stream (GET), a new client is admitted and the
// oldest stream closed for it: sessions holding streams filled the bound
// for good and every new connection was refused.
func TestConnLimiterStreamsDoNotLockOut(t *testing.T) {
	l := newConnLimiter(3)
	old := time.Now().Add(-time.Hour)
	first := held(t, l, connStream, old)
	held(t, l, connStream, old.Add(time.Second))
	held(t, l, connServing, old.Add(-time.Second))
	c, victim, ok := l.admit(pipeConn(t))
	if !ok || victim != first {
		t.Fatalf("streams at the bound: admitted=%v, shed %p; want admitted, the oldest stream %p shed", ok, victim, first)
	}
	if _, ok := l.conns[c]; !ok {
		t.Fatal("the new connection is not held")
	}
}

// TestConnLimiterSparesAClientBetweenRequests: a keep-alive connection
// that went idle a moment ago (or on which a next request's bytes just
// arrived) is shed after the standalone streams, one idle for longer
// before them. Its client is about to send on it: shed first, an MCP
// client's initialized notification (a POST, which HTTP clients do not
// send again) met the close when the client's own stream's connection
// was admitted at the bound.
func TestConnLimiterSparesAClientBetweenRequests(t *testing.T) {
	l := newConnLimiter(4)
	old := time.Now().Add(-time.Hour)
	stream := held(t, l, connStream, old)
	justIdle := held(t, l, connIdle, time.Now())
	longIdle := held(t, l, connIdle, old.Add(time.Minute))
	sending := held(t, l, connIdle, old)
	sending.Conn = pipeConnWriting(t, "POST")
	if _, err := sending.Read(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	wantShed(t, l, longIdle, stream, justIdle, sending)
}

// TestConnLimiterShedsATricklingIdleConnection: the grace of an idle
// connection counts from its first byte, not its last: one that went idle
// and began its next request long ago and trickles that request's header
// bytes in, a byte now and then, is stalled, and is shed before the
// standalone streams (a client doing so cost every other client its
// stream, one each admission, while its own connections outlived them).
func TestConnLimiterShedsATricklingIdleConnection(t *testing.T) {
	l := newConnLimiter(2)
	old := time.Now().Add(-time.Hour)
	stream := held(t, l, connStream, old)
	trickling := held(t, l, connIdle, old.Add(time.Minute))
	trickling.Conn = pipeConnWriting(t, "POST")
	trickling.read.Store(true) // its first byte came when it went idle
	if _, err := trickling.Read(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	wantShed(t, l, trickling, stream)
}

// TestConnLimiterSparesANewConnection: a connection accepted a moment ago
// whose request is not in yet is new, not stalled: it is shed after the
// standalone streams, a stalled one (accepted long ago, even if its last
// byte is recent) before them. An MCP client opens two connections at
// once; the second's admission shed the first a millisecond after its
// accept, and the client's POST got EOF.
func TestConnLimiterSparesANewConnection(t *testing.T) {
	l := newConnLimiter(4)
	old := time.Now().Add(-time.Hour)
	stream := held(t, l, connStream, old)
	fresh := held(t, l, connWaiting, time.Now())
	stalled := held(t, l, connWaiting, old.Add(time.Minute))
	trickling := held(t, l, connBody, old)
	trickling.since.Store(time.Now().UnixNano()) // a byte just arrived
	wantShed(t, l, stalled, trickling, stream, fresh)
}

// TestConnLimiterSparesFewAtWork: the grace of connections taken for
// clients at work (new ones, ones just idle) holds for a few at a time
// only. A client that opens a connection every millisecond, or makes a
// cheap request (a 401 without the token) on each of its connections
// every second, keeps all of its connections within a grace: without the
// budget, each admission at the bound closed another client's standalone
// stream, up to every one of them, while its own connections stayed; past
// the budget they are stalled ones again, shed before the streams.
func TestConnLimiterSparesFewAtWork(t *testing.T) {
	const max = 64
	l := newConnLimiter(max)
	budget := atWorkBudget(max)
	old := time.Now().Add(-time.Hour)
	var streams []*limitedConn
	for range max - budget - 2 {
		streams = append(streams, held(t, l, connStream, old))
	}
	now := time.Now()
	var flood []*limitedConn
	for i := range budget + 2 {
		phase := connWaiting
		if i%2 == 1 {
			phase = connIdle
		}
		c := held(t, l, phase, now.Add(time.Duration(i)*time.Microsecond))
		flood = append(flood, c)
	}
	for i := range 2 {
		c, victim, ok := l.admit(pipeConn(t))
		if !ok || !slices.Contains(flood, victim) {
			t.Fatalf("admission %d at the bound with %d connections at work shed %p (ok=%v), want one of them", i, budget+2-i, victim, ok)
		}
		c.enter(connServing)
	}
	// Within the budget, they are spared again: the oldest stream goes.
	c, victim, ok := l.admit(pipeConn(t))
	if !ok || !slices.Contains(streams, victim) {
		t.Fatalf("admission at the bound with %d connections at work shed %p (ok=%v), want a stream", budget, victim, ok)
	}
	c.enter(connServing)
}

// pipeConnWriting is a connection whose peer writes s.
func pipeConnWriting(t *testing.T, s string) net.Conn {
	t.Helper()
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	go func() { _, _ = b.Write([]byte(s)) }()
	return a
}

// TestConnLimiterShedIsFinal: a connection chosen to make room cannot
// start serving (its body's last byte arriving between the choice and the
// close would have its call run and cut off), and one that started
// serving first is not chosen.
func TestConnLimiterShedIsFinal(t *testing.T) {
	l := newConnLimiter(1)
	stalled := held(t, l, connBody, time.Now().Add(-time.Hour))
	_, victim, ok := l.admit(pipeConn(t))
	if !ok || victim != stalled {
		t.Fatalf("admitted=%v, shed %p; want the stalled connection %p", ok, victim, stalled)
	}
	if stalled.enter(connServing) {
		t.Fatal("a shed connection entered connServing")
	}
	ctx := context.WithValue(context.Background(), connKey{}, stalled)
	if markServing(ctx, http.MethodPost) || markServing(ctx, http.MethodGet) {
		t.Fatal("markServing succeeded on a shed connection")
	}
	if got := stalled.phase.Load(); got != connShed {
		t.Fatalf("the shed connection is in phase %d, want %d", got, connShed)
	}

	// A body read to its end on a shed connection fails: the call is not
	// run for a client that will not get its answer.
	b := &deadlineBody{ReadCloser: io.NopCloser(strings.NewReader("{}")), ctx: ctx, method: http.MethodPost}
	if _, err := io.ReadAll(b); err != errConnShed {
		t.Fatalf("reading a body on a shed connection: %v, want errConnShed", err)
	}
}

// wantShed admits one new connection at a time at l's bound, each going on
// to serve, and requires each admission to shed the next of want, in order.
func wantShed(t *testing.T, l *connLimiter, want ...*limitedConn) {
	t.Helper()
	for i, w := range want {
		c, victim, ok := l.admit(pipeConn(t))
		if !ok || victim != w {
			t.Fatalf("admission %d at the bound shed %p (ok=%v), want %p", i, victim, ok, w)
		}
		c.enter(connServing)
	}
}
