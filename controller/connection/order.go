package connection

//lint:file-ignore SA1019 keeping a server's log messages (deprecated as of 2026-07-28, live on every earlier protocol) ahead of their request's answer is what the gateway promises

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// This file keeps the log messages a server sends while it serves a
// request ahead of the request's answer (docs/reliability.md G12).
//
// The go-sdk's client hands a server's notification to its handler on a
// goroutine of its own, one notification after another, but retires the
// answer to a request from its read loop at once: an answer that follows a
// notifications/message on the request's stream can reach tether's caller
// before that message reaches the LoggingMessageHandler. The gateway then
// answered its client first, and the go-sdk's server dropped the message
// it was handed after that answer ("write to closed stream") or, with the
// request no longer in flight, it went to every client's standalone
// stream instead of the caller's. The go-sdk offers no hook on its read
// loop (wrapping its transport's Connection hides the unexported method
// its streamable transport needs), so the order is kept below it, on the
// HTTP response it reads: before each event of a request's event stream
// that follows a message, a marker event goes to the go-sdk; the go-sdk
// queues it behind what came before, and when its handler reaches the
// marker (swallowMarks) everything the server sent before that event has
// been handled. The handler only queues a log message for its client
// (logqueue.go), so a marker counts once its own client's messages queued
// before it were written: the answer waits for that client's messages and
// for no other client's. The session keeps one entry per marked request in
// flight and two counters in it, however many events a server sends. The
// request's answer waits for the last marker of its stream (await), bounded
// by relayDrain: a client that does not read delays its own answers, no
// one else's. A request whose stream carried one event (its answer alone,
// the usual case) gets no marker and waits for nothing.
//
// A stdio (or container) session reads no HTTP, and a legacy SSE
// session's answers come on its one event stream, which no request's
// context reads: there tether wraps the go-sdk's connection (orderedConn;
// the go-sdk's IOTransport and SSE connections need no unexported method
// on the client side), and puts a marker before the answer to a request
// that carries a mark.
//
// Only requests of a downstream client that asked for log messages carry
// markers (withOrder).

// metaKeyOrder names the marker's _meta key; its value is the session's
// nonce, the request's mark and the marker's number, so that a server
// cannot forge one.
const metaKeyOrder = "io.tether/order"

// order is one session's marks: the nonce their markers carry and the
// requests whose markers may still come back. What it holds is one entry
// per request in flight that was sent a marker, however many markers a
// stream carries.
type order struct {
	nonce string
	ids   atomic.Uint64
	// logs: a marker counts as handled once its client's messages queued
	// before it were written (logqueue.go); nil: at once.
	logs *logQueues

	mu    sync.Mutex
	marks map[uint64]*orderMark
}

func newOrder() *order {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &order{nonce: hex.EncodeToString(b[:]), marks: map[uint64]*orderMark{}}
}

// handled records the marker value v (from its _meta) handled; false when
// v is no marker of this session's. A marker of a request that ended is
// the session's too, and goes no further.
func (o *order) handled(v string) bool {
	nonce, rest, ok := strings.Cut(v, ".")
	if !ok || nonce != o.nonce {
		return false
	}
	idText, nText, ok := strings.Cut(rest, ".")
	id, err1 := strconv.ParseUint(idText, 10, 64)
	n, err2 := strconv.ParseUint(nText, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return false
	}
	o.mu.Lock()
	m := o.marks[id]
	o.mu.Unlock()
	switch {
	case m == nil:
	case o.logs != nil:
		o.logs.reach(m, n)
	default:
		m.reached(n)
	}
	return true
}

// orderMark is one request's markers (in its context for the HTTP
// round trips of its stream, or the stdio connection's Write): how many
// were sent, the latest the go-sdk handled.
type orderMark struct {
	o      *order
	id     uint64
	client any // the request's downstream client (wire.Caller.Client)

	mu      sync.Mutex
	sent    uint64        // markers put in the request's stream
	handled uint64        // the latest the go-sdk handled (they come in order)
	want    uint64        // the marker await waits for
	wake    chan struct{} // await's, closed once want is handled
	ended   bool          // done: no more waiting, nothing registered
	// owed: an event with data ended on the request's stream since its
	// last marker; kept across the stream's resumptions, so that the
	// first event of a stream resumed after one with messages gets one.
	owed atomic.Bool
	// conn and rid: the stdio connection that awaits the request's answer
	// to put a marker before it (orderedConn).
	conn *orderedConn
	rid  jsonrpc.ID
}

