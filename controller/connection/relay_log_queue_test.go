//go:build unix

package connection

//lint:file-ignore SA1019 relaying a server's log messages (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/spec"
)

// stuckCaller is a downstream client that asked for debug messages and
// does not read them: its first message is taken only once release is
// closed (a client whose stream's TCP window is full).
type stuckCaller struct {
	fakeCaller
	entered  chan struct{} // closed when the first message is being written
	release  chan struct{}
	ctx      context.Context // the test's bound
	once     sync.Once
	returned atomic.Bool // a write returned
}

func (c *stuckCaller) LogLevel() mcp.LoggingLevel { return "debug" }

func (c *stuckCaller) Log(*mcp.LoggingMessageParams) {
	c.once.Do(func() { close(c.entered) })
	select {
	case <-c.release:
	case <-c.ctx.Done():
	}
	c.returned.Store(true)
}

// quickCaller is a downstream client that asked for debug messages and
// reads them at once.
type quickCaller struct {
	fakeCaller
	mu   sync.Mutex
	logs []string
}

func (c *quickCaller) LogLevel() mcp.LoggingLevel { return "debug" }

func (c *quickCaller) Log(p *mcp.LoggingMessageParams) {
	c.mu.Lock()
	c.logs = append(c.logs, fmt.Sprint(p.Data))
	c.mu.Unlock()
}

func (c *quickCaller) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.logs...)
}

// logServer is a go-sdk server whose test_tool_with_logging sends three
// log messages and then its answer, as the everything-server's does.
func logServer() *mcp.Server {
	srv := mcp.NewServer(&mcp.Implementation{Name: "logs", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
	})
	mcp.AddTool(srv, &mcp.Tool{Name: "test_tool_with_logging"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
		for i := range 3 {
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("m%d", i)})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
	})
	return srv
}

// A downstream client that does not read its log messages costs no other
// client of the same backend session anything (docs/reliability.md G12):
// client A's call gets its messages relayed, and A takes none of them; then
// client B calls the same tool on the same session. B's answer must come
// back with its three messages, in order, while A's first message is still
// being written. Before, the go-sdk's one notification goroutine was held
// by A's write, and B's answer waited relayDrain and then came back before
// any of its messages. Every road: streamable HTTP of both eras, legacy
// SSE, stdio.
func TestSlowClientDoesNotDelayAnother(t *testing.T) {
	httpServer := func(t *testing.T, stateless bool) *Session {
		srv := logServer()
		hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: stateless}))
		t.Cleanup(hs.Close)
		s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
		if got := s.Server().ProtocolVersion >= protocol2026; got != stateless {
			t.Fatalf("negotiated %s", s.Server().ProtocolVersion)
		}
		return s
	}
	for _, tc := range []struct {
		name    string
		session func(t *testing.T) *Session
		want    string // B's messages
	}{
		{"classic", func(t *testing.T) *Session { return httpServer(t, false) }, "m0,m1,m2"},
		{"2026-07-28", func(t *testing.T) *Session { return httpServer(t, true) }, "m0,m1,m2"},
		{"sse", func(t *testing.T) *Session {
			srv := logServer()
			hs := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))
			t.Cleanup(hs.Close)
			return connect(t, Request{Spec: httpSpec(hs.URL, spec.TransportSSE)})
		}, "m0,m1,m2"},
		{"stdio", func(t *testing.T) *Session { return connect(t, Request{Spec: stdioSpec(goEverything(t))}) },
			"Tool execution started,Tool processing data,Tool execution completed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.session(t)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := s.SetLogLevel(ctx, "debug"); err != nil {
				t.Fatalf("SetLogLevel: %v", err)
			}
			a := &stuckCaller{fakeCaller: fakeCaller{client: "a"}, entered: make(chan struct{}), release: make(chan struct{}), ctx: ctx}
			defer close(a.release)
			aDone := make(chan error, 1)
			go func() {
				_, err := s.CallTool(wire.WithCaller(ctx, a), &mcp.CallToolParams{Name: "test_tool_with_logging"}, nil)
				aDone <- err
			}()
			select {
			case <-a.entered:
			case <-ctx.Done():
				t.Fatal("client A was never handed its first log message")
			}
			// A's answer waits for its messages at most relayDrain, which
			// costs A alone.
			if err := <-aDone; err != nil {
				t.Fatalf("A's CallTool: %v", err)
			}

			b := &quickCaller{fakeCaller: fakeCaller{client: "b"}}
			if _, err := s.CallTool(wire.WithCaller(ctx, b), &mcp.CallToolParams{Name: "test_tool_with_logging"}, nil); err != nil {
				t.Fatalf("B's CallTool: %v", err)
			}
			if a.returned.Load() {
				t.Fatal("A's first message was written: the test proves nothing")
			}
			if got := strings.Join(b.got(), ","); got != tc.want {
				t.Errorf("when B's answer came back, while A did not read, B had the log messages %q, want %s", got, tc.want)
			}
		})
	}
}

