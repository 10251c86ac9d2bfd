package connection

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// This file is tether's own mcp.Transport for a streamable HTTP session of a
// classic protocol (before 2026-07-28): the go-sdk's ClientSession keeps the
// session (ids, calls, handlers) and runs on it; tether does the HTTP
// framing. The go-sdk's StreamableClientTransport does the same work, but
// it decodes the params of every request it writes (to find a 2026-07-28
// _meta.protocolVersion) and every message it reads through a decoder that
// allocates 32 KiB each time: at 1,000 connections starting at once that
// was almost half of what tether allocated, and the start was CPU-bound on
// the garbage. It also holds a goroutine per call answer and a 4 KiB reader
// per standalone stream, and its ClientSession has no hook for the end of
// the connection, so tether watched each session on a goroutine of its own
// (watchHTTP). Here the session ends from Close, which the go-sdk calls when
// a Read or Write fails (mcp.Connection's contract), a call's answer is read
// on the goroutine that writes the call, and a message is decoded as far as
// its envelope only. The raw path (raw.go) frames its requests with the
// same pieces: mcpRequest, responseError, eventStream.
//
// Every streamable session without OAuth starts here, the first connect to
// an endpoint included (Connector.Connect): the go-sdk's first connect asks
// server/discover at 2026-07-28 (SEP-2575) and falls back to initialize on
// the same connection when the server refuses it. Write carries discover as
// the go-sdk's transport does (the version of its _meta in
// Mcp-Protocol-Version, Mcp-Method beside it; its event stream resumed at
// that version too; a refusal in any form, a plain-text 400 or 404, a 405,
// a JSON-RPC error, wraps errRejected, so the fallback finds the
// connection up). A classic server's session stays
// here. A server whose discover answer offers 2026-07-28 ends the
// connection with errModernServer instead, the answer unread by the
// go-sdk: tether does not frame that protocol (its per-request headers,
// subscriptions/listen), and Connect runs the connect again on the go-sdk's
// transport, which costs that first connect one more round trip.
//
// What it does, as the go-sdk's streamableClientConn (mcp/streamable.go,
// v1.8.0) does, so that the session behaves the same on either:
//   - Write POSTs the message (Content-Type and Accept as the spec asks),
//     with Mcp-Session-Id once the server gave one and Mcp-Protocol-Version
//     once initialize was answered (discover: see above); a call's answer
//     (JSON, or an event stream that ends with it) is read and its
//     messages queued for Read; a stream that ends before the answer is
//     resumed with Last-Event-ID.
//   - With notifications/initialized (the go-sdk: just before it), the
//     standalone GET stream is opened (405, another 4xx or an answer that
//     is no event stream: the server has none), read for as long as the
//     session lives and opened again with Last-Event-ID when it breaks.
//   - Errors read as the go-sdk's: a request refused for itself (a 429 or
//     5xx, a JSON-RPC error body, a request that could not be sent) wraps
//     errRejected, which leaves the session up (a JSON-RPC error wrapped
//     first, so that errors.As finds the server's code, not -32005);
//     anything else breaks the connection (404 of a known session:
//     mcp.ErrSessionMissing).
//   - Close sends DELETE for the session (bounded by closeDeleteTimeout),
//     ends the streams and unblocks Read.

// errRejected is the go-sdk's jsonrpc2.ErrRejected, which its jsonrpc2
// connection reads as "this request failed, the connection did not": a
// Write error that does not wrap it breaks the session. The package is
// internal; jsonrpc.Error matches by code (WireError.Is), so an error of
// the same code is the same error to it (TestStreamableRejectedKeepsSession
// fails if a go-sdk upgrade changes that).
var errRejected = &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}

// methodDiscover is the go-sdk's first request to a server it does not
// know (SEP-2575); hdrMethod, the standard header it sends with it.
const (
	methodDiscover = "server/discover"
	hdrMethod      = "Mcp-Method"
)

// errModernServer ends a connection whose server accepted server/discover:
// a 2026-07-28 server. Tether's transport carries classic sessions only
// (no per-request headers beyond discover's, no subscriptions/listen), so
// the connect runs again on the go-sdk's transport (Connector.Connect).
var errModernServer = errors.New("the server accepted server/discover (2026-07-28): its session runs on the go-sdk's transport")

// The go-sdk client's reconnection rule for event streams, which it does
// not export: MaxRetries attempts without progress (its default), a delay
// growing by reconnectGrowFactor from reconnectInitialDelay, capped, with
// full jitter; a server's retry field sets the first delay.
const (
	streamMaxRetries      = 5
	reconnectGrowFactor   = 1.5
	reconnectInitialDelay = time.Second
	reconnectMaxDelay     = 30 * time.Second
	// closeDeleteTimeout bounds Close's DELETE, as the go-sdk bounds it.
	closeDeleteTimeout = 5 * time.Second
	// standaloneBuffer is the read buffer of a standalone stream, held for
	// the session's life: its events are small notifications; a longer
	// line grows the line buffer (within the message limit), not this.
	standaloneBuffer = 512
)

