//go:build unix

package connection

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// serverConn is what a test server knows of one of its connections.
type serverConn struct {
	requests atomic.Int32
	closed   chan struct{}
}

type serverConnKey struct{}

// A session's standalone stream rides a connection that carried nothing
// before it, and carries nothing else, and the session's end closes it:
// the Connector hands its sessions eventStreams, not the bare pool.
func TestSessionEventStreamHasAConnectionOfItsOwn(t *testing.T) {
	type stream struct {
		nth  int32 // the stream's request was its connection's nth
		conn *serverConn
	}
	streams := make(chan stream, 4)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	var conns sync.Map // net.Conn → *serverConn
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc := r.Context().Value(serverConnKey{}).(*serverConn)
		n := sc.requests.Add(1)
		if r.Method == http.MethodGet {
			select {
			case streams <- stream{n, sc}:
			default: // a reconnect the test does not wait for
			}
		}
		h.ServeHTTP(w, r)
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		sc := &serverConn{closed: make(chan struct{})}
		conns.Store(c, sc)
		return context.WithValue(ctx, serverConnKey{}, sc)
	}
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			if sc, ok := conns.LoadAndDelete(c); ok {
				close(sc.(*serverConn).closed)
			}
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	s := connect(t, Request{Spec: httpSpec(srv.URL+"/mcp", spec.TransportStreamable)})
	var st stream
	select {
	case st = <-streams:
	case <-time.After(10 * time.Second):
		t.Fatal("the session opened no standalone stream")
	}
	if st.nth != 1 {
		t.Fatalf("the stream was request %d on its connection: it went through the pool", st.nth)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo"}, nil); err != nil {
		t.Fatal(err)
	}
	if n := st.conn.requests.Load(); n != 1 {
		t.Fatalf("the stream's connection carried %d requests", n)
	}
	_ = s.Close()
	select {
	case <-st.conn.closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream's connection outlived its session")
	}
}

// A server that breaks the standalone stream of a session on tether's own
// transport again and again (at once, as its retry field asks, numbering
// nothing) gets a fresh connection for each try, and each is closed: the
// session ends after streamMaxRetries tries without progress holding none
// of them open.
func TestOwnTransportStreamStormLeavesNoConnection(t *testing.T) {
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return echoServer() }, nil)
	var gets atomic.Int32
	var mu sync.Mutex
	open := map[net.Conn]bool{} // the connections that carried a GET, and whether they are open
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			h.ServeHTTP(w, r)
			return
		}
		gets.Add(1)
		mu.Lock()
		open[r.Context().Value(serverConnKey{}).(net.Conn)] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "retry: 1\n\n")
	}))
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		return context.WithValue(ctx, serverConnKey{}, c)
	}
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			mu.Lock()
			if _, ok := open[c]; ok {
				open[c] = false
			}
			mu.Unlock()
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	pool := newSharedHTTPTransport()
	t.Cleanup(pool.CloseIdleConnections)
	closed := make(chan error, 1)
	client := &http.Client{Transport: &headerRoundTripper{base: &eventStreams{pool: pool}}}
	tr := &streamableTransport{client: client, url: srv.URL, onClose: func(err error) { closed <- err }}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "tether-test", Version: "1"}, nil).Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	select {
	case err := <-closed:
		if err == nil || !strings.Contains(err.Error(), "retries without progress") {
			t.Fatalf("the session ended with %v", err)
		}
	case <-ctx.Done():
		t.Fatalf("the session outlived %d broken streams", gets.Load())
	}
	if n := gets.Load(); n != streamMaxRetries+1 {
		t.Errorf("the stream was asked for %d times, want %d", n, streamMaxRetries+1)
	}
	waitUntil(t, "every stream's connection to close", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(open) != int(gets.Load()) {
			return false // a stream shared a connection: the pool carried it
		}
		for _, o := range open {
			if o {
				return false
			}
		}
		return true
	})
}