// A client that does not read holds at most maxQueuedLogs messages and
// maxQueuedLogBytes bytes of them (one message whatever its size); past
// that they are dropped and counted, with one WARN. What was queued is
// written in order once the client reads.
func TestLogQueueIsBounded(t *testing.T) {
	var logBuf bytes.Buffer
	var logMu sync.Mutex
	q := &logQueues{log: slog.New(slog.NewTextHandler(&lockedWriter{w: &logBuf, mu: &logMu}, nil))}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	release := make(chan struct{})
	c := &gatedCaller{release: release, entered: make(chan struct{}), ctx: ctx}
	msg := func(i int) *mcp.LoggingMessageParams { return &mcp.LoggingMessageParams{Level: "info", Data: i} }
	fl := &flight{caller: c, ctx: ctx}

	q.send(fl, msg(0), 1)
	<-c.entered // 0 is being written; the queue is empty
	for i := 1; i <= maxQueuedLogs+3; i++ {
		q.send(fl, msg(i), 1)
	}
	if n := q.dropped.Load(); n != 3 {
		t.Errorf("dropped %d messages past %d queued, want 3", n, maxQueuedLogs)
	}
	close(release)
	m := &orderMark{client: c.Client()}
	wake := make(chan struct{})
	m.want, m.sent, m.wake = 1, 1, wake
	q.reach(m, 1)
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the marker queued behind the messages was never reached")
	}
	got := c.got()
	if len(got) != maxQueuedLogs+1 {
		t.Fatalf("wrote %d messages, want %d", len(got), maxQueuedLogs+1)
	}
	for i, v := range got {
		if v != i {
			t.Fatalf("message %d written was %d: out of order", i, v)
		}
	}

	// Bytes: one large message is taken into an empty queue, a second one
	// past the bound is not.
	c2 := &gatedCaller{release: make(chan struct{}), entered: make(chan struct{}), ctx: ctx}
	defer close(c2.release)
	fl2 := &flight{caller: c2, ctx: ctx}
	q.send(fl2, msg(0), 1)
	<-c2.entered
	q.send(fl2, msg(1), maxQueuedLogBytes+1)
	q.send(fl2, msg(2), 1)
	if n := q.dropped.Load(); n != 4 {
		t.Errorf("dropped %d messages in all, want 4 (one past the byte bound)", n)
	}
	logMu.Lock()
	defer logMu.Unlock()
	if n := strings.Count(logBuf.String(), "level=WARN"); n != 1 {
		t.Errorf("%d WARN lines for 4 drops within a minute, want 1:\n%s", n, logBuf.String())
	}
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// gatedCaller records the data of its messages; the first write waits for
// release.
type gatedCaller struct {
	fakeCaller
	release chan struct{}
	entered chan struct{}
	ctx     context.Context
	once    sync.Once

	mu   sync.Mutex
	data []int
}

func (c *gatedCaller) Client() any { return c }