// reconnectDelay is the go-sdk's calculateReconnectDelay.
func reconnectDelay(attempt int) time.Duration {
	if attempt == 0 {
		return 0
	}
	d := time.Duration(float64(reconnectInitialDelay) * math.Pow(reconnectGrowFactor, float64(attempt-1)))
	d = min(d, reconnectMaxDelay)
	return d + rand.N(d)
}

// streamableTransport opens one streamableConn: the session's HTTP client
// (manifest headers, the message limit, delivery records; http.go) and
// endpoint. onClose is told, once, that the connection closed and why
// (nil: the session closed it); it must not block, since the go-sdk calls
// Close under its connection's lock.
type streamableTransport struct {
	client  *http.Client
	url     string
	onClose func(cause error)
	// deletes, when set, is where the DELETE of a connection closed while
	// handshaking is true runs, on a goroutine of its own: the go-sdk
	// closes a connection whose connect failed (a 2026-07-28 server that
	// accepted server/discover and gave a session id with it, an
	// initialize that failed after the server gave one) inside that
	// connect, which holds one of its endpoint's handshake slots; a server
	// that stalls its DELETE would hold the slot for closeDeleteTimeout.
	// The session waits for deletes when it ends (Session.Close,
	// failConnect). nil: Close sends DELETE before it returns.
	deletes     *sync.WaitGroup
	handshaking atomic.Bool
	// wait waits before resuming a stream whose server asked for retry
	// (Session.waitToResume); nil: sleepCtx for resumeDelay(retry).
	wait func(ctx context.Context, retry time.Duration) error

	conn *streamableConn // the last connection Connect opened
}

func (t *streamableTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	// The streams live as long as the session, not as the connect's ctx.
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	t.conn = &streamableConn{
		tr:       t,
		client:   t.client,
		url:      t.url,
		onClose:  t.onClose,
		ctx:      life,
		cancel:   cancel,
		incoming: make(chan jsonrpc.Message, 10),
		done:     make(chan struct{}),
		failed:   make(chan struct{}),
	}
	return t.conn, nil
}

// modernServer reports whether the connection t opened ended because its
// server accepted server/discover; false for a nil t. The session's
// Connect calls it after the go-sdk's Connect returned, on the goroutine
// that called Connect.
func (t *streamableTransport) modernServer() bool {
	return t != nil && t.conn != nil && t.conn.modernServer()
}

type streamableConn struct {
	tr      *streamableTransport
	client  *http.Client
	url     string
	onClose func(error)

	ctx      context.Context // the connection's life; Close cancels it
	cancel   context.CancelFunc
	incoming chan jsonrpc.Message
	done     chan struct{} // closed by Close

	failOnce sync.Once
	failure  error
	failed   chan struct{} // closed once failure is set

	mu        sync.Mutex
	sessionID string
	version   string     // from the initialize answer; "" before it
	initID    jsonrpc.ID // the initialize request's id, while it is asked
	// discoverID is the server/discover request's id, while it is asked
	// (see errModernServer).
	discoverID jsonrpc.ID

	standalone sync.WaitGroup // the standalone stream's goroutine
	opened     bool           // the standalone stream was started (under mu)
	// reading holds, by the call's id, the calls whose answer Write waits
	// for: a server that sends the response on another stream (which the
	// spec forbids, and the go-sdk takes) and keeps the call's stream open
	// must not hold the call.
	reading map[jsonrpc.ID]*answerRead

	closeOnce sync.Once
	closeErr  error
}

// answerRead is one call whose answer Write waits for (under mu).
type answerRead struct {
	stop     context.CancelFunc // ends the reading of the call's stream
	answered bool               // the response came on another stream
}

// fail breaks the connection: pending and later Reads return err.
func (c *streamableConn) fail(err error) {
	c.failOnce.Do(func() {
		c.failure = err
		close(c.failed)
	})
}

func (c *streamableConn) err() error {
	select {
	case <-c.failed:
		return c.failure
	default:
		return nil
	}
}

func (c *streamableConn) SessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessionID
}

func (c *streamableConn) target() (version, sessionID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.version, c.sessionID
}

func (c *streamableConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	if err := c.err(); err != nil {
		return nil, err
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-c.failed:
		return nil, c.err()
	case <-c.done:
		return nil, io.EOF
	case msg := <-c.incoming:
		return msg, nil
	}
}

