package connection

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sseServer serves an event stream on GET: one event at once, then a
// second when next is closed, then it waits for the client to go. gone
// is closed when the client's connection is closed.
func sseServer(t *testing.T) (srv *httptest.Server, next chan struct{}, gone chan struct{}, got chan http.Header) {
	t.Helper()
	next, gone, got = make(chan struct{}), make(chan struct{}), make(chan http.Header, 4)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		if r.Method != http.MethodGet {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"ok":true}`)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "id: 1\ndata: one\n\n")
		w.(http.Flusher).Flush()
		select {
		case <-next:
		case <-r.Context().Done():
		}
		_, _ = io.WriteString(w, "id: 2\ndata: "+strings.Repeat("x", 3*streamBufferSize)+"\n\n")
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	t.Cleanup(srv.Close)
	return srv, next, gone, got
}

func streamRequest(t *testing.T, ctx context.Context, url string) *http.Request {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer kept")
	return req
}

func readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the stream: %v", err)
	}
	return strings.TrimSuffix(line, "\n")
}

func TestEventStreamOnItsOwnConnection(t *testing.T) {
	srv, next, gone, got := sseServer(t)
	es := &eventStreams{pool: newSharedHTTPTransport()}
	resp, err := es.RoundTrip(streamRequest(t, t.Context(), srv.URL+"/mcp"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := resp.Body.(*streamBody); !ok {
		t.Fatalf("the stream's body is %T: it went through the pool", resp.Body)
	}
	if !resp.Close {
		t.Fatal("the stream's response does not say its connection closes after it: drain would read it")
	}
	if h := <-got; h.Get("Authorization") != "Bearer kept" || h.Get("Accept") != "text/event-stream" {
		t.Fatalf("the server got headers %v", h)
	} else if h.Get("Connection") != "close" {
		// The server, told that nothing else rides the connection, closes
		// it first when the stream ends: TIME_WAIT is its, not tether's.
		t.Fatalf("the stream's request says Connection %q, want close", h.Get("Connection"))
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	if l := readLine(t, br); l != "id: 1" {
		t.Fatalf("first line %q", l)
	}
	readLine(t, br)
	readLine(t, br)
	close(next)
	// An event longer than the connection's buffer arrives whole.
	if l := readLine(t, br); l != "id: 2" {
		t.Fatalf("second event's first line %q", l)
	}
	if l := readLine(t, br); l != "data: "+strings.Repeat("x", 3*streamBufferSize) {
		t.Fatalf("second event's data is %d bytes", len(l))
	}
	// Closing the body closes the connection: the server sees it go.
	resp.Body.Close()
	<-gone
}

func TestEventStreamsLeaveTheRestToThePool(t *testing.T) {
	srv, _, _, _ := sseServer(t)
	tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	defer tls.Close()
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	defer plain.Close()
	pool := newSharedHTTPTransport()
	pool.TLSClientConfig = tls.Client().Transport.(*http.Transport).TLSClientConfig
	es := &eventStreams{pool: pool}
	for _, tc := range []struct {
		name string
		req  func() *http.Request
	}{
		{"a POST", func() *http.Request {
			r := streamRequest(t, t.Context(), srv.URL)
			r.Method = http.MethodPost
			return r
		}},
		{"a GET for JSON", func() *http.Request {
			r := streamRequest(t, t.Context(), srv.URL)
			r.Header.Set("Accept", "application/json, text/event-stream")
			return r
		}},
		{"a stream over TLS", func() *http.Request { return streamRequest(t, t.Context(), tls.URL) }},
		{"a GET with a body", func() *http.Request {
			r := streamRequest(t, t.Context(), plain.URL)
			r.Body, r.ContentLength = io.NopCloser(strings.NewReader("x")), 1
			return r
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			req := tc.req().WithContext(ctx)
			resp, err := es.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if _, ok := resp.Body.(*streamBody); ok {
				t.Fatal("it took a connection of its own")
			}
		})
	}
	t.Run("a stream through a proxy", func(t *testing.T) {
		var proxied atomic.Bool
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			proxied.Store(true)
			w.Header().Set("Content-Type", "text/event-stream")
		}))
		defer proxy.Close()
		pool := newSharedHTTPTransport()
		pool.Proxy = func(*http.Request) (*url.URL, error) { return url.Parse(proxy.URL) }
		resp, err := (&eventStreams{pool: pool}).RoundTrip(streamRequest(t, t.Context(), "http://example.invalid/mcp"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if _, ok := resp.Body.(*streamBody); ok || !proxied.Load() {
			t.Fatalf("proxied %v, body %T: the stream did not go through the proxy", proxied.Load(), resp.Body)
		}
	})
}

// A host name in other letters than ASCII is dialed in its ASCII
// (punycode) form, as the pool dials it: the resolver knows no other.
func TestEventStreamToAnInternationalHost(t *testing.T) {
	dialed := make(chan string, 1)
	pool := newSharedHTTPTransport()
	pool.Proxy = nil // else HTTP_PROXY in the test's environment would be dialed
	pool.DialContext = func(_ context.Context, _, addr string) (net.Conn, error) {
		dialed <- addr
		return nil, errors.New("not dialed")
	}
	_, _ = (&eventStreams{pool: pool}).RoundTrip(streamRequest(t, t.Context(), "http://bücher.example/mcp"))
	if addr := <-dialed; addr != "xn--bcher-kva.example:80" {
		t.Fatalf("dialed %q, want xn--bcher-kva.example:80", addr)
	}
}

func TestEventStreamEndsWithItsContext(t *testing.T) {
	srv, _, gone, got := sseServer(t)
	es := &eventStreams{pool: newSharedHTTPTransport()}
	ctx, cancel := context.WithCancel(t.Context())
	resp, err := es.RoundTrip(streamRequest(t, ctx, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	<-got
	br := bufio.NewReader(resp.Body)
	for range 3 {
		readLine(t, br)
	}
	cancel()
	if _, err := br.ReadString('\n'); !errors.Is(err, context.Canceled) {
		t.Fatalf("a read after the cancel: %v, want context.Canceled", err)
	}
	<-gone // the connection was closed
	resp.Body.Close()
}

// tcpAnswerer accepts connections and hands each to serve.
func tcpAnswerer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				// The request's head, then the answer.
				br := bufio.NewReader(c)
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				serve(c)
			}()
		}
	}()
	return "http://" + l.Addr().String() + "/mcp"
}

func TestEventStreamRefusesHostileHeads(t *testing.T) {
	t.Run("a header without end", func(t *testing.T) {
		url := tcpAnswerer(t, func(c net.Conn) {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nX-Endless: ")
			chunk := []byte(strings.Repeat("a", 64<<10))
			for {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		})
		pool := newSharedHTTPTransport()
		pool.MaxResponseHeaderBytes = 256 << 10
		_, err := (&eventStreams{pool: pool}).RoundTrip(streamRequest(t, t.Context(), url))
		if err == nil || !strings.Contains(err.Error(), "server response headers exceeded 262144 bytes") {
			t.Fatalf("err = %v, want the header bound", err)
		}
	})
	t.Run("endless informational responses", func(t *testing.T) {
		// Their heads count toward the header bound, as in the pool.
		url := tcpAnswerer(t, func(c net.Conn) {
			for {
				if _, err := io.WriteString(c, "HTTP/1.1 103 Early Hints\r\n\r\n"); err != nil {
					return
				}
			}
		})
		pool := newSharedHTTPTransport()
		pool.MaxResponseHeaderBytes = 64 << 10
		_, err := (&eventStreams{pool: pool}).RoundTrip(streamRequest(t, t.Context(), url))
		if err == nil || !strings.Contains(err.Error(), "server response headers exceeded 65536 bytes") {
			t.Fatalf("err = %v, want the header bound", err)
		}
	})
	t.Run("informational responses first", func(t *testing.T) {
		// As many as the pool takes: net/http counts their bytes, not them.
		url := tcpAnswerer(t, func(c net.Conn) {
			_, _ = io.WriteString(c, strings.Repeat("HTTP/1.1 103 Early Hints\r\n\r\n", 8)+"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 12\r\n\r\ndata: done\n\n")
		})
		resp, err := (&eventStreams{pool: newSharedHTTPTransport()}).RoundTrip(streamRequest(t, t.Context(), url))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || err != nil || string(b) != "data: done\n\n" {
			t.Fatalf("status %d, body %q, %v", resp.StatusCode, b, err)
		}
	})
	t.Run("no answer until the ctx ends", func(t *testing.T) {
		accepted := make(chan struct{})
		url := tcpAnswerer(t, func(c net.Conn) {
			close(accepted)
			_, _ = c.Read(make([]byte, 1)) // until the client closes
		})
		ctx, cancel := context.WithCancel(t.Context())
		errc := make(chan error, 1)
		go func() {
			_, err := (&eventStreams{pool: newSharedHTTPTransport()}).RoundTrip(streamRequest(t, ctx, url))
			errc <- err
		}()
		<-accepted
		cancel()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("the stream's request outlived its ctx")
		}
	})
}

// afterFuncCounter is a ctx that counts the functions registered on it
// with context.AfterFunc and not yet stopped.
type afterFuncCounter struct {
	context.Context
	live atomic.Int32
}

// Value hides the ctx it wraps from context.AfterFunc, which would
// register on that one directly instead of calling AfterFunc below.
func (c *afterFuncCounter) Value(any) any { return nil }

func (c *afterFuncCounter) AfterFunc(f func()) func() bool {
	c.live.Add(1)
	stop := context.AfterFunc(c.Context, f)
	var once atomic.Bool
	return func() bool {
		if once.CompareAndSwap(false, true) {
			c.live.Add(-1)
		}
		return stop()
	}
}

// A stream ends its hold on the request's ctx when its body is closed (once
// or twice) or its request fails: a session's ctx outlives many streams
// (the go-sdk reconnects its stream on it), which must not pile up on it.
func TestEventStreamReleasesItsContext(t *testing.T) {
	srv, _, gone, got := sseServer(t)
	ctx := &afterFuncCounter{Context: t.Context()}
	es := &eventStreams{pool: newSharedHTTPTransport()}
	resp, err := es.RoundTrip(streamRequest(t, ctx, srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	<-got
	resp.Body.Close()
	resp.Body.Close()
	<-gone
	if n := ctx.live.Load(); n != 0 {
		t.Fatalf("%d functions left on the ctx after the body was closed", n)
	}
	url := tcpAnswerer(t, func(c net.Conn) { _, _ = io.WriteString(c, "not HTTP\r\n\r\n") })
	if _, err := es.RoundTrip(streamRequest(t, ctx, url)); err == nil {
		t.Fatal("a malformed answer was taken")
	}
	if n := ctx.live.Load(); n != 0 {
		t.Fatalf("%d functions left on the ctx after the request failed", n)
	}
}

// countingBody counts the reads of a body that never ends until closed.
type countingBody struct {
	reads  atomic.Int32
	once   sync.Once
	closed chan struct{}
}

func (b *countingBody) Read([]byte) (int, error) {
	b.reads.Add(1)
	<-b.closed
	return 0, io.EOF
}

func (b *countingBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// What is left of a body whose connection closes after it (an event stream
// on a connection of its own: a call's stream resumed with Last-Event-ID,
// which the raw path drains before its call returns) is not read: drain
// closes it at once instead of holding its caller for drainWait.
func TestDrainClosesAConnectionNoPoolTakesBack(t *testing.T) {
	body := &countingBody{closed: make(chan struct{})}
	drain(&http.Response{Body: body, Close: true})
	select {
	case <-body.closed:
	default:
		t.Fatal("drain left the body open")
	}
	if n := body.reads.Load(); n != 0 {
		t.Fatalf("drain read a body no pool takes back %d times", n)
	}
}