// nextParams counts one more marker of the request and returns the params
// of its notifications/message. The request is registered with its first.
func (m *orderMark) nextParams() json.RawMessage {
	m.mu.Lock()
	m.sent++
	n, register := m.sent, m.sent == 1 && !m.ended
	m.mu.Unlock()
	if register {
		m.o.mu.Lock()
		m.o.marks[m.id] = m
		m.o.mu.Unlock()
	}
	return fmt.Appendf(nil, "{\"level\":\"debug\",\"data\":null,\"_meta\":{%q:\"%s.%d.%d\"}}", metaKeyOrder, m.o.nonce, m.id, n)
}

// next counts one more marker and returns its event.
func (m *orderMark) next() []byte {
	return fmt.Appendf(nil, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":%s}\n\n", m.nextParams())
}

// reached records marker n handled.
func (m *orderMark) reached(n uint64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.handled = max(m.handled, n)
	if m.wake != nil && m.handled >= m.want {
		close(m.wake)
		m.wake = nil
	}
}

type orderKey struct{}

// withOrder returns ctx carrying a mark for the request when it carries a
// downstream client that asked for log messages; the mark is nil
// otherwise (and its methods do nothing).
func (s *Session) withOrder(ctx context.Context) (context.Context, *orderMark) {
	if s.order == nil {
		return ctx, nil
	}
	c := wire.CallerFrom(ctx)
	if c == nil || c.LogLevel() == "" {
		return ctx, nil
	}
	m := &orderMark{o: s.order, id: s.order.ids.Add(1), client: c.Client()}
	return context.WithValue(ctx, orderKey{}, m), m
}

// await waits until the go-sdk handled what the server sent on the
// request's stream before its answer (the last marker), for at most
// relayDrain: a downstream client that does not read its log messages
// holds the handler, and must not hold the answer for long. ctx is the
// request's (it ends with the session too).
func (m *orderMark) await(ctx context.Context) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.handled >= m.sent {
		m.mu.Unlock()
		return
	}
	m.want = m.sent
	wake := make(chan struct{})
	m.wake = wake
	m.mu.Unlock()
	t := time.NewTimer(relayDrain)
	defer t.Stop()
	select {
	case <-wake:
	case <-ctx.Done():
	case <-t.C:
	}
}

// answeredByServer reports whether err (of a request through the go-sdk)
// is the server's answer: a result, or a JSON-RPC error.
func answeredByServer(err error) bool {
	var je *jsonrpc.Error
	return err == nil || errors.As(err, &je)
}

// done forgets the request (its stream broke, or the request ended): none
// of its markers is awaited any more.
func (m *orderMark) done() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.ended = true
	conn, rid := m.conn, m.rid
	m.mu.Unlock()
	m.o.mu.Lock()
	delete(m.o.marks, m.id)
	m.o.mu.Unlock()
	if m.o.logs != nil {
		m.o.logs.forgetMark(m)
	}
	if conn != nil {
		conn.forget(rid)
	}
}

// swallowMarks is a receiving middleware of the session's client: a marker
// is handled here and goes no further.
func (s *Session) swallowMarks(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/message" && s.order != nil {
			if p, ok := req.GetParams().(*mcp.LoggingMessageParams); ok && p != nil {
				if v, ok := p.Meta[metaKeyOrder].(string); ok && s.order.handled(v) {
					return nil, nil
				}
			}
		}
		return next(ctx, method, req)
	}
}

// markEvents wraps the body of resp when its request carries a mark and
// resp is an event stream.
func markEvents(req *http.Request, resp *http.Response) *http.Response {
	if resp == nil || resp.Body == nil {
		return resp
	}
	m, _ := req.Context().Value(orderKey{}).(*orderMark)
	if m == nil {
		return resp
	}
	if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "text/event-stream" {
		return resp
	}
	resp.Body = &markedEvents{ReadCloser: resp.Body, m: m}
	return resp
}

