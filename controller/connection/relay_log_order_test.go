//go:build unix

package connection

//lint:file-ignore SA1019 relaying a server's log messages (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/spec"
)

// heldCaller is a downstream client that asked for debug messages and
// takes its first one only once hold is closed: it stands for a client
// (or a machine) slow to take the first message, while the server goes on
// to answer the request.
type heldCaller struct {
	fakeCaller
	hold <-chan struct{}
	ctx  context.Context // the test's bound

	mu   sync.Mutex
	logs []string
}

func (c *heldCaller) LogLevel() mcp.LoggingLevel { return "debug" }

func (c *heldCaller) Log(p *mcp.LoggingMessageParams) {
	select {
	case <-c.hold:
	case <-c.ctx.Done():
	}
	c.mu.Lock()
	c.logs = append(c.logs, fmt.Sprint(p.Data))
	c.mu.Unlock()
}

func (c *heldCaller) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.logs...)
}

// The log messages a server sends while it serves a request reach the
// request's client before the request's answer does, of either protocol
// era: the go-sdk client hands its handler a notification after its read
// loop has already retired the answer that followed it, and the gateway
// answered its client first, which then lost those messages (the
// conformance scenario tools-call-with-logging failed through the
// gateway, docs/reliability.md G12). The client here takes its first
// message only after the server has written its answer: the answer has
// reached tether by then, so the order is forced, not left to the
// scheduler.
func TestLogMessagesPrecedeTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stateless bool
	}{{"2026-07-28", true}, {"classic", false}} {
		t.Run(tc.name, func(t *testing.T) {
			srv := mcp.NewServer(&mcp.Implementation{Name: "logs", Version: "1"}, &mcp.ServerOptions{
				Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
			})
			mcp.AddTool(srv, &mcp.Tool{Name: "log3"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
				for i := range 3 {
					_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("m%d", i)})
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
			})
			h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: tc.stateless})
			answered := make(chan struct{})
			var once sync.Once
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				m, _ := rpcOf(r)
				h.ServeHTTP(w, r)
				if m == "tools/call" {
					once.Do(func() { close(answered) })
				}
			}))
			t.Cleanup(hs.Close)
			s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
			if got := s.Server().ProtocolVersion >= protocol2026; got != tc.stateless {
				t.Fatalf("negotiated %s", s.Server().ProtocolVersion)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := s.SetLogLevel(ctx, "debug"); err != nil {
				t.Fatalf("SetLogLevel: %v", err)
			}
			c := &heldCaller{fakeCaller: fakeCaller{client: "a"}, hold: answered, ctx: ctx}
			res, err := s.CallTool(wire.WithCaller(ctx, c), &mcp.CallToolParams{Name: "log3"}, nil)
			if err != nil {
				t.Fatalf("CallTool: %v", err)
			}
			if got := c.got(); strings.Join(got, ",") != "m0,m1,m2" {
				t.Errorf("when the answer (%v) came back, the client had the log messages %q, want m0, m1, m2", res.Content, got)
			}
		})
	}
}

// markedEvents puts a marker before each event of a stream that follows an
// event with data, whatever ends its lines and however the stream is cut
// into reads; a stream of CRs alone, which neither the go-sdk's nor
// tether's event reader reads as lines, gets none.
func TestMarkedEventsMarksEachEventAfterTheFirst(t *testing.T) {
	for _, eol := range []string{"\n", "\r\n", "\r"} {
		ev := func(data string) string { return "id: 1" + eol + "data: " + data + eol + eol }
		stream := ev("a") + ": comment" + eol + ev("b") + ev("c")
		for _, one := range []bool{false, true} {
			o := newOrder()
			m := &orderMark{o: o, id: 1}
			out := readMarked(t, m, stream, one)
			want := ev("a") + marker(o, 1) + ": comment" + eol + ev("b") + marker(o, 2) + ev("c")
			sent := 2
			if eol == "\r" {
				want, sent = stream, 0
			}
			if out != want {
				t.Errorf("eol %q, one byte at a time %v:\n got %q\nwant %q", eol, one, out, want)
			}
			if m.sent != uint64(sent) {
				t.Errorf("eol %q: %d markers counted, want %d", eol, m.sent, sent)
			}
		}
	}
}

