package gateway

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A complete first answer (docs/contract.md §5). Most agents list a
// server's tools once, when they start, and a tether started by its agent
// (tether run --stdio) is asked within milliseconds, before any server has
// connected: answered at once, the list was empty and the agent never
// looked again. So a list waits until every connection has reached its
// first outcome (Options.FirstAnswer, closed by the controller), at most
// Options.FirstAnswerTimeout, and gets the complete set; the
// list_changed that follows later changes stays the way to hear of them.
// Once the first outcomes are in, nothing waits again.

// firstAnswerMethods are the lists that wait.
var firstAnswerMethods = map[string]bool{
	"tools/list":               true,
	"prompts/list":             true,
	"resources/list":           true,
	"resources/templates/list": true,
}

// waitFirstAnswer holds a list until the first outcomes are in. It runs
// before serveTools settles the claims (gateway.go, settle), so that the
// connections that come up meanwhile rank as at start-up: by name. The
// wait ends with the request's context: a client that goes away frees it
// (over HTTP the end of its POST does, endWithPOST; over /sse the end of
// its stream, endWithSSEStream; over stdio the session ends).
func (g *Gateway) waitFirstAnswer(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if firstAnswerMethods[method] && !g.answered.Load() {
			g.awaitFirstOutcomes(ctx)
		}
		return next(ctx, method, req)
	}
}

// awaitFirstOutcomes waits for Options.FirstAnswer, the timeout or ctx,
// whichever comes first.
func (g *Gateway) awaitFirstOutcomes(ctx context.Context) {
	ch := g.opts.FirstAnswer
	if ch == nil {
		g.answered.Store(true)
		return
	}
	select {
	case <-ch:
		g.answered.Store(true)
		return
	default:
	}
	// Lists over HTTP wait one per connection, but an SSE session's are
	// POSTed and answered on its stream: a client could park any number.
	// Past --max-connections waiting lists, a list is answered at once
	// with what is served.
	defer g.firstWaiting.Add(-1)
	if g.firstWaiting.Add(1) > int64(g.opts.MaxConnections) {
		return
	}
	t := time.NewTimer(g.opts.FirstAnswerTimeout)
	defer t.Stop()
	select {
	case <-ch:
		g.answered.Store(true)
	case <-t.C:
		g.answered.Store(true) // later lists never wait
		g.log.Warn("answering a list before every connection reached its first outcome (--connect-timeout)", "waited", g.opts.FirstAnswerTimeout)
	case <-ctx.Done():
	}
}

// DefaultFirstAnswerTimeout bounds the wait of a first list when
// Options.FirstAnswerTimeout is 0: a connect attempt's default bound.
const DefaultFirstAnswerTimeout = 60 * time.Second
