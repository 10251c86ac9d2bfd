package gateway

import (
	"context"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The session timeout is the gateway's own (sessionTable.expire,
// closeIdleSessions), counted from every request of a session on either
// path: these tests use a short one and wait for what it does.

const idleTestTimeout = 500 * time.Millisecond

const (
	idleEcho = `{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"a_echo","arguments":{"msg":"x"}}}`
	idleHold = `{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"a_hold"}}`
	idlePing = `{"jsonrpc":"2.0","id":"p","method":"ping"}`
)

// idleGateway serves a gateway with the short session timeout in front of
// the fast fixture's backend; fast false sends every call through the
// go-sdk.
func idleGateway(t *testing.T, fast bool) (*fastFixture, *Gateway, string) {
	t.Helper()
	f := newFastFixture(t, true, 0)
	g := New(Options{Logger: testLogger(t), SessionTimeout: idleTestTimeout, ShutdownTimeout: time.Second})
	g.noFastPath.Store(!fast)
	g.Set(Connection{Name: "a", Prefix: "a", Backend: f.sess})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	return f, g, url
}

// sessionEnded is closed when the gateway's session sid ends.
func sessionEnded(t *testing.T, g *Gateway, sid string) <-chan struct{} {
	t.Helper()
	for ss := range g.server.Sessions() {
		if ss.ID() == sid {
			ended := make(chan struct{})
			go func() { _ = ss.Wait(); close(ended) }()
			return ended
		}
	}
	t.Fatalf("no session %s", sid)
	return nil
}

// waitClosed waits for the session to end, then finds its next POST
// answered 404, as the go-sdk answers a session it closed. It returns when
// it saw the end.
func waitClosed(t *testing.T, c *rawClient, ended <-chan struct{}, why string) time.Time {
	t.Helper()
	var at time.Time
	select {
	case <-ended:
		at = time.Now()
	case <-time.After(waitTimeout):
		t.Fatalf("the session was never closed %s", why)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if status, msgs := c.post(ctx, idlePing); status != http.StatusNotFound {
		t.Errorf("a POST on the closed session: status %d %s, want 404", status, msgs)
	}
	return at
}

// stillOpen fails if the session ends within d, while the session is busy
// or in use.
func stillOpen(t *testing.T, ended <-chan struct{}, d time.Duration, why string) {
	t.Helper()
	select {
	case <-ended:
		t.Fatalf("the session was closed %s", why)
	case <-time.After(d):
	}
}

// TestIdleSessionClosed: a session left idle for the session timeout is
// closed, whichever path served its last request, and its client gets 404
// on its next POST; not before the timeout has passed since that request.
func TestIdleSessionClosed(t *testing.T) {
	for _, tc := range []struct {
		name string
		fast bool
		body string
	}{
		{"fast path call", true, idleEcho},
		{"go-sdk call", false, idleEcho},
		{"go-sdk ping", true, idlePing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, g, url := idleGateway(t, tc.fast)
			c := rawSession(t, g, url, "")
			ended := sessionEnded(t, g, c.sid)
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			sent := time.Now()
			if status, msgs := c.post(ctx, tc.body); status != http.StatusOK || strings.Contains(msgs, `"error"`) {
				t.Fatalf("status %d %s", status, msgs)
			}
			if fastCalls := g.fastCalls.Load(); (fastCalls == 1) != (tc.fast && tc.body == idleEcho) {
				t.Fatalf("%d fast calls: the request took the other path", fastCalls)
			}
			if idle := waitClosed(t, c, ended, "after it went idle").Sub(sent); idle < idleTestTimeout {
				t.Errorf("the session was closed %v after its last request, before its timeout %v", idle, idleTestTimeout)
			}
		})
	}
}

// TestFastCallsKeepSessionOpen: a session whose calls all take the fast
// path, which the go-sdk never sees, stays open for as long as they come,
// several timeouts long; and is closed once they stop.
func TestFastCallsKeepSessionOpen(t *testing.T) {
	_, g, url := idleGateway(t, true)
	c := rawSession(t, g, url, "")
	ended := sessionEnded(t, g, c.sid)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	calls := int64(0)
	for until := time.Now().Add(3 * idleTestTimeout); time.Now().Before(until); {
		if status, msgs := c.post(ctx, idleEcho); status != http.StatusOK || !strings.Contains(msgs, "a:") {
			t.Fatalf("call %d: status %d %s (the session closed while its client called)", calls, status, msgs)
		}
		calls++
		stillOpen(t, ended, idleTestTimeout/10, "while its client called every tenth of the timeout")
	}
	if n := g.fastCalls.Load(); n != calls {
		t.Errorf("%d of %d calls took the fast path", n, calls)
	}
	waitClosed(t, c, ended, "once its calls stopped")
}

// TestBusySessionKept: a session with a call in flight, on either path, is
// not idle, however long that lasts; once the call ends it is closed in
// its turn.
func TestBusySessionKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		fast bool
	}{{"fast path call", true}, {"go-sdk call", false}} {
		t.Run(tc.name, func(t *testing.T) {
			f, g, url := idleGateway(t, tc.fast)
			c := rawSession(t, g, url, "")
			ended := sessionEnded(t, g, c.sid)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			answered := make(chan struct{})
			go func() { defer close(answered); c.post(ctx, idleHold) }()
			select {
			case <-f.tb.entered:
			case <-time.After(waitTimeout):
				t.Fatal("the backend never saw the call")
			}
			stillOpen(t, ended, 3*idleTestTimeout, "with a call in flight")
			if fastCalls := g.fastCalls.Load(); (fastCalls == 1) != tc.fast {
				t.Fatalf("%d fast calls: the call took the other path", fastCalls)
			}
			cancel() // the client goes away: the call ends
			<-answered
			waitClosed(t, c, ended, "after its call ended")
		})
	}
}