// readMarked reads stream through markedEvents for m, one byte at a time
// when one is set.
func readMarked(t *testing.T, m *orderMark, stream string, one bool) string {
	t.Helper()
	var r io.Reader = strings.NewReader(stream)
	if one {
		r = iotest.OneByteReader(r)
	}
	out, err := io.ReadAll(&markedEvents{ReadCloser: io.NopCloser(r), m: m})
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return string(out)
}

// marker is the event of m's marker n of o, where m's id is 1.
func marker(o *order, n int) string {
	return fmt.Sprintf("data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"debug\",\"data\":null,\"_meta\":{%q:\"%s.1.%d\"}}}\n\n", metaKeyOrder, o.nonce, n)
}

// Events that carry no message (keepalive comments, an id alone) owe no
// marker: a server that sends thousands of them while it serves a call
// makes the go-sdk decode no marker for them.
func TestMarkedEventsSkipEventsWithoutData(t *testing.T) {
	ev := func(data string) string { return "data: " + data + "\n\n" }
	stream := ev("a") + strings.Repeat(": keepalive\n\nid: 7\n\n", 1000) + ev("b")
	o := newOrder()
	m := &orderMark{o: o, id: 1}
	out := readMarked(t, m, stream, false)
	if want := ev("a") + marker(o, 1) + strings.Repeat(": keepalive\n\nid: 7\n\n", 1000) + ev("b"); out != want {
		t.Errorf("got %d bytes (%d markers), want %d (one marker, after a)", len(out), m.sent, len(want))
	}
}

// A stream resumed after it broke (Last-Event-ID) is the same request's:
// when the broken one carried a message, the resumed one's first event
// gets a marker, or the answer there could overtake that message. The
// marker carries no id: an event without one leaves the last event id as
// it was, for the go-sdk's reader and tether's alike.
func TestMarkedEventsAcrossResumption(t *testing.T) {
	o := newOrder()
	m := &orderMark{o: o, id: 1}
	first := "id: 1\ndata: a\n\n"
	if out := readMarked(t, m, first, false); out != first {
		t.Errorf("the first stream: got %q, want it as sent", out)
	}
	resumed := "id: 2\ndata: b\n\n"
	if out, want := readMarked(t, m, resumed, false), marker(o, 1)+resumed; out != want {
		t.Errorf("the resumed stream:\n got %q\nwant %q", out, want)
	}
}

// A session keeps one entry per request that was sent markers, however
// many its stream carries, and none once the request ended: a server that
// sends a call thousands of messages the go-sdk has not handled yet does
// not grow tether's memory by one entry each.
func TestOrderKeepsOneEntryPerRequest(t *testing.T) {
	o := newOrder()
	m := &orderMark{o: o, id: 1}
	readMarked(t, m, strings.Repeat("data: {}\n\n", 10_000), false)
	o.mu.Lock()
	n := len(o.marks)
	o.mu.Unlock()
	if n != 1 || m.sent != 9_999 {
		t.Errorf("after 9,999 markers: %d entries (want 1), %d markers counted (want 9,999)", n, m.sent)
	}
	m.done()
	if len(o.marks) != 0 {
		t.Errorf("%d entries after the request ended, want 0", len(o.marks))
	}
}

// A marker counts only with the session's nonce: a server cannot forge one
// (its message is relayed as a log message). Its request's await returns
// once the last marker sent before the answer was handled.
func TestOrderMarkerNeedsTheNonce(t *testing.T) {
	o := newOrder()
	m := &orderMark{o: o, id: 1}
	m.nextParams()
	m.nextParams()
	if o.handled("other.1.2") {
		t.Errorf("a marker with another nonce counted")
	}
	if !o.handled(fmt.Sprintf("%s.1.1", o.nonce)) {
		t.Errorf("the session's marker did not count")
	}
	if m.handled != 1 {
		t.Fatalf("handled %d, want 1", m.handled)
	}
	done := make(chan struct{})
	go func() {
		m.await(context.Background())
		close(done)
	}()
	for !inAwait() {
		select {
		case <-done:
			t.Fatal("await returned before the last marker was handled")
		case <-time.After(time.Millisecond):
		}
	}
	o.handled(fmt.Sprintf("%s.1.2", o.nonce))
	select {
	case <-done:
	case <-time.After(relayDrain / 2):
		t.Errorf("await did not return when the last marker was handled")
	}
}