// markedEvents puts a marker event before each event of a stream that
// follows an event with data (a message): before the answer of a stream
// that carried messages before it, never before its first event, and not
// after a keepalive comment or an event of an id alone, which carry no
// message. Lines are read as the go-sdk's and tether's event readers read
// them: a line ends at LF, and one of CRs alone is empty.
type markedEvents struct {
	io.ReadCloser
	m   *orderMark
	out []byte // read from the stream, not yet returned
	err error  // the stream's, once out is returned

	pos     int  // bytes of the current line read, up to len("data")
	crs     bool // the current line holds only CRs so far
	data    bool // the current line begins with what it has of "data"
	inEvent bool // a line of an event was read since the last empty line
	hasData bool // the event in progress has a data line
}

func (b *markedEvents) Read(p []byte) (int, error) {
	if len(b.out) > 0 {
		n := copy(p, b.out)
		b.out = b.out[n:]
		return n, nil
	}
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	out := b.scan(p[:n])
	if len(out) == n {
		return n, err // nothing added: the bytes are in place
	}
	k := copy(p, out)
	b.out = out[k:]
	if len(b.out) == 0 {
		return k, err
	}
	b.err = err // after what is left
	return k, nil
}

// scan returns p with a marker before each line that begins an event owed
// one.
func (b *markedEvents) scan(p []byte) []byte {
	var out []byte
	start := 0
	for i, c := range p {
		if c == '\n' {
			if b.pos == 0 || b.crs {
				// An empty line ends the event.
				if b.hasData {
					b.m.owed.Store(true)
				}
				b.inEvent, b.hasData = false, false
			} else {
				b.inEvent = true
				b.hasData = b.hasData || (b.data && b.pos == len("data"))
			}
			b.pos, b.crs, b.data = 0, false, false
			continue
		}
		if b.pos == 0 && !b.crs {
			// A line begins.
			if !b.inEvent && b.m.owed.CompareAndSwap(true, false) {
				out = append(out, p[start:i]...)
				out = append(out, b.m.next()...)
				start = i
			}
			b.crs, b.data = true, true
		}
		if c != '\r' {
			b.crs = false
		}
		if b.pos < len("data") {
			b.data = b.data && c == "data"[b.pos]
			b.pos++
		}
	}
	if out == nil {
		return p
	}
	return append(out, p[start:]...)
}

// orderedTransport is a stdio or legacy SSE transport whose connection
// keeps the order (orderedConn).
type orderedTransport struct {
	mcp.Transport
}

func (t *orderedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &orderedConn{Connection: c, marks: map[jsonrpc.ID]*orderMark{}}, nil
}

// orderedConn puts a marker notification before the answer to a request
// that carries a mark: the go-sdk queues it behind the notifications read
// before the answer.
type orderedConn struct {
	mcp.Connection

	mu    sync.Mutex
	marks map[jsonrpc.ID]*orderMark // requests written, not yet answered

	held jsonrpc.Message // an answer whose marker Read returned (the read loop's alone)
}

func (c *orderedConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if m, _ := ctx.Value(orderKey{}).(*orderMark); m != nil {
		if r, ok := msg.(*jsonrpc.Request); ok && r.IsCall() {
			c.mu.Lock()
			c.marks[r.ID] = m
			c.mu.Unlock()
			m.mu.Lock()
			m.conn, m.rid = c, r.ID
			m.mu.Unlock()
		}
	}
	return c.Connection.Write(ctx, msg)
}

func (c *orderedConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if msg := c.held; msg != nil {
		c.held = nil
		return msg, nil
	}
	msg, err := c.Connection.Read(ctx)
	r, ok := msg.(*jsonrpc.Response)
	if err != nil || !ok {
		return msg, err
	}
	c.mu.Lock()
	m := c.marks[r.ID]
	delete(c.marks, r.ID)
	c.mu.Unlock()
	if m == nil {
		return msg, nil
	}
	c.held = msg
	return &jsonrpc.Request{Method: "notifications/message", Params: m.nextParams()}, nil
}

// forget drops a request that will not be answered to its mark.
func (c *orderedConn) forget(id jsonrpc.ID) {
	c.mu.Lock()
	delete(c.marks, id)
	c.mu.Unlock()
}
