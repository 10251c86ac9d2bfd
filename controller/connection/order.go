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
// after the first, a marker event goes to the go-sdk; the go-sdk queues
// it behind what came before, and when its handler reaches the marker
// (swallowMarks) everything the server sent before that event has been
// handled. The request's answer waits for the last marker of its stream
// (await), bounded by relayDrain. A request whose stream carried one event
// (its answer alone, the usual case) gets no marker and waits for nothing.
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
// nonce and the marker's number, so that a server cannot forge one.
const metaKeyOrder = "io.tether/order"

// order is one session's markers: the nonce they carry and those not yet
// handled.
type order struct {
	nonce string

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]chan struct{} // closed when the go-sdk handled the marker
}

func newOrder() *order {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return &order{nonce: hex.EncodeToString(b[:]), pending: map[uint64]chan struct{}{}}
}

// next registers a marker and returns its number and the event to send.
func (o *order) next() (uint64, []byte) {
	seq, params := o.nextParams()
	return seq, fmt.Appendf(nil, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":%s}\n\n", params)
}

// nextParams registers a marker and returns its number and the params of
// its notifications/message.
func (o *order) nextParams() (uint64, json.RawMessage) {
	o.mu.Lock()
	o.seq++
	seq := o.seq
	o.pending[seq] = make(chan struct{})
	o.mu.Unlock()
	return seq, fmt.Appendf(nil, "{\"level\":\"debug\",\"data\":null,\"_meta\":{%q:\"%s.%d\"}}", metaKeyOrder, o.nonce, seq)
}

// handled marks the marker value v (from its _meta) handled; false when v
// is no marker of this session's.
func (o *order) handled(v string) bool {
	nonce, n, ok := strings.Cut(v, ".")
	if !ok || nonce != o.nonce {
		return false
	}
	seq, err := strconv.ParseUint(n, 10, 64)
	if err != nil {
		return false
	}
	o.mu.Lock()
	if ch, ok := o.pending[seq]; ok {
		close(ch)
		delete(o.pending, seq)
	}
	o.mu.Unlock()
	return true
}

// forget drops markers that will not be awaited any more.
func (o *order) forget(seqs []uint64) {
	o.mu.Lock()
	for _, seq := range seqs {
		delete(o.pending, seq)
	}
	o.mu.Unlock()
}

func (o *order) waiter(seq uint64) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pending[seq]
}

// orderMark is one request's markers (in its context for the HTTP
// round trips of its stream, or the stdio connection's Write).
type orderMark struct {
	o    *order
	mu   sync.Mutex
	seqs []uint64
	// conn and id: the stdio connection that awaits the request's answer
	// to put a marker before it (orderedConn).
	conn *orderedConn
	id   jsonrpc.ID
}

func (m *orderMark) add(seq uint64) {
	m.mu.Lock()
	m.seqs = append(m.seqs, seq)
	m.mu.Unlock()
}

type orderKey struct{}

// withOrder returns ctx carrying a mark for the request when it carries a
// downstream client that asked for log messages; the mark is nil
// otherwise (and its methods do nothing).
func (s *Session) withOrder(ctx context.Context) (context.Context, *orderMark) {
	if s.order == nil {
		return ctx, nil
	}
	if c := wire.CallerFrom(ctx); c == nil || c.LogLevel() == "" {
		return ctx, nil
	}
	m := &orderMark{o: s.order}
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
	seqs := m.seqs
	m.mu.Unlock()
	if len(seqs) == 0 {
		return
	}
	ch := m.o.waiter(seqs[len(seqs)-1])
	if ch == nil {
		return // handled
	}
	t := time.NewTimer(relayDrain)
	defer t.Stop()
	select {
	case <-ch:
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

// done forgets the request's markers the go-sdk has not handled (its
// stream broke, the request ended first): none is awaited any more.
func (m *orderMark) done() {
	if m == nil {
		return
	}
	m.mu.Lock()
	seqs := m.seqs
	m.seqs = nil
	conn, id := m.conn, m.id
	m.mu.Unlock()
	m.o.forget(seqs)
	if conn != nil {
		conn.forget(id)
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
	resp.Body = &markedEvents{ReadCloser: resp.Body, m: m, eol: true, ended: true}
	return resp
}

// markedEvents puts a marker event before each event of a stream after its
// first. Line ends are read as limitedBody reads them (CRLF, LF, CR).
type markedEvents struct {
	io.ReadCloser
	m      *orderMark
	events int    // events begun
	out    []byte // read from the stream, not yet returned
	err    error  // the stream's, once out is returned
	eol    bool   // the last byte ended a line
	cr     bool   // the last byte was CR
	ended  bool   // the last line was empty: the next line begins an event
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

// scan returns p with a marker before each event that begins in it, after
// the stream's first.
func (b *markedEvents) scan(p []byte) []byte {
	var out []byte
	start := 0
	for i, c := range p {
		switch c {
		case '\n':
			if b.cr {
				b.cr = false
				continue
			}
			b.endLine()
		case '\r':
			b.cr = true
			b.endLine()
		default:
			b.cr = false
			if b.ended {
				b.ended = false
				b.events++
				if b.events > 1 {
					seq, ev := b.m.o.next()
					b.m.add(seq)
					out = append(out, p[start:i]...)
					out = append(out, ev...)
					start = i
				}
			}
			b.eol = false
		}
	}
	if out == nil {
		return p
	}
	return append(out, p[start:]...)
}

func (b *markedEvents) endLine() {
	if b.eol {
		b.ended = true
	}
	b.eol = true
}

// orderedTransport is a stdio or legacy SSE transport whose connection
// keeps the order (orderedConn).
type orderedTransport struct {
	mcp.Transport
	o *order
}

func (t *orderedTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &orderedConn{Connection: c, o: t.o, marks: map[jsonrpc.ID]*orderMark{}}, nil
}

// orderedConn puts a marker notification before the answer to a request
// that carries a mark: the go-sdk queues it behind the notifications read
// before the answer.
type orderedConn struct {
	mcp.Connection
	o *order

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
			m.conn, m.id = c, r.ID
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
	seq, params := c.o.nextParams()
	m.add(seq)
	c.held = msg
	return &jsonrpc.Request{Method: "notifications/message", Params: params}, nil
}

// forget drops a request that will not be answered to its mark.
func (c *orderedConn) forget(id jsonrpc.ID) {
	c.mu.Lock()
	delete(c.marks, id)
	c.mu.Unlock()
}