// queue hands msg to Read; false once the connection closed.
func (c *streamableConn) queue(ctx context.Context, msg jsonrpc.Message) bool {
	select {
	case c.incoming <- msg:
		return true
	case <-c.done:
		return false
	case <-ctx.Done():
		return false
	}
}

// Write sends msg and, for a call, reads the server's answer to it before
// it returns: the messages of that answer (the server's notifications and
// requests first, the response last) are queued for Read in order.
func (c *streamableConn) Write(ctx context.Context, msg jsonrpc.Message) (err error) {
	if err := c.err(); err != nil {
		return err
	}
	defer func() {
		if err != nil && !errors.Is(err, errRejected) {
			// The go-sdk breaks the connection for it and closes it: the
			// session ends with this error, not a bare "closed" (Close
			// tells onClose what failed).
			c.fail(err)
		}
	}()
	var call *jsonrpc.Request
	method := ""
	switch m := msg.(type) {
	case *jsonrpc.Request:
		method = m.Method
		if m.IsCall() {
			call = m
		}
	case *jsonrpc.Response:
	default:
		return fmt.Errorf("unexpected message type %T", msg)
	}
	summary := func() string {
		if method != "" {
			return fmt.Sprintf("sending %q", method)
		}
		return fmt.Sprintf("sending jsonrpc response #%v", msg.(*jsonrpc.Response).ID.Raw())
	}
	data, err := jsonrpc.EncodeMessage(msg)
	if err != nil {
		return fmt.Errorf("%s: %v", summary(), err)
	}
	discover := call != nil && method == methodDiscover
	if method == "initialize" && call != nil {
		c.mu.Lock()
		c.initID = call.ID
		// The go-sdk fell back from discover, if it asked: a late answer
		// to it is a stray response, not a 2026-07-28 server (it would
		// fail the session's connection with errModernServer, which
		// connClosed leaves to Connect).
		c.discoverID = jsonrpc.ID{}
		c.mu.Unlock()
	}
	if discover {
		c.mu.Lock()
		c.discoverID = call.ID
		c.mu.Unlock()
	}
	// The go-sdk opens the standalone stream before it sends
	// notifications/initialized (once initialize was answered): a server
	// notification sent as soon as the session is up then has a stream to
	// go on. Here the two requests go out together.
	var standaloneReady <-chan struct{}
	if method == "notifications/initialized" {
		standaloneReady = c.openStandalone()
	}
	// Close ends what Write reads too (the go-sdk bounds a call's stream
	// by the call's ctx alone, and the session's end cancels that), and so
	// does the call's response when it comes on another stream (learn).
	caller := ctx
	ctx, cancel := context.WithCancel(context.WithoutCancel(caller))
	stopCaller := context.AfterFunc(caller, cancel)
	stopLife := context.AfterFunc(c.ctx, cancel)
	var rest *http.Response // a call's stream, drained after Write returns
	defer func() {
		if rest == nil || !stopCaller() {
			if rest != nil {
				rest.Body.Close()
			}
			stopLife()
			cancel()
			return
		}
		// The rest of the stream is drained (so that its connection goes
		// back to the pool) while the call goes on, whatever becomes of
		// the caller's ctx: the go-sdk reads a call's answer on a
		// goroutine of its own and returns once it has it; waiting here
		// for the end of the server's stream held every call, and so
		// every connect's handshake and lists, for that time
		// (TestStreamableCallReturnsBeforeItsStreamEnds).
		go func() {
			drain(rest)
			stopLife()
			cancel()
		}()
	}()
	var waiting *answerRead
	if call != nil {
		// Before the POST: the response may come on another stream as
		// soon as the server has the call.
		waiting = &answerRead{stop: cancel}
		c.mu.Lock()
		if c.reading == nil {
			c.reading = make(map[jsonrpc.ID]*answerRead)
		}
		c.reading[call.ID] = waiting
		c.mu.Unlock()
		defer func() {
			c.mu.Lock()
			delete(c.reading, call.ID)
			c.mu.Unlock()
		}()
	}
	version, sessionID := c.target()
	if discover {
		// The go-sdk's transport sends discover at the version in its
		// _meta (setMCPHeaders), with the standard headers of that
		// version (setStandardHeaders): Mcp-Method; discover has no
		// Mcp-Name.
		version = metaProtocolVersion(call.Params)
	}
	req, err := mcpRequest(ctx, http.MethodPost, c.url, data, version, sessionID)
	if err != nil {
		return fmt.Errorf("%s: %w", summary(), err)
	}
	if discover && version >= protocol2026 {
		req.Header.Set(hdrMethod, method)
	}
	resp, err := c.client.Do(req)
	if err != nil {
		if waiting != nil && c.answeredElsewhere(waiting) {
			return nil
		}
		// The request did not reach the server: the call fails, the
		// session does not.
		return fmt.Errorf("%s: %w: %w", summary(), errRejected, err)
	}
	if transient, err := responseError(summary(), sessionID, resp, false); err != nil {
		var werr *jsonrpc.Error
		switch {
		case transient && errors.As(err, &werr):
			// The server's error first, as the go-sdk wraps it: its
			// discover reads the code (an unsupported version, with the
			// versions the server has) with errors.As.
			return fmt.Errorf("%w: %w", err, errRejected)
		case transient:
			return fmt.Errorf("%w: %w", errRejected, err)
		case discover:
			// A classic server refuses discover in its own way (400 or
			// 404 in plain text, 405): the go-sdk falls back to
			// initialize on the same connection, which must stay up.
			return fmt.Errorf("%w: %w", err, errRejected)
		}
		c.fail(err)
		return err
	}
	if id := resp.Header.Get(hdrSessionID); id != "" {
		c.mu.Lock()
		had := c.sessionID
		if had == "" {
			c.sessionID = id
		}
		c.mu.Unlock()
		if had != "" && had != id {
			resp.Body.Close()
			return fmt.Errorf("mismatching session IDs %q and %q", had, id)
		}
	}
	if call == nil {
		// A notification or a response: the server answers 202, no body.
		drain(resp)
		if standaloneReady != nil {
			select {
			case <-standaloneReady:
			case <-ctx.Done():
			}
		}
		return nil
	}
	if c.answeredElsewhere(waiting) {
		resp.Body.Close()
		return nil
	}
	rest = c.readAnswer(ctx, summary(), resp, call)
	return nil
}

