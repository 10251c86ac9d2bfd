package connection

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// liveness remembers when the server last answered a request: a JSON-RPC
// response, result or error, to one of tether's requests. A probe that
// times out while the server answered other requests is queued behind
// them, not a sign of death: counting answers as proof of life keeps a
// busy server from being taken down by its own load (docs/reliability.md
// L2). Nothing else counts: a server that stopped answering but still
// sends notifications, requests of its own or bytes is not healthy
// (docs/reliability.md, "Hostile servers").
type liveness struct{ last atomic.Int64 }

func (l *liveness) mark() { l.last.Store(time.Now().UnixNano()) }

// since reports whether the server answered a request after t.
func (l *liveness) since(t time.Time) bool { return l.last.Load() > t.UnixNano() }

// markAnswers is a sending middleware, beneath every other: a request the
// go-sdk sent that came back with a result, or with the server's own
// JSON-RPC error, was answered. A notification (nothing comes back), a
// timeout, a cancel and a transport failure prove nothing. The raw path
// marks its answers itself (rawExchange.handle).
func (s *Session) markAnswers(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if !strings.HasPrefix(method, "notifications/") && (err == nil || findServerError(err) != nil) {
			s.seen.mark()
		}
		return res, err
	}
}
