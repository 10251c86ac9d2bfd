//go:build unix

package connection

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
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