func (c *streamableConn) answeredElsewhere(a *answerRead) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return a.answered
}

// drainWait bounds how long drain waits for the end of a body: a server
// that keeps a call's stream open after the call's response (the spec
// says it SHOULD close it) must not hold the call that has its answer.
const drainWait = 200 * time.Millisecond

// drain reads what is left of a body (at most 64 KiB, for at most
// drainWait) and closes it, so that its connection goes back to the pool
// when the body ended in time; else the connection is closed. A body whose
// connection closes after it (an event stream on a connection of its own,
// streams.go, or a server's "Connection: close") is closed at once: no
// pool would take the connection back.
func drain(resp *http.Response) {
	if resp.Close {
		resp.Body.Close()
		return
	}
	t := time.AfterFunc(drainWait, func() { resp.Body.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	t.Stop()
	resp.Body.Close()
}

// readAnswer reads the answer to call: one JSON message, or an event
// stream, resumed until it brings the response. rest is the stream that
// brought it, for the caller to drain; nil when nothing is left to read.
func (c *streamableConn) readAnswer(ctx context.Context, summary string, resp *http.Response, call *jsonrpc.Request) (rest *http.Response) {
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json":
		// The session's HTTP client bounds the body (messageLimit.wrap).
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			if ctx.Err() != nil {
				// The caller gave up, or the answer came elsewhere: the
				// session is fine (the go-sdk would break it).
				return
			}
			c.fail(fmt.Errorf("%s: failed to read body: %w", summary, err))
			return
		}
		msg, err := decodeMessage(body)
		if err != nil {
			c.fail(fmt.Errorf("%s: failed to decode response: %w", summary, err))
			return
		}
		if c.learn(msg, call) {
			c.queue(ctx, msg)
		}
	case "text/event-stream":
		return c.follow(ctx, summary, resp, call)
	default:
		resp.Body.Close()
		// The request went out: its answer is this error.
		c.queue(ctx, &jsonrpc.Response{ID: call.ID, Error: fmt.Errorf("%s: unsupported content type %q", summary, mediaType)})
	}
	return nil
}

// learn takes the protocol version from the answer to initialize: every
// later request carries it. A response that came on another stream than
// its call's ends the reading of the call's stream. A server that accepts
// server/discover fails the connection with errModernServer, and the
// answer is not for Read: false.
func (c *streamableConn) learn(msg jsonrpc.Message, call *jsonrpc.Request) (keep bool) {
	r, ok := msg.(*jsonrpc.Response)
	if !ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.reading[r.ID]; a != nil && (call == nil || call.ID != r.ID) {
		a.answered = true
		a.stop()
	}
	if c.discoverID.IsValid() && r.ID == c.discoverID {
		c.discoverID = jsonrpc.ID{}
		if r.Error == nil && offersModern(r.Result) {
			c.fail(errModernServer)
			return false
		}
		return true
	}
	if !c.initID.IsValid() || r.ID != c.initID {
		return true
	}
	c.initID = jsonrpc.ID{}
	if r.Error != nil {
		return true
	}
	var res map[string]json.RawMessage
	var v string
	if json.Unmarshal(r.Result, &res) == nil && json.Unmarshal(res["protocolVersion"], &v) == nil {
		c.version = v
	}
	return true
}