func (c *gatedCaller) Log(p *mcp.LoggingMessageParams) {
	c.once.Do(func() {
		close(c.entered)
		select {
		case <-c.release:
		case <-c.ctx.Done():
		}
	})
	c.mu.Lock()
	c.data = append(c.data, p.Data.(int))
	c.mu.Unlock()
}

func (c *gatedCaller) got() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.data...)
}

// A message whose request ended before its turn is not written (its
// stream is gone), and a request's markers that follow one another hold
// one place in its client's queue.
func TestLogQueueSkipsEndedRequestsAndFoldsMarkers(t *testing.T) {
	q := &logQueues{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &gatedCaller{release: make(chan struct{}), entered: make(chan struct{}), ctx: ctx}
	msg := func(i int) *mcp.LoggingMessageParams { return &mcp.LoggingMessageParams{Level: "info", Data: i} }
	q.send(&flight{caller: c, ctx: ctx}, msg(0), 1)
	<-c.entered
	ended, end := context.WithCancel(ctx)
	q.send(&flight{caller: c, ctx: ended}, msg(1), 1)
	end()
	q.send(&flight{caller: c, ctx: ctx}, msg(2), 1)
	m := &orderMark{client: c.Client()}
	wake := make(chan struct{})
	m.want, m.sent, m.wake = 3, 3, wake
	for n := range uint64(3) {
		q.reach(m, n+1)
	}
	q.mu.Lock()
	places := len(q.m[c.Client()].items)
	q.mu.Unlock()
	if places != 3 {
		t.Errorf("the queue holds %d items after messages 1 and 2 and three markers of one request, want 3", places)
	}
	close(c.release)
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the request's last marker was never reached")
	}
	if got := fmt.Sprint(c.got()); got != "[0 2]" {
		t.Errorf("wrote %s, want [0 2] (message 1's request had ended)", got)
	}
}

