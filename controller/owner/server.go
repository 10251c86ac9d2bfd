package owner

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The control API's paths (docs/contract.md, "The control socket").
const (
	// RecordPath answers GET with the owner's Record as JSON.
	RecordPath = "/v1/owner"
	// SessionPath upgrades the connection (Upgrade: SessionProtocol) to
	// one MCP session framed as over stdio: newline-delimited JSON-RPC.
	SessionPath = "/v1/session"
)

// SessionProtocol is the Upgrade token of a bridge's session.
const SessionProtocol = "tether-mcp-stdio"

// BridgeHeader says what a bridge will do when the owner goes: BridgeTakeover
// (a tether run --stdio that takes the lock and carries on), BridgeWait (a
// tether connect that waits for an owner), BridgeSelf (the owner's own
// client, bridged after a takeover).
const (
	BridgeHeader   = "Tether-Bridge"
	BridgeTakeover = "takeover"
	BridgeWait     = "wait"
	BridgeSelf     = "self"
)

// Server serves the control API: the record, and MCP sessions for
// bridges, each handed to Serve on its own connection.
type Server struct {
	// Record is what GET /v1/owner answers (read on every request).
	Record func() Record
	// Serve serves one MCP session on rwc until it ends or ctx is done.
	Serve func(ctx context.Context, rwc io.ReadWriteCloser) error
	// Ready, when set, is waited for before a session is served: the
	// owner's connections' first outcomes, so that a bridge that comes
	// back after a takeover finds the tools its client called before.
	Ready func(ctx context.Context)
	// MaxSessions bounds the sessions served at once; one more is refused
	// with 503.
	MaxSessions int
	// WriteTimeout, when positive, bounds each write on a session's
	// connection: a bridge that stops reading (its client never reads its
	// stdout) has its session ended, instead of holding up what the
	// gateway sends every session (list_changed), as --stream-write-timeout
	// does on the HTTP gateway's streams.
	WriteTimeout time.Duration
	Log          *slog.Logger

	ctx       context.Context
	sessions  sync.WaitGroup
	open      atomic.Int64
	takeovers atomic.Int64
}

// Handler returns the API's handler; sessions end when ctx is done.
// Wait waits for them.
func (s *Server) Handler(ctx context.Context) http.Handler {
	s.ctx = ctx
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+RecordPath, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(s.Record())
	})
	mux.HandleFunc("GET "+SessionPath, s.session)
	return mux
}

// Attached is the number of sessions of bridges that would take over when
// the owner goes (BridgeTakeover).
func (s *Server) Attached() int { return int(s.takeovers.Load()) }

// Wait waits for every session (and every request for one) to end.
func (s *Server) Wait() { s.sessions.Wait() }

func (s *Server) session(w http.ResponseWriter, r *http.Request) {
	// Counted from the start: once hijacked, http.Server no longer waits
	// for the handler, Wait does.
	s.sessions.Add(1)
	defer s.sessions.Done()
	if r.Header.Get("Upgrade") != SessionProtocol {
		http.Error(w, "owner: "+SessionPath+" needs Upgrade: "+SessionProtocol, http.StatusUpgradeRequired)
		return
	}
	if n := s.open.Add(1); s.MaxSessions > 0 && n > int64(s.MaxSessions) {
		s.open.Add(-1)
		http.Error(w, "owner: at its bound of bridge sessions (--max-sessions)", http.StatusServiceUnavailable)
		return
	}
	defer s.open.Add(-1)
	hj, ok := w.(http.Hijacker)
	if !ok {
		http.Error(w, "owner: this connection cannot be upgraded", http.StatusInternalServerError)
		return
	}
	conn, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	// A hijacked connection is the session's from here: http.Server's
	// timeouts no longer apply, and its Shutdown does not wait for it.
	_ = conn.SetDeadline(time.Time{})
	conn = &writeDeadlineConn{Conn: conn, d: s.WriteTimeout}
	// Counted before the bridge hears it is accepted.
	if r.Header.Get(BridgeHeader) == BridgeTakeover {
		s.takeovers.Add(1)
		defer s.takeovers.Add(-1)
	}
	// The session is accepted at once, before the wait for Ready: the
	// bridge's --owner-wait bounds finding an owner, and this owner bounds
	// its own wait (Ready). What the bridge sends meanwhile waits in the
	// connection.
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: "+SessionProtocol+"\r\nConnection: Upgrade\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	if s.Ready != nil {
		// The wait ends with the owner too; a session the owner stops
		// before it is ready is closed unserved.
		ctx, cancel := context.WithCancel(r.Context())
		stop := context.AfterFunc(s.ctx, cancel)
		s.Ready(ctx)
		stop()
		cancel()
		if s.ctx.Err() != nil {
			conn.Close()
			return
		}
	}
	err = s.Serve(s.ctx, &hijacked{Reader: rw.Reader, Conn: conn})
	conn.Close()
	if err != nil && s.Log != nil {
		s.Log.Debug("bridge session ended", "err", err)
	}
}

// writeDeadlineConn sets a deadline of d on each write (none when d is
// not positive).
type writeDeadlineConn struct {
	net.Conn
	d time.Duration
}

func (c *writeDeadlineConn) Write(p []byte) (int, error) {
	if c.d > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(c.d))
	}
	return c.Conn.Write(p)
}

// hijacked reads what the HTTP server buffered before the rest.
type hijacked struct {
	*bufio.Reader
	net.Conn
}

func (h *hijacked) Read(p []byte) (int, error) { return h.Reader.Read(p) }