// modernServer reports whether the connection ended because its server
// accepted server/discover (errModernServer).
func (c *streamableConn) modernServer() bool {
	return errors.Is(c.err(), errModernServer)
}

// offersModern reports whether a server/discover result lets the go-sdk
// negotiate 2026-07-28 or later: one of its supportedVersions is one the
// go-sdk speaks (its discover picks the one asked for, else the newest
// both have, and falls back to initialize below 2026-07-28). A stateful
// go-sdk server answers discover with its classic versions only; the
// go-sdk then falls back to initialize, here on tether's transport.
func offersModern(result json.RawMessage) bool {
	var res struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(result, &res) != nil {
		return false // the go-sdk fails to decode it too, and falls back
	}
	for _, v := range res.SupportedVersions {
		if v >= protocol2026 && slices.Contains(mcp.SupportedProtocolVersions(), v) {
			return true
		}
	}
	return false
}

// metaProtocolVersion is params' _meta.protocolVersion, "" when it has none:
// the version the go-sdk asks server/discover at.
func metaProtocolVersion(params json.RawMessage) string {
	var p struct {
		Meta map[string]json.RawMessage `json:"_meta"`
	}
	var v string
	if json.Unmarshal(params, &p) != nil || json.Unmarshal(p.Meta[mcp.MetaKeyProtocolVersion], &v) != nil {
		return ""
	}
	return v
}

// follow reads an event stream until it brings what it is for: the
// response to call, or, for the standalone stream (call nil), until the
// connection closes. A stream that ends early is opened again with
// Last-Event-ID by the go-sdk's rule, no sooner than resumeFloor (a
// server's retry: 1 is no licence to storm; resume.go): a call's stream that numbered no
// events cannot be resumed (the call fails: "request terminated without
// response"); more than streamMaxRetries reconnections in a row that bring
// nothing new break the connection. rest is the stream that brought the
// call's response, left for the caller to drain.
func (c *streamableConn) follow(ctx context.Context, summary string, resp *http.Response, call *jsonrpc.Request) (rest *http.Response) {
	var prev string
	retries := 0
	buf := standaloneBuffer
	if call != nil {
		buf = 4096
	}
	// A discover's stream is resumed at the version it was asked at, as
	// the go-sdk's transport does (its call's ctx carries that version).
	version := ""
	if call != nil && call.Method == methodDiscover {
		version = metaProtocolVersion(call.Params)
	}
	for {
		lastID, retry, finished, answered := c.readStream(ctx, summary, resp, call, buf)
		if answered {
			return resp
		}
		if finished {
			return nil
		}
		if lastID == "" && call != nil {
			c.queue(ctx, &jsonrpc.Response{ID: call.ID, Error: errors.New("request terminated without response")})
			return nil
		}
		if lastID != "" && lastID != prev {
			retries, prev = 0, lastID
		} else if retries++; retries > streamMaxRetries {
			if ctx.Err() == nil {
				c.fail(fmt.Errorf("%s: exceeded %d retries without progress (session ID: %v)", summary, streamMaxRetries, c.SessionID()))
			}
			return nil
		}
		next, err := c.resume(ctx, lastID, retry, version)
		if err != nil {
			if ctx.Err() == nil {
				c.fail(fmt.Errorf("%s: failed to reconnect (session ID: %v): %w", summary, c.SessionID(), err))
			}
			return nil
		}
		_, sessionID := c.target()
		if _, err := responseError(summary, sessionID, next, false); err != nil {
			c.fail(err)
			return nil
		}
		resp = next
	}
}

// readStream reads one response body of an event stream, queueing its
// messages. finished: nothing more to read (the call's response came, the
// connection closed or broke, ctx ended); else the stream ended, and
// lastID and delay say how to resume it. answered: the call's response
// came, and the rest of the body is the caller's to drain; else the body
// is drained and closed.
func (c *streamableConn) readStream(ctx context.Context, summary string, resp *http.Response, call *jsonrpc.Request, buf int) (lastID string, delay time.Duration, finished, answered bool) {
	defer func() {
		if !answered {
			drain(resp)
		}
	}()
	es := newEventStream(resp.Body, buf)
	defer es.release()
	for {
		data, err := es.next()
		if err != nil {
			var tooLarge *MessageTooLargeError
			switch {
			case ctx.Err() != nil:
				return "", 0, true, false
			case errors.As(err, &tooLarge):
				c.fail(fmt.Errorf("%s: %w", summary, err))
				return "", 0, true, false
			}
			// The stream ended or broke (an incomplete last event is
			// dropped, as the go-sdk does).
			return es.lastID, es.retry, false, false
		}
		msg, err := decodeMessage(data)
		if err != nil {
			c.fail(fmt.Errorf("%s: failed to decode event: %w", summary, err))
			return "", 0, true, false
		}
		if !c.learn(msg, call) || !c.queue(ctx, msg) {
			return "", 0, true, false
		}
		if r, ok := msg.(*jsonrpc.Response); ok && call != nil && r.ID == call.ID {
			return "", 0, true, true
		}
	}
}

