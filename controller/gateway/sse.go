package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// SSEPath is where ServeListener mounts the legacy HTTP+SSE endpoint (protocol
// 2024-11-05) when Options.SSE is set: a GET opens a session's event
// stream, whose first event names the URL its client POSTs messages to
// (SSEPath?sessionid=…).
const SSEPath = "/sse"

// The legacy HTTP+SSE transport is opt-in (tether run --sse): clients that
// speak only it are old, and streamable HTTP replaced it. It is the
// go-sdk's SSEHandler on the gateway's one shared server, behind the same
// layers as /mcp (docs/contract.md §5a): the bearer token, the Host and
// Origin checks, the connection bound, the body deadline and size bound,
// the bound on body bytes in flight, the write deadline of every event, the
// bound on calls in flight. What differs is the session: an SSE session is
// its hanging GET, so the session bounds count open streams
// (sseSessions): past --max-sessions-per-client one client's new stream is
// refused with 429, past --max-sessions anyone's with 503. Idle SSE
// sessions are not evicted to make room (they hold no id the client could
// resume with): the client that opened one keeps it until it goes away.
// Its requests in flight are bounded as /mcp's (endWithSSEStream).

// sseSessions bounds the open SSE streams, in all and per client.
type sseSessions struct {
	mu        sync.Mutex
	max       int
	perClient int
	n         int
	by        map[string]int
}

// open admits one more stream of client, or says why not.
func (s *sseSessions) open(client string) *errSessionsFull {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.by[client] >= s.perClient {
		return &errSessionsFull{http.StatusTooManyRequests, fmt.Sprintf(
			"this client already has %d SSE sessions (--max-sessions-per-client)", s.by[client])}
	}
	if s.n >= s.max {
		return &errSessionsFull{http.StatusServiceUnavailable, fmt.Sprintf(
			"the gateway already serves %d SSE sessions (--max-sessions)", s.n)}
	}
	if s.by == nil {
		s.by = map[string]int{}
	}
	s.n++
	s.by[client]++
	return nil
}

func (s *sseSessions) close(client string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	if s.by[client]--; s.by[client] <= 0 {
		delete(s.by, client)
	}
}

// sseHandler is the go-sdk's SSE handler behind the session bounds. Its
// streams end when stop is done (shutdown: a hanging GET would otherwise
// hold the server's Shutdown until its bound).
func (g *Gateway) sseHandler(client func(*http.Request) string, stop context.Context) http.Handler {
	srv := g.server
	sdk := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.SSEOptions{
		MaxRequestBodyBytes: g.opts.MaxRequestBodyBytes,
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			sdk.ServeHTTP(w, r) // a message POSTed to a session, bounded as /mcp's
			return
		}
		who := client(r)
		if full := g.sse.open(who); full != nil {
			writeRPCError(w, full.status, full.msg)
			return
		}
		defer g.sse.close(who)
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		defer context.AfterFunc(stop, cancel)()
		// The go-sdk gives the session's requests this context's values
		// but not its end; endWithSSEStream finds the stream by it.
		ctx = context.WithValue(ctx, sseStreamKey{}, ctx)
		sdk.ServeHTTP(w, r.WithContext(ctx))
	})
}

// sseStreamKey is the context key of an SSE session's stream context.
type sseStreamKey struct{}

// endWithSSEStream ends a request of an SSE session when its stream ends.
// The go-sdk does not: a client that went away left its requests running
// (a list waiting for the first outcomes up to --connect-timeout, a call
// up to its timeout), and the stream's handler, which closes the session
// and waits for them, held its place among the SSE sessions meanwhile.
// Requests of other sessions pass as they came.
//
// It also bounds the requests of SSE sessions in flight. A request to /mcp
// holds its connection until answered, so --max-connections bounds them;
// an SSE message is answered 202 at once and served meanwhile, so a client
// could have any number running. Past --max-connections requests of SSE
// sessions in flight, a request is answered with an error at once.
func (g *Gateway) endWithSSEStream(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		stream, ok := ctx.Value(sseStreamKey{}).(context.Context)
		if !ok {
			return next(ctx, method, req)
		}
		if method == "subscriptions/listen" {
			// Served for the stream's life: listens hold at most half
			// the bound, as over /mcp (holdListen), and the other half
			// stays for the sessions' other requests.
			bound := int64(maxListensOf(int(g.sseInFlight.max)))
			if g.sseListens.Add(1) > bound {
				g.sseListens.Add(-1)
				return nil, &jsonrpc.Error{Code: codeLimit, Message: errListensFull(bound)}
			}
			defer g.sseListens.Add(-1)
		}
		if !strings.HasPrefix(method, "notifications/") {
			if !g.sseInFlight.acquire(1) {
				return nil, &jsonrpc.Error{Code: codeLimit, Message: fmt.Sprintf(
					"tether: %d requests of SSE sessions are in flight, the gateway's bound (--max-connections); retry later", g.sseInFlight.max)}
			}
			defer g.sseInFlight.release(1)
		}
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		defer context.AfterFunc(stream, cancel)()
		return next(ctx, method, req)
	}
}

// legacySSE is /sse with everything /mcp has in front of it (serve.go),
// outermost first: the Host and Origin checks and the body deadline, the
// bearer token, the bound on body bytes in flight, the write deadline of
// every event.
func (g *Gateway) legacySSE(token *bearerToken, stop context.Context) http.Handler {
	h := g.withBodyBudget(g.withStreamDeadline(g.opts.StreamWriteTimeout, g.sseHandler(clientOf(token), stop)))
	if token != nil {
		h = requireBearer(token, h)
	}
	return withBodyDeadline(g.opts.RequestReadTimeout, g.opts.AllowedOrigins.Handler(h))
}