// A request's markers the go-sdk never handled (its stream broke) are
// forgotten when the request ends, and so is the stdio connection's wait
// for its answer.
func TestOrderMarksForgottenAtTheEnd(t *testing.T) {
	o := newOrder()
	id, _ := jsonrpc.MakeID(float64(7))
	conn := &orderedConn{marks: map[jsonrpc.ID]*orderMark{}}
	m := &orderMark{o: o, id: 1, conn: conn, rid: id}
	conn.marks[id] = m
	for range 3 {
		m.nextParams()
	}
	m.done()
	o.mu.Lock()
	n := len(o.marks)
	o.mu.Unlock()
	if n != 0 {
		t.Errorf("%d requests still have markers after the request ended, want 0", n)
	}
	if len(conn.marks) != 0 {
		t.Errorf("the stdio connection still awaits the answer of a request that ended: %v", conn.marks)
	}
	if !o.handled(fmt.Sprintf("%s.1.3", o.nonce)) {
		t.Errorf("a marker of a request that ended was not the session's: it would reach the client")
	}
}

// inAwait reports whether a goroutine waits for a request's markers.
func inAwait() bool {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Contains(string(buf[:n]), "(*orderMark).await")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// Over stdio and legacy SSE as well (the go-sdk's everything-server over
// stdio, whose test_tool_with_logging sends three messages and then its
// answer; a go-sdk SSE server whose answers come on its one event stream,
// not on the request's): the client takes its first message only once the
// call has returned (the order lost) or waits for its messages, so the
// order is forced.
func TestLogMessagesPrecedeTheAnswerOverStdioAndSSE(t *testing.T) {
	t.Run("stdio", func(t *testing.T) {
		s := connect(t, Request{Spec: stdioSpec(goEverything(t))})
		logsBeforeAnswer(t, s, "test_tool_with_logging")
	})
	t.Run("sse", func(t *testing.T) {
		srv := mcp.NewServer(&mcp.Implementation{Name: "logs", Version: "1"}, &mcp.ServerOptions{
			Capabilities: &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}, Tools: &mcp.ToolCapabilities{}},
		})
		mcp.AddTool(srv, &mcp.Tool{Name: "log3"}, func(ctx context.Context, req *mcp.CallToolRequest, _ any) (*mcp.CallToolResult, any, error) {
			for i := range 3 {
				_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "info", Data: fmt.Sprintf("m%d", i)})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}}, nil, nil
		})
		hs := httptest.NewServer(mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, nil))
		t.Cleanup(hs.Close)
		s := connect(t, Request{Spec: httpSpec(hs.URL, spec.TransportSSE)})
		logsBeforeAnswer(t, s, "log3")
	})
}

// logsBeforeAnswer calls tool, which sends three log messages and then its
// answer, for a client that takes its first message only once the call
// returned or waits for its messages; all three must have reached the
// client when the call returns.
func logsBeforeAnswer(t *testing.T, s *Session, tool string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.SetLogLevel(ctx, "debug"); err != nil {
		t.Fatalf("SetLogLevel: %v", err)
	}
	hold := make(chan struct{})
	c := &heldCaller{fakeCaller: fakeCaller{client: "a"}, hold: hold, ctx: ctx}
	var returned atomic.Bool
	var got []string
	done := make(chan error, 1)
	go func() {
		_, err := s.CallTool(wire.WithCaller(ctx, c), &mcp.CallToolParams{Name: tool}, nil)
		got = c.got()
		returned.Store(true)
		done <- err
	}()
	for !returned.Load() && !inAwait() {
		select {
		case <-ctx.Done():
			t.Fatal("the call neither returned nor waited for its log messages")
		case <-time.After(5 * time.Millisecond):
		}
	}
	close(hold)
	if err := <-done; err != nil {
		t.Fatalf("CallTool: %v", err)
	}
	if len(got) < 3 {
		t.Errorf("when the answer came back, the client had %d log messages (%q), want 3", len(got), got)
	}
}