// resume waits as resumeDelay says (the server's retry within bounds, or
// the go-sdk's backoff), then reconnects the stream that ended at lastID.
func (c *streamableConn) resume(ctx context.Context, lastID string, retry time.Duration, version string) (*http.Response, error) {
	var err error
	if c.tr != nil && c.tr.wait != nil {
		err = c.tr.wait(ctx, retry)
	} else {
		err = sleepCtx(ctx, resumeDelay(retry))
	}
	if err != nil {
		return nil, err
	}
	return c.reconnect(ctx, lastID, false, version)
}

// reconnect GETs the event stream again (the standalone one when lastID is
// ""), trying up to streamMaxRetries times while the request cannot be
// sent. The first attempt goes at once (a resumption waited before it:
// resume); later ones by the go-sdk's backoff. version is the
// Mcp-Protocol-Version to send, "" for the session's.
func (c *streamableConn) reconnect(ctx context.Context, lastID string, initial bool, version string) (*http.Response, error) {
	attempt, delay := 1, time.Duration(0)
	if initial {
		attempt = 0
	}
	var last error
	for ; attempt <= streamMaxRetries; attempt++ {
		// Close ends ctx (c.ctx, or a call's, which it cancels).
		if err := sleepCtx(ctx, delay); err != nil {
			return nil, err
		}
		v, sessionID := c.target()
		if version != "" {
			v = version
		}
		// Paced by resume: the session's resumeGate lets it pass.
		req, err := mcpRequest(withPaced(ctx), http.MethodGet, c.url, nil, v, sessionID)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", "text/event-stream")
		if lastID != "" {
			req.Header.Set(hdrLastEventID, lastID)
		}
		resp, err := c.client.Do(req)
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		last = err
		delay = reconnectDelay(attempt + 1)
	}
	if last != nil {
		return nil, fmt.Errorf("connection failed after %d attempts: %w", streamMaxRetries, last)
	}
	return nil, fmt.Errorf("connection aborted after %d attempts", streamMaxRetries)
}

// sleepCtx waits d, or until ctx ends: then ctx's error. It does not
// wait, nor look at ctx, when d is not positive.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// openStandalone opens the standalone stream, once, on a goroutine that
// ends once the server answered the GET; the channel closes then. The
// stream is read by another goroutine, started afresh: the one that held
// the request's deep call chain would keep its grown stack for the
// session's life.
func (c *streamableConn) openStandalone() <-chan struct{} {
	ready := make(chan struct{})
	c.mu.Lock()
	if c.opened {
		c.mu.Unlock()
		close(ready)
		return ready
	}
	c.opened = true
	c.standalone.Add(1) // under mu, which Close takes before it waits
	c.mu.Unlock()
	go func() {
		defer c.standalone.Done()
		resp := c.standaloneResponse()
		close(ready)
		if resp == nil {
			return
		}
		c.standalone.Add(1) // before the opener's Done: Close waits for both
		go func() {
			defer c.standalone.Done()
			c.follow(c.ctx, standaloneSummary, resp, nil)
		}()
	}()
	return ready
}

const standaloneSummary = "standalone SSE stream"

