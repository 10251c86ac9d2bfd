//go:build unix

package connection

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A session id the server hands out is redacted from the moment an answer
// carries it, in the errors of a connect attempt too: before, the id was
// learnt only once the go-sdk's Connect had returned, and an attempt that
// failed after the server gave one showed it in its error (the go-sdk's
// own error for a 404 quotes it), which status and the logs carry. Whoever
// holds the id can use the session on the server.
func TestFailedConnectRedactsTheSessionID(t *testing.T) {
	const id = "SESSIONIDXYZ0123456789ABCD"
	srv := mcp.NewServer(&mcp.Implementation{Name: "classic", Version: "1"}, &mcp.ServerOptions{
		GetSessionID: func() string { return id },
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, _ := rpcOf(r); m == "notifications/initialized" {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := newConnector(t).Connect(ctx, Request{Name: "c", Spec: httpSpec(hs.URL, "")})
	if err == nil {
		s.Close()
		t.Fatalf("Connect succeeded; the test needs it to fail after the server gave a session id")
	}
	if strings.Contains(err.Error(), id) {
		t.Errorf("the error of a failed connect shows the session id: %v", err)
	}
	if !strings.Contains(err.Error(), Redacted) {
		t.Errorf("the error of a failed connect does not say where the id was: %v", err)
	}
}

// The id a 2026-07-28 server hands out with its server/discover answer on
// the first connect (tether's transport asks first, then the go-sdk's
// connects again, and the first id is ended) is redacted too: the go-sdk
// never holds it, so the session learns it from nowhere but the answer.
func TestDiscoverSessionIDIsRedacted(t *testing.T) {
	const id = "DISCOVERSESSIONID0123456789"
	modern := modernServerHandler()
	var gave atomic.Bool
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m, _ := rpcOf(r); m == methodDiscover && gave.CompareAndSwap(false, true) {
			w.Header().Set(hdrSessionID, id)
		}
		modern.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	s := connectWith(t, newConnector(t), Request{Spec: httpSpec(hs.URL, "")})
	if !gave.Load() || s.ownConn {
		t.Fatalf("the server gave no id with a discover answer on tether's transport (own transport %v): the test proves nothing", s.ownConn)
	}
	if got := s.red.String("refused: session " + id); strings.Contains(got, id) {
		t.Errorf("the discover answer's session id is not redacted: %q", got)
	}
}

// A server that hands out a new session id with every answer keeps at
// most maxSessionIDs of them in the session's memory, the latest.
func TestSessionIDsBounded(t *testing.T) {
	l := &liveSecrets{}
	for i := range 3 * maxSessionIDs {
		l.sessionID(fmt.Sprintf("SESSION-%04d", i))
	}
	if len(l.ids) != maxSessionIDs {
		t.Errorf("%d session ids kept, want %d", len(l.ids), maxSessionIDs)
	}
	last := fmt.Sprintf("SESSION-%04d", 3*maxSessionIDs-1)
	if got := l.replace("id " + last); strings.Contains(got, last) {
		t.Errorf("the latest id is not redacted: %q", got)
	}
}
