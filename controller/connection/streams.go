package connection

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// An HTTP session holds one event stream open for as long as it lives: the
// streamable transport's standalone GET, on which the server sends what
// belongs to no request (list changes, resource updates, its own
// requests), and the legacy SSE transport's stream. Through net/http's
// pool, each such stream holds a pooled connection with a read and a write
// goroutine and a buffer each, for its whole life, besides the goroutine
// that reads the stream: at 1,000 sessions, 2,000 goroutines (the README's
// Performance section counts them) and, measured with hack/bench when this
// was written, about 20 MB of tether's resident memory. eventStreams carries each of them on a TCP connection of its
// own instead, read by the goroutine that reads the stream and by no other,
// with one small buffer. A call's stream resumed with Last-Event-ID is a
// GET of the same shape, and rides a connection of its own too, for the
// call's time (drain closes it at once). Everything else (calls, lists,
// pings, streams over TLS or through a proxy) goes through the pool as
// before.
//
// It is a RoundTripper under the session's headerRoundTripper, so a stream
// carries the manifest's headers and its body is bounded as any response
// is (limit.go).
type eventStreams struct {
	pool *http.Transport
}

// streamBufferSize is the read buffer of a stream's connection: an event
// longer than it is read in more than one read, not refused.
const streamBufferSize = 1 << 10

// defaultMaxStreamHeaderBytes bounds a stream's response header when the
// pool sets no bound, as net/http's transport does by default.
const defaultMaxStreamHeaderBytes = 10 << 20

// streamDialTimeout bounds a stream's dial when the pool has no dialer of
// its own (net/http's default transport's).
const streamDialTimeout = 30 * time.Second

func (t *eventStreams) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.ownConnection(req) {
		return t.pool.RoundTrip(req)
	}
	ctx := req.Context()
	conn, err := t.dial(ctx, req)
	if err != nil {
		return nil, err
	}
	// The request's ctx ends the stream, as the pool ends a request's
	// connection: the read that waits on it fails.
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		conn.Close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	// No other request will ride the connection: the request says so
	// (Connection: close), and a server that ends the stream closes the
	// connection first, so that its closed socket waits out TCP's
	// TIME_WAIT on the server's side, not on tether's, which a server
	// that ends its stream again and again would fill with them.
	closing := *req
	closing.Close = true
	var head bytes.Buffer
	if err := closing.Write(&head); err != nil {
		return fail(err)
	}
	if _, err := conn.Write(head.Bytes()); err != nil {
		return fail(err)
	}
	// The header is bounded as the pool bounds it; the body is not here
	// (the session's headerRoundTripper bounds every message). As in the
	// pool, informational answers (1xx but 101) before the response are
	// skipped, however many, and their heads count toward the same bound:
	// net/http's transport bounds them so when no trace asks for them.
	maxHeader := t.pool.MaxResponseHeaderBytes
	if maxHeader <= 0 {
		maxHeader = defaultMaxStreamHeaderBytes
	}
	lim := &io.LimitedReader{R: conn, N: maxHeader}
	br := bufio.NewReaderSize(lim, streamBufferSize)
	var resp *http.Response
	for {
		resp, err = http.ReadResponse(br, req)
		if err != nil {
			if lim.N <= 0 {
				err = fmt.Errorf("server response headers exceeded %d bytes", maxHeader)
			}
			return fail(err)
		}
		if resp.StatusCode < 100 || resp.StatusCode > 199 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
	}
	lim.N = math.MaxInt64
	resp.Body = &streamBody{body: resp.Body, conn: conn, ctx: ctx, stop: stop}
	// No pool takes the connection back: what is left of the body is not
	// worth reading (drain).
	resp.Close = true
	return resp, nil
}

// ownConnection reports whether req is a stream eventStreams carries: a
// GET with no body that accepts only an event stream, over plain HTTP, to
// a host named in ASCII, that the pool would not send through a proxy.
// Over TLS the pool keeps it: a server that speaks HTTP/2 there carries
// every stream on one connection. A host name with other letters goes to
// the pool too, which dials it in its ASCII (punycode) form; the resolver
// knows no other.
func (t *eventStreams) ownConnection(req *http.Request) bool {
	if req.Method != http.MethodGet || req.URL.Scheme != "http" ||
		(req.Body != nil && req.Body != http.NoBody) || !isASCII(req.URL.Hostname()) ||
		!strings.EqualFold(strings.TrimSpace(req.Header.Get("Accept")), "text/event-stream") {
		return false
	}
	if t.pool.Proxy != nil {
		if u, err := t.pool.Proxy(req); err != nil || u != nil {
			return false
		}
	}
	return true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func (t *eventStreams) dial(ctx context.Context, req *http.Request) (net.Conn, error) {
	addr := req.URL.Host
	if req.URL.Port() == "" {
		addr = net.JoinHostPort(req.URL.Hostname(), "80")
	}
	if t.pool.DialContext != nil {
		return t.pool.DialContext(ctx, "tcp", addr)
	}
	d := net.Dialer{Timeout: streamDialTimeout, KeepAlive: 30 * time.Second}
	return d.DialContext(ctx, "tcp", addr)
}

// streamBody is a stream's body: closing it closes its connection, which
// no other request shares.
type streamBody struct {
	body io.ReadCloser
	conn net.Conn
	ctx  context.Context
	stop func() bool
	once sync.Once
}

func (b *streamBody) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	if err != nil && err != io.EOF && b.ctx.Err() != nil {
		// Ended by the request's ctx (the connection was closed under
		// the read): say so, as the pool's body does.
		err = b.ctx.Err()
	}
	return n, err
}

func (b *streamBody) Close() error {
	b.once.Do(func() {
		b.stop()
		b.conn.Close()
	})
	return nil
}