// standaloneResponse GETs the standalone stream as the go-sdk does: nil
// when the server has none, or the connection failed.
func (c *streamableConn) standaloneResponse() *http.Response {
	resp, err := c.reconnect(c.ctx, "", true, "")
	if err != nil {
		if c.ctx.Err() == nil {
			c.fail(fmt.Errorf("standalone SSE request failed (session ID: %v): %v", c.SessionID(), err))
		}
		return nil
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode >= 400 && resp.StatusCode < 500 || mediaType != "text/event-stream" {
		// 405: the server offers no standalone stream. Servers that answer
		// 404 (or another 4xx), or anything but an event stream (a 200
		// with something else, a proxy's 502 page), mean the same; the
		// go-sdk takes them so too (with a warning): it looks at the
		// Content-Type before the status.
		drain(resp)
		return nil
	}
	if _, err := responseError(standaloneSummary, c.SessionID(), resp, false); err != nil {
		c.fail(err)
		return nil
	}
	return resp
}

// Close ends the connection: the streams stop, Read returns, the server is
// told the session is over (DELETE, bounded by closeDeleteTimeout; not when
// the server had forgotten it), and onClose is told why. The go-sdk calls
// it with its connection's lock held, and when a Read or Write failed.
func (c *streamableConn) Close() error {
	c.closeOnce.Do(func() {
		cause := c.err()
		c.cancel()
		close(c.done)
		c.mu.Lock()
		c.opened = true // no standalone stream starts any more
		sessionID, version := c.sessionID, c.version
		c.mu.Unlock()
		c.standalone.Wait()
		if sessionID != "" && !errors.Is(cause, mcp.ErrSessionMissing) {
			if bg := c.tr.deletes; bg != nil && c.tr.handshaking.Load() {
				bg.Add(1)
				go func() {
					defer bg.Done()
					_ = c.sendDelete(sessionID, version)
				}()
			} else {
				c.closeErr = c.sendDelete(sessionID, version)
			}
		}
		if c.onClose != nil {
			c.onClose(cause)
		}
	})
	return c.closeErr
}

// sendDelete tells the server that the session is over, bounded by
// closeDeleteTimeout from now, as the go-sdk bounds it.
func (c *streamableConn) sendDelete(sessionID, version string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.ctx), closeDeleteTimeout)
	defer cancel()
	req, err := mcpRequest(ctx, http.MethodDelete, c.url, nil, version, sessionID)
	if err != nil {
		return err
	}
	resp, err := c.client.Do(req)
	if err == nil {
		drain(resp)
	}
	return err
}

// mcpRequest is a request of the streamable HTTP transport to url, with the
// session's headers once known: the raw path's and streamableConn's.
func mcpRequest(ctx context.Context, method, url string, body []byte, version, sessionID string) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	}
	if version != "" {
		req.Header.Set(hdrProtocolVersion, version)
	}
	if sessionID != "" {
		req.Header.Set(hdrSessionID, sessionID)
	}
	return req, nil
}

// responseError classifies an answer's status the way the go-sdk's client
// does, for what summary sent on the session sessionID: nil for a 2xx; the
// server's JSON-RPC error when it sent one, or a 429/5xx (transient: the
// request failed, not the session); mcp.ErrSessionMissing for a 404 of a
// known session (the session is gone); the status text otherwise. The body
// is closed when the answer is an error. The go-sdk takes an error body
// for the server's error only when it is a valid response (an id that is
// not null), and never from a 500; idless, the raw path takes any error
// object (the TypeScript SDK answers with "id":null), a 500's too, so that
// its caller reads the server's words.
func responseError(summary, sessionID string, resp *http.Response, idless bool) (transient bool, err error) {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusInternalServerError:
		if !idless {
			return true, fmt.Errorf("%s: %s", summary, http.StatusText(resp.StatusCode))
		}
		// The raw path reads the server's words: servers on the
		// TypeScript SDK answer an unexpected error 500 with one.
	case http.StatusTooManyRequests, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true, fmt.Errorf("%s: %s", summary, http.StatusText(resp.StatusCode))
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var werr *jsonrpc.Error
	if msg, err := decodeMessage(body); err == nil {
		if r, ok := msg.(*jsonrpc.Response); ok && r.Error != nil {
			werr, _ = r.Error.(*jsonrpc.Error)
		}
	} else if idless && wire.WithinSDKDepth(body) {
		var m map[string]json.RawMessage
		if json.Unmarshal(body, &m) == nil && nullAsAbsent(m["error"]) != nil {
			werr, _ = decodeWireError(m["error"])
		}
	}
	if werr != nil {
		return true, fmt.Errorf("%s: %w: %s", summary, werr, http.StatusText(resp.StatusCode))
	}
	if resp.StatusCode == http.StatusNotFound && sessionID != "" {
		return false, fmt.Errorf("%s: failed to connect (session ID: %v): %w", summary, sessionID, mcp.ErrSessionMissing)
	}
	return false, fmt.Errorf("%s: %s", summary, http.StatusText(resp.StatusCode))
}