// What is queued for a request that ended is dropped at once, not when the
// client's writer gets to it: a client that does not read holds messages
// of its requests in flight only. Another request's messages and the
// markers stay.
func TestLogQueueForgetsAnEndedRequest(t *testing.T) {
	q := &logQueues{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &gatedCaller{release: make(chan struct{}), entered: make(chan struct{}), ctx: ctx}
	msg := func(i int) *mcp.LoggingMessageParams { return &mcp.LoggingMessageParams{Level: "info", Data: i} }
	live := &flight{caller: c, ctx: ctx}
	endedCtx, end := context.WithCancel(ctx)
	ended := &flight{caller: c, ctx: endedCtx}
	q.send(live, msg(0), 1)
	<-c.entered
	for i := 1; i <= 10; i++ {
		q.send(ended, msg(i), 100)
	}
	q.send(live, msg(11), 1)
	m := &orderMark{client: c.Client()}
	wake := make(chan struct{})
	m.want, m.sent, m.wake = 1, 1, wake
	q.reach(m, 1)
	end()
	q.forget(ended)
	q.mu.Lock()
	lq := q.m[c.Client()]
	msgs, bytes, items := lq.msgs, lq.bytes, len(lq.items)
	q.mu.Unlock()
	if msgs != 1 || bytes != 1 || items != 2 {
		t.Errorf("after the request ended its client's queue holds %d messages, %d bytes, %d items; want 1, 1, 2 (the live request's message and the marker)", msgs, bytes, items)
	}
	close(c.release)
	select {
	case <-wake:
	case <-ctx.Done():
		t.Fatal("the marker was never reached")
	}
	if got := fmt.Sprint(c.got()); got != "[0 11]" {
		t.Errorf("wrote %s, want [0 11]", got)
	}
}

// The end of a request drops what its client's queue still holds for it
// (inFlight).
func TestLogQueueDropsARequestsMessagesAtItsEnd(t *testing.T) {
	s := &Session{name: "conn", log: slog.New(slog.DiscardHandler), red: newRedactor(nil, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &gatedCaller{release: make(chan struct{}), entered: make(chan struct{}), ctx: ctx}
	defer close(c.release)
	done := s.inFlight(wire.WithCaller(ctx, c))
	s.relayLog(nil, &mcp.LoggingMessageParams{Level: "info", Data: 0})
	<-c.entered
	for i := 1; i <= 5; i++ {
		s.relayLog(nil, &mcp.LoggingMessageParams{Level: "info", Data: i})
	}
	done()
	s.logs.mu.Lock()
	defer s.logs.mu.Unlock()
	if lq := s.logs.m[c.Client()]; lq == nil || lq.msgs != 0 || len(lq.items) != 0 {
		t.Errorf("after the request ended its client's queue holds %+v, want nothing", lq)
	}
}

// A client with two requests in flight on one session, that does not read
// while the server sends messages on both streams, holds one queued marker
// per request, however many markers the server's events bring: its queue
// is full, so the messages are dropped, and each stream's marker followed
// the other's, so none folded into the last. Before, every marker took a
// place of its own, past every bound (a hostile server grew tether without
// end while a client did not read).
func TestLogQueueHoldsOneMarkerPerRequest(t *testing.T) {
	q := &logQueues{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &gatedCaller{release: make(chan struct{}), entered: make(chan struct{}), ctx: ctx}
	msg := func(i int) *mcp.LoggingMessageParams { return &mcp.LoggingMessageParams{Level: "info", Data: i} }
	fl := &flight{caller: c, ctx: ctx}
	q.send(fl, msg(0), 1)
	<-c.entered
	for i := 1; i <= maxQueuedLogs; i++ {
		q.send(fl, msg(i), 1)
	}
	marks := []*orderMark{{client: c.Client()}, {client: c.Client()}}
	const events = 1000
	for n := range uint64(events) {
		for _, m := range marks {
			q.send(fl, msg(-1), 1) // past the bound: dropped
			q.reach(m, n+1)
		}
	}
	q.mu.Lock()
	items := len(q.m[c.Client()].items)
	q.mu.Unlock()
	if want := maxQueuedLogs + len(marks); items != want {
		t.Errorf("the queue holds %d items after %d markers of each of %d requests, want %d (its messages and one marker a request)", items, events, len(marks), want)
	}
	for _, m := range marks {
		m.want, m.sent, m.wake = events, events, make(chan struct{})
	}
	waits := []chan struct{}{marks[0].wake, marks[1].wake}
	close(c.release)
	for i, w := range waits {
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatalf("request %d's last marker was never reached", i)
		}
	}
	if got := c.got(); len(got) != maxQueuedLogs+1 {
		t.Errorf("wrote %d messages, want %d", len(got), maxQueuedLogs+1)
	}
}

// The end of a request (orderMark.done) drops its marker from its client's
// queue: nobody waits for it any more, and a client that does not read
// would otherwise hold one for each of its calls that ended.
func TestLogQueueForgetsTheMarkerOfAnEndedRequest(t *testing.T) {
	o := newOrder()
	o.logs = &logQueues{}
	q := o.logs
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &gatedCaller{release: make(chan struct{}), entered: make(chan struct{}), ctx: ctx}
	defer close(c.release)
	q.send(&flight{caller: c, ctx: ctx}, &mcp.LoggingMessageParams{Level: "info", Data: 0}, 1)
	<-c.entered
	for i := range 10 {
		m := &orderMark{o: o, id: o.ids.Add(1), client: c.Client()}
		m.nextParams() // registered with its first marker
		if !o.handled(fmt.Sprintf("%s.%d.1", o.nonce, m.id)) {
			t.Fatalf("marker of request %d not taken for the session's", i)
		}
		m.done()
	}
	q.mu.Lock()
	items := len(q.m[c.Client()].items)
	q.mu.Unlock()
	if items != 0 {
		t.Errorf("the queue holds %d items after 10 requests ended, want none", items)
	}
}

// A message relayed for a request that has just ended (relatedFlight found
// it before its end forgot its client's queue) is not queued: its stream
// is gone, and a client that does not read would hold it until its writer
// got to it.
func TestLogQueueTakesNothingForAnEndedRequest(t *testing.T) {
	q := &logQueues{}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := &gatedCaller{release: make(chan struct{}), entered: make(chan struct{}), ctx: ctx}
	defer close(c.release)
	q.send(&flight{caller: c, ctx: ctx}, &mcp.LoggingMessageParams{Level: "info", Data: 0}, 1)
	<-c.entered
	endedCtx, end := context.WithCancel(ctx)
	ended := &flight{caller: c, ctx: endedCtx}
	end()
	q.forget(ended)
	q.send(ended, &mcp.LoggingMessageParams{Level: "info", Data: 1}, 1)
	q.mu.Lock()
	lq := q.m[c.Client()]
	msgs, items := lq.msgs, len(lq.items)
	q.mu.Unlock()
	if msgs != 0 || items != 0 {
		t.Errorf("the queue holds %d messages (%d items) for a request that ended, want none", msgs, items)
	}
}

// askingCaller is a client that asked for debug messages and samples: its
// first message is taken only once release is closed; asked is closed when
// a question reaches it, and each write and question is recorded in order.
type askingCaller struct {
	fakeCaller
	entered chan struct{}
	release chan struct{}
	asked   chan struct{}
	ctx     context.Context
	once    sync.Once

	mu   sync.Mutex
	seen []string
}

func (c *askingCaller) LogLevel() mcp.LoggingLevel { return "debug" }

func (c *askingCaller) Log(p *mcp.LoggingMessageParams) {
	c.once.Do(func() {
		close(c.entered)
		select {
		case <-c.release:
		case <-c.ctx.Done():
		}
	})
	c.mu.Lock()
	c.seen = append(c.seen, fmt.Sprint(p.Data))
	c.mu.Unlock()
}

func (c *askingCaller) CreateMessage(context.Context, *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	c.mu.Lock()
	c.seen = append(c.seen, "question")
	c.mu.Unlock()
	close(c.asked)
	return &mcp.CreateMessageWithToolsResult{Model: "m"}, nil
}

// A server that sends a log message and then asks its client something
// (the go-sdk's handlers: the message is queued, the question relayed on)
// has them reach the client in that order: the question waits for the
// messages queued for its client before it (docs/reliability.md G12).
// Before, the question went while the message was still being written:
// a 2026-07-28 client's round ended with the question, and the message
// written after it reached no one.
func TestQuestionWaitsForItsClientsQueuedLogs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s := &Session{name: "conn", log: slog.New(slog.DiscardHandler), red: newRedactor(nil, nil)}
	waiting := make(chan struct{})
	var once sync.Once
	s.logs.flushing = func() { once.Do(func() { close(waiting) }) }
	c := &askingCaller{
		fakeCaller: fakeCaller{client: "A", caps: &mcp.ClientCapabilities{Sampling: &mcp.SamplingCapabilities{}}},
		entered:    make(chan struct{}), release: make(chan struct{}), asked: make(chan struct{}), ctx: ctx,
	}
	end := s.inFlight(wire.WithCaller(ctx, c))
	defer end()
	s.relayLog(nil, &mcp.LoggingMessageParams{Level: "info", Data: "m0"})
	<-c.entered
	answered := make(chan error, 1)
	go func() {
		_, err := s.relayRequest(ctx, nil, methodCreateMessage, nil)
		answered <- err
	}()
	select {
	case <-c.asked:
		t.Error("the question reached the client while the log message the server sent before it was still being written")
	case <-waiting:
	case <-ctx.Done():
		t.Fatal("the question neither went nor waited")
	}
	close(c.release)
	if err := <-answered; err != nil {
		t.Fatalf("relay: %v", err)
	}
	c.mu.Lock()
	got := fmt.Sprint(c.seen)
	c.mu.Unlock()
	if got != "[m0 question]" {
		t.Errorf("the client saw %s, want [m0 question]", got)
	}
}