// TestStreamDoesNotPinSession: a session's standalone stream (GET) held
// open does not keep it from its timeout, as it does not keep it from
// --max-sessions' refusal (the session is busy there): a client holding
// streams open without end kept every session for good, and with them at
// the bound every new session was refused. The stream ends with its
// session, and a new session is admitted.
func TestStreamDoesNotPinSession(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SessionTimeout: idleTestTimeout, MaxSessions: 1, ShutdownTimeout: time.Second})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	c := rawSession(t, g, url, "")
	ended := sessionEnded(t, g, c.sid)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(sessionIDHeader, c.sid)
	req.Header.Set(protocolVersionHeader, c.version)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET stream: %d", resp.StatusCode)
	}
	streamEnded := make(chan struct{})
	go func() { defer close(streamEnded); _, _ = io.Copy(io.Discard, resp.Body) }()
	waitClosed(t, c, ended, "with only its stream open")
	select {
	case <-streamEnded:
	case <-time.After(waitTimeout):
		t.Fatal("the stream of the closed session never ended")
	}
	if resp, body := do(t, http.MethodPost, url, initializeBody, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("a new session at --max-sessions 1: %d %s", resp.StatusCode, body)
	}
}

// TestClosingSessionUnknown: a session dropped to be closed (idle, or to
// make room) is answered 404 from then on, before its close has run: a
// call that came meanwhile reached its backend and was cut off by the
// close, its client told it had cancelled the call itself.
func TestClosingSessionUnknown(t *testing.T) {
	f, g, url := idleGateway(t, true)
	c := rawSession(t, g, url, "")
	// As the sweeper does, an hour on: the session is due, and its close
	// not yet run.
	victims, _ := g.sessions.expire(time.Now().Add(time.Hour))
	if len(victims) != 1 || victims[0].id != c.sid {
		t.Fatalf("expired %d sessions, want %s", len(victims), c.sid)
	}
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if status, msgs := c.post(ctx, idleHold); status != http.StatusNotFound {
		t.Errorf("a call on a session being closed: status %d %s, want 404", status, msgs)
	}
	select {
	case <-f.tb.entered:
		t.Error("the call on a session being closed reached its backend")
	default:
	}
	ended := sessionEnded(t, g, c.sid)
	g.closeSessions(victims)
	select {
	case <-ended:
	case <-time.After(waitTimeout):
		t.Fatal("closeSessions never closed the session")
	}
	g.sessions.mu.Lock()
	closing := len(g.sessions.closing)
	g.sessions.mu.Unlock()
	if closing != 0 {
		t.Errorf("%d sessions still marked closing once closed", closing)
	}
}

// TestSessionTimeoutNegativeKeepsSessions: a negative session timeout
// keeps idle sessions for good: no sweeper runs.
func TestSessionTimeoutNegativeKeepsSessions(t *testing.T) {
	g := New(Options{Logger: testLogger(t), SessionTimeout: -1})
	if g.sessions.idle != 0 {
		t.Fatalf("idle timeout %v, want none", g.sessions.idle)
	}
	if d := New(Options{Logger: testLogger(t)}).sessions.idle; d != DefaultSessionTimeout {
		t.Errorf("default idle timeout %v, want %v", d, DefaultSessionTimeout)
	}
}

// TestSessionTableExpire: expire drops exactly the sessions with nothing
// in flight whose last use is a timeout old or more, and wakes next when
// the earliest other one may be due: an idle one at its due time, a busy
// one or one yet to come no sooner than a timeout from now.
func TestSessionTableExpire(t *testing.T) {
	const idle = time.Minute
	now := time.Now()
	tab := sessionTable{max: 10, perClient: 10, idle: idle}
	tab.m, tab.clients = map[string]*sessionEntry{}, map[string]int{}
	for _, e := range []*sessionEntry{
		{id: "due", lastUsed: now.Add(-idle)},
		{id: "overdue", lastUsed: now.Add(-2 * idle)},
		{id: "busy", inflight: 1, lastUsed: now.Add(-2 * idle)},
		{id: "busy streaming", inflight: 2, streams: 1, lastUsed: now.Add(-2 * idle)},
		{id: "streaming", inflight: 1, streams: 1, lastUsed: now.Add(-idle)},
		{id: "soon", lastUsed: now.Add(-idle + time.Second)},
		{id: "later", lastUsed: now.Add(-idle + 2*time.Second)},
	} {
		tab.add(e)
	}
	victims, next := tab.expire(now)
	var got []string
	for _, v := range victims {
		got = append(got, v.id)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"due", "overdue", "streaming"}) {
		t.Errorf("expired %v, want [due overdue streaming]", got)
	}
	if len(tab.m) != 4 || tab.clients[""] != 4 {
		t.Errorf("the table holds %d sessions (%d counted), want 4", len(tab.m), tab.clients[""])
	}
	for _, id := range got {
		if _, ok := tab.use(id, "", false); ok {
			t.Errorf("session %s, dropped to be closed, is still known", id)
		}
	}
	if want := now.Add(time.Second); !next.Equal(want) {
		t.Errorf("next %v after now, want %v", next.Sub(now), want.Sub(now))
	}

	// Nothing idle: next is a timeout away.
	tab.m["soon"].inflight, tab.m["later"].inflight = 1, 1
	if victims, next := tab.expire(now); len(victims) != 0 || !next.Equal(now.Add(idle)) {
		t.Errorf("expired %d, next %v after now; want none, %v", len(victims), next.Sub(now), idle)
	}
}