// decodeMessage decodes a JSON-RPC message as far as its envelope, as the
// go-sdk's jsonrpc.DecodeMessage does (the same fields, matched exactly, as
// its case-sensitive decoder matches them; params and result are kept as
// they came), without its decoder's 32 KiB buffer per message. A message
// nested deeper than the go-sdk reads is refused, as the go-sdk refuses it.
func decodeMessage(data []byte) (jsonrpc.Message, error) {
	if !wire.WithinSDKDepth(data) {
		return nil, fmt.Errorf("JSON nested deeper than %d levels", wire.SDKMaxDepth)
	}
	// A map matches keys exactly; a struct would match "ID" for "id".
	var env map[string]json.RawMessage
	if err := json.Unmarshal(data, &env); err != nil {
		return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
	}
	var tag string
	if raw, ok := env["jsonrpc"]; ok {
		if err := json.Unmarshal(raw, &tag); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
	}
	if tag != "2.0" {
		return nil, fmt.Errorf("invalid message version tag %q; expected %q", tag, "2.0")
	}
	var idValue any
	if raw, ok := env["id"]; ok {
		if err := json.Unmarshal(raw, &idValue); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
	}
	id, err := jsonrpc.MakeID(idValue)
	if err != nil {
		return nil, err
	}
	if raw, ok := env["method"]; ok {
		var method string
		if err := json.Unmarshal(raw, &method); err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		return &jsonrpc.Request{ID: id, Method: method, Params: env["params"]}, nil
	}
	if !id.IsValid() {
		return nil, errors.New("JSON RPC invalid request")
	}
	resp := &jsonrpc.Response{ID: id, Result: env["result"]}
	if raw := nullAsAbsent(env["error"]); raw != nil {
		werr, err := decodeWireError(raw)
		if err != nil {
			return nil, fmt.Errorf("unmarshaling jsonrpc message: %w", err)
		}
		resp.Error = werr
	}
	return resp, nil
}

// nullAsAbsent is raw, or nil for a JSON null: an error (a pointer in the
// go-sdk's envelope) that is null is none.
func nullAsAbsent(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	return raw
}

// decodeWireError decodes an error object, its fields matched exactly.
func decodeWireError(raw json.RawMessage) (*jsonrpc.Error, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	e := &jsonrpc.Error{Data: nullAsAbsent(fields["data"])}
	if v, ok := fields["code"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &e.Code); err != nil {
			return nil, err
		}
	}
	if v, ok := fields["message"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &e.Message); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// eventStream reads server-sent events: the raw path's and streamableConn's
// reader. The session's HTTP client bounds an event (messageLimit.wrap), so
// line and data grow no further than that.
type eventStream struct {
	br         *bufio.Reader
	pooled     bool
	line, data []byte
	lastID     string        // the last event id the stream gave
	retry      time.Duration // the server's reconnection delay, 0 if none
}

// streamPool holds the readers of short streams (a request's answer),
// buffers and all: a cache, not state.
var streamPool = sync.Pool{New: func() any {
	return &eventStream{br: bufio.NewReaderSize(nil, 4096), pooled: true}
}}

// newEventStream reads body with a buffer of size bytes: a pooled one of
// 4 KiB, or, smaller, one of its own (a stream that lives as long as its
// session holds a small one).
func newEventStream(body io.Reader, size int) *eventStream {
	if size < 4096 {
		return &eventStream{br: bufio.NewReaderSize(body, size)}
	}
	es := streamPool.Get().(*eventStream)
	es.br.Reset(body)
	return es
}

// release returns a pooled reader; the stream is not used after.
func (es *eventStream) release() {
	if !es.pooled {
		return
	}
	es.br.Reset(nil)
	if cap(es.line) > 64<<10 || cap(es.data) > 64<<10 {
		// An outsize event's buffers are not kept.
		es.line, es.data = nil, nil
	}
	es.line, es.data, es.lastID, es.retry = es.line[:0], es.data[:0], "", 0
	streamPool.Put(es)
}

// next returns the data of the next message event (its name empty or
// "message", its data not empty: servers prime a resumable stream with an
// event of empty data and an id). The data is valid until the next call.
// The error is the read's: io.EOF when the stream ended.
func (es *eventStream) next() ([]byte, error) {
	var event string
	hasData := false
	es.data = es.data[:0]
	for {
		es.line = es.line[:0]
		for {
			chunk, err := es.br.ReadSlice('\n')
			es.line = append(es.line, chunk...)
			if err == bufio.ErrBufferFull {
				continue
			}
			if err != nil {
				return nil, err
			}
			break
		}
		line := bytes.TrimRight(es.line, "\r\n")
		if len(line) == 0 {
			// End of an event: dispatch it.
			if hasData && len(es.data) > 0 && (event == "" || event == "message") {
				return es.data, nil
			}
			es.data, event, hasData = es.data[:0], "", false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				es.data = append(es.data, '\n')
			}
			es.data = append(es.data, value...)
			hasData = true
		case "event":
			event = string(value)
		case "id":
			es.lastID = string(value)
		case "retry":
			// A value that is no count of milliseconds is ignored, as
			// the SSE standard says; a huge one is held to what
			// tether waits at most (resumeMaxDelay; no overflow into the past).
			if n, err := strconv.ParseInt(string(value), 10, 64); err == nil && n >= 0 {
				es.retry = time.Duration(min(n, resumeMaxDelay.Milliseconds())) * time.Millisecond
			}
		}
	}
}
