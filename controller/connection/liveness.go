package connection

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// liveness remembers when the server last showed that it works on
// tether's requests: a JSON-RPC response, result or error, to one of them
// (answered), or a notifications/progress for a request tether sent it and
// still waits on (progressed, from routeProgress). A probe that times out
// while the server did so is queued behind that work, not a sign of death:
// counting it keeps a busy server from being taken down by its own load
// (docs/reliability.md L2), also a server that handles one request at a
// time and streams progress through a long call. Nothing else counts: a
// server that stopped answering but still sends log messages, progress for
// a token no call of tether's waits on, requests of its own or bytes is not
// healthy (docs/reliability.md, "Hostile servers", H2).
//
// Progress counts only while its call waits, and only while the server's
// last answer is at most window (the connection's callTimeout) old: calls
// keep coming, so progress for each one alone would keep a server that
// answers nothing alive for ever; no call of a live server waits longer
// than its callTimeout, so one of its answers is never older than that.
type liveness struct {
	answer, progress atomic.Int64 // UnixNano of the last answer, the last progress
	window           time.Duration
}

func (l *liveness) answered()   { l.answer.Store(time.Now().UnixNano()) }
func (l *liveness) progressed() { l.progress.Store(time.Now().UnixNano()) }

// since reports whether the server showed life (see liveness) after t.
func (l *liveness) since(t time.Time) bool {
	answer := l.answer.Load()
	if answer > t.UnixNano() {
		return true
	}
	return l.progress.Load() > t.UnixNano() && answer > 0 && time.Now().UnixNano()-answer <= int64(l.window)
}

// markAnswers is a sending middleware, beneath every other: a request the
// go-sdk sent that came back with a result, or with the server's own
// JSON-RPC error, was answered. A notification (nothing comes back), a
// timeout, a cancel and a transport failure prove nothing. The raw path
// marks its answers itself (rawExchange.handle), and only the answer to
// its own request: a response with another id proves nothing.
func (s *Session) markAnswers(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if !strings.HasPrefix(method, "notifications/") && (err == nil || findServerError(err) != nil) {
			s.seen.answered()
		}
		return res, err
	}
}
