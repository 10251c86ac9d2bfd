package gateway

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/controller/tracing"
	"github.com/tether-mcp/tether/spec"
)

const methodCallTool = "tools/call"

// tracer records mcp.tool_call spans through the global tracer provider: a
// no-op until tracing.Setup turns tracing on.
var tracer = tracing.Tracer(nil)

// callSpanOpts is built once: with tracing off, a call pays for the span's
// context and nothing else.
var callSpanOpts = []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}

// startCallSpan starts the mcp.tool_call span of one call to the exposed
// tool name, continuing the caller's trace: the request's _meta.traceparent,
// else the HTTP traceparent header (nil over stdio). The backend call
// carries this span in its own _meta.
func startCallSpan(ctx context.Context, meta mcp.Meta, header http.Header, name string) (context.Context, trace.Span) {
	ctx = tracing.ExtractCall(ctx, meta, header)
	ctx, span := tracer.Start(ctx, tracing.SpanToolCall, callSpanOpts...)
	if span.IsRecording() {
		span.SetAttributes(tracing.ToolName.String(name))
	}
	return ctx, span
}

// requestHeader is the HTTP header of a go-sdk request, nil over stdio.
func requestHeader(req *mcp.CallToolRequest) http.Header {
	if req.Extra != nil {
		return req.Extra.Header
	}
	return nil
}

// annotateCallSpan names where a routed call goes.
func annotateCallSpan(span trace.Span, r route) {
	if span.IsRecording() {
		span.SetAttributes(tracing.BackendToolName.String(r.tool))
		if e := r.target.backend.Endpoint(); e != "" {
			span.SetAttributes(tracing.Endpoint.String(e))
		}
	}
}

// callContext bounds one call by the connection's callTimeout and its
// life: a backend that is replaced, goes down or is removed ends t.life, and
// calls in flight on it must not wait for their own timeout. done releases
// both and must be called once the call returned.
func (t *target) callContext(ctx context.Context) (callCtx context.Context, done func()) {
	callCtx, cancel := context.WithTimeout(ctx, t.timeout)
	stopLife := context.AfterFunc(t.life, cancel)
	return callCtx, func() {
		stopLife()
		cancel()
	}
}

// levelWait bounds how long a request waits for a backend that just
// connected to answer the logging level (awaitLevel): one that never
// answers logging/setLevel costs the requests sent meanwhile their log
// messages, not their answers.
const levelWait = time.Second

// awaitLevel waits until the backend was asked for the logging level the
// clients had set before it connected (Set); at once when there was none,
// or it was asked already. It waits at most levelWait, and at most half
// of what is left of ctx: the request itself must still fit in it.
func (t *target) awaitLevel(ctx context.Context) {
	if t.levelSet == nil {
		return
	}
	select {
	case <-t.levelSet:
		return
	default:
	}
	d := levelWait
	if dl, ok := ctx.Deadline(); ok {
		d = min(d, time.Until(dl)/2)
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.levelSet:
	case <-ctx.Done():
	case <-timer.C:
	}
}

// callError is the JSON-RPC error the gateway answers when a call produced no
// tool result: the connection is down, the call timed out, the backend failed.
// The MCP spec reports "could not find or run the tool" as a protocol error;
// a tool's own failure (isError) is forwarded as the backend sent it.
func callError(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: msg}
}

// callTool is the handler of every exposed tool: it routes the call to the
// backend that owns the name, with the caller's arguments as they came.
func (g *Gateway) callTool(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	if !g.calls.acquire(1) {
		return nil, g.errCallsFull()
	}
	defer g.calls.release(1)
	name := req.Params.Name
	ctx, span := startCallSpan(ctx, req.Params.Meta, requestHeader(req), name)
	defer span.End()
	table := g.routes.Load()
	r, ok := table.route(name)
	if !ok {
		// The tool left between the SDK's lookup and ours.
		if d := table.lookupDown(name); d != nil {
			g.observe(ctx, d.name, name, ResultError, 0, nil)
			err := d.err()
			span.SetStatus(codes.Error, err.Error())
			return nil, err
		}
		err := callError(fmt.Sprintf("tool %q is no longer served by the gateway", name))
		span.SetStatus(codes.Error, err.Error())
		return nil, err
	}
	t := r.target
	annotateCallSpan(span, r)
	start := time.Now()
	inRounds := req.Session != nil && roundsClient(req.Session)
	if !inRounds {
		ctx = g.withCaller(ctx, req.Session, req.Extra)
	}
	// Only the call itself travels upstream: arguments, and the answers of a
	// multi-round-trip call. The caller's _meta stays here: it carries keys
	// of the caller's protocol version that an older backend rejects; the
	// progress token is mapped by the Backend instead.
	p := &mcp.CallToolParams{Name: r.tool, InputResponses: req.Params.InputResponses, RequestState: req.Params.RequestState}
	if len(req.Params.Arguments) > 0 {
		p.Arguments = req.Params.Arguments
	}
	var progress func(*mcp.ProgressNotificationParams)
	if tok := req.Params.GetProgressToken(); tok != nil && req.Session != nil {
		progress = forwardProgress(ctx, req.Session, tok)
	}

	if inRounds {
		var res *mcp.CallToolResult
		err := g.roundTrip(ctx, name, start, func() sent {
			ss := req.Session
			w := roundWaiter{log: sessionLog(ctx, ss), progress: progress}
			cr, asked, s := g.callInRounds(ctx, &caller{g: g, ss: ss}, t, name, p, w, func(cr *callRound, progress func(*mcp.ProgressNotificationParams)) sendFunc {
				return func(bctx context.Context, r route) (bool, bool, error) {
					again := *p
					again.Name = r.tool
					var err error
					if cr.res, err = r.target.backend.CallTool(bctx, &again, progress); cr.res == nil {
						return false, false, err
					}
					return true, cr.res.IsError, err
				}
			})
			switch {
			case asked != nil:
				res = asked
			case s.err == nil && s.answered:
				var err error
				if res, err = cr.result(); err != nil {
					s.answered, s.err = false, err
				}
			}
			return s
		})
		if err != nil {
			return nil, err
		}
		dropHopMeta(res.Meta)
		return eraResult(res)
	}
	var res *mcp.CallToolResult
	err := g.roundTrip(ctx, name, start, func() sent {
		return g.sendCall(ctx, r, name, func(callCtx context.Context, r route) (answered, isError bool, err error) {
			p.Name = r.tool
			if res, err = r.target.backend.CallTool(callCtx, p, progress); err != nil || res == nil {
				return false, false, err
			}
			dropHopMeta(res.Meta)
			return true, res.IsError, nil
		})
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// roundTrip is the one road of a routed tools/call, whichever path carries
// it: carry sends the call (sendCall, at once or across a 2026-07-28
// client's rounds, rounds.go) and roundTrip records its outcome
// (callAnswered, callFailed); a failure is returned as the error the
// caller gets. start is when the call began.
func (g *Gateway) roundTrip(ctx context.Context, name string, start time.Time, carry func() sent) error {
	s := carry()
	d := time.Since(start)
	if s.err == nil && s.answered && inTime(s.callErr) {
		g.callAnswered(ctx, s.t, name, s.isError, d)
		return nil
	}
	return g.callFailed(ctx, s.t, name, s.err, s.callErr, d)
}

// sent is what became of a call: t is the target that took it last,
// answered whether the backend sent a result and isError the result's;
// err is what the backend call returned, callErr the error of the call's
// own context once it returned.
type sent struct {
	t                 *target
	answered, isError bool
	err, callErr      error
}

// sendFunc makes one call on a route, bounded by ctx, and reports whether
// the backend sent a result (answered) and the result's isError.
type sendFunc func(ctx context.Context, r route) (answered, isError bool, err error)

// sendCall sends a call on r bounded by its target's callContext; a call
// whose backend lost its session (reroute) is sent once more on the new
// one.
func (g *Gateway) sendCall(ctx context.Context, r route, name string, send sendFunc) sent {
	s := sent{t: r.target}
	if err := ctx.Err(); err != nil {
		// Its client is gone already (endWithPOST ends a request
		// dispatched after its POST ended): sent now, the call's
		// cancellation, sent beside it, could reach the backend first,
		// which ignores it for an id it does not know yet, and the call
		// would run on there (seen in TestSDKPathClientDisconnect under
		// load: the backend's handler never ended).
		s.err, s.callErr = err, err
		return s
	}
	callCtx, done := s.t.callContext(ctx)
	s.t.awaitLevel(callCtx)
	s.answered, s.isError, s.err = send(callCtx, r)
	s.callErr = callCtx.Err()
	done()
	if r2, ok := g.reroute(ctx, s.t, name, s.err); ok {
		// The backend's server lost the session (it restarted): the call
		// was not delivered. Once more, on the new session.
		s.t = r2.target
		callCtx, done = s.t.callContext(ctx)
		s.t.awaitLevel(callCtx)
		s.answered, s.isError, s.err = send(callCtx, r2)
		s.callErr = callCtx.Err()
		done()
	}
	return s
}

// inTime reports whether a call whose context ended with callErr (nil: it
// has not) was answered within its callTimeout. An answer that lands when
// the timeout has fired is not taken: the timeout also cancelled what was
// relayed for the call (a sampling request its client left unanswered, say),
// and the backend's answer may be only its reaction to that; the caller
// gets the timeout either way, whichever came first.
func inTime(callErr error) bool { return !errors.Is(callErr, context.DeadlineExceeded) }

// callAnswered records a call the backend answered with a tool result.
func (g *Gateway) callAnswered(ctx context.Context, t *target, name string, isError bool, d time.Duration) {
	result := ResultOK
	if isError {
		result = ResultError
	}
	g.observe(ctx, t.name, name, result, d, nil)
}

// callFailed turns the outcome of a call that produced no tool result (or
// one too late) into the error the caller gets, and records it. err is what
// the backend call returned (nil when it returned no error), callErr the
// error of the call's own context once it returned, ctx the caller's.
func (g *Gateway) callFailed(ctx context.Context, t *target, name string, err, callErr error, d time.Duration) error {
	var result string
	switch {
	case ctx.Err() != nil:
		result, err = ResultCanceled, callError(fmt.Sprintf("tool %q: call canceled by the client", name))
	case errors.Is(err, wire.ErrCallReached):
		// Before the life: the session's end (which ends the life too)
		// says less than that the call had reached the server.
		result, err = ResultError, callError(fmt.Sprintf("tool %q: connection %s: %v", name, t.name, err))
	case t.life.Err() != nil:
		result, err = ResultError, callError(context.Cause(t.life).Error())
	case errors.Is(callErr, context.DeadlineExceeded): // also an answer too late (inTime)
		result, err = ResultTimeout, callError(fmt.Sprintf("tool %q timed out after %s (callTimeout of connection %s)", name, t.timeout, t.name))
	case err == nil:
		result, err = ResultError, callError(fmt.Sprintf("tool %q: connection %s returned no result", name, t.name))
	default:
		result = ResultError
		// A JSON-RPC error of the backend (invalid params, unknown tool) keeps
		// its code; a failure of the client side (the go-sdk reports a
		// refused connection as a *jsonrpc.Error too) gets the connection's
		// name.
		if je := t.backend.ServerError(err); je != nil {
			err = je
		} else {
			err = callError(fmt.Sprintf("tool %q: connection %s: %v", name, t.name, err))
		}
	}
	g.observe(ctx, t.name, name, result, d, err)
	return err
}

// dropHopMeta removes the protocol's own keys (io.modelcontextprotocol/*)
// from a backend's result: they describe the backend's hop, and left in
// place they would stand for the gateway's (the go-sdk sets serverInfo only
// where none is set, so a client would take the backend for its server).
func dropHopMeta(m mcp.Meta) {
	for k := range m {
		if strings.HasPrefix(k, "io.modelcontextprotocol/") {
			delete(m, k)
		}
	}
}

// forwardProgress relays the backend's progress for one call to the caller,
// under the token the caller chose. The backend's own _meta is not relayed.
func forwardProgress(ctx context.Context, ss *mcp.ServerSession, token any) func(*mcp.ProgressNotificationParams) {
	return func(p *mcp.ProgressNotificationParams) {
		if p == nil {
			return
		}
		// ctx is the downstream request's: it routes the notification to the
		// caller's response stream. An error means the caller is gone.
		_ = ss.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
			ProgressToken: token,
			Progress:      p.Progress,
			Total:         p.Total,
			Message:       p.Message,
		})
	}
}

func (g *Gateway) observe(ctx context.Context, conn, tool, result string, d time.Duration, err error) {
	if g.opts.ObserveCall != nil {
		g.opts.ObserveCall(conn, result, d)
	}
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(tracing.Server.String(conn), tracing.Result.String(result))
		switch {
		case err != nil:
			span.SetStatus(codes.Error, err.Error())
		case result != ResultOK:
			span.SetStatus(codes.Error, "the tool's result is an error (isError)")
		}
	}
	if g.log.Enabled(ctx, slog.LevelDebug) {
		attrs := []slog.Attr{
			slog.String("connection", conn),
			slog.String("tool", tool),
			slog.String("result", result),
			slog.Duration("duration", d),
		}
		if err != nil {
			attrs = append(attrs, slog.String("error", err.Error()))
		}
		if ctx.Value(fastPathKey{}) != nil {
			attrs = append(attrs, slog.Bool("fastPath", true))
		}
		g.log.LogAttrs(ctx, slog.LevelDebug, "gateway tool call", attrs...)
	}
}

// interceptDown answers calls to tools of a connection that is not
// Connected. Those tools are no longer on the server, so without it the SDK
// would answer "unknown tool", which tells an agent nothing about why or
// whether to retry.
// reroute handles a call whose backend answered that it no longer knows
// the session (mcp.ErrSessionMissing: the server restarted within a health
// interval, before tether noticed). Such a call was not delivered, so it is
// safe to send again: reroute brings the connection back (Options.Wake,
// within the connection's call timeout) and returns the route to send it
// on, once.
func (g *Gateway) reroute(ctx context.Context, t *target, name string, err error) (route, bool) {
	if g.opts.Wake == nil || !errors.Is(err, mcp.ErrSessionMissing) || ctx.Err() != nil {
		return route{}, false
	}
	wctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	// The session that lost its server ends (the backend says so); once
	// the gateway has let go of it, Wake gets a new one.
	select {
	case <-t.life.Done():
	case <-wctx.Done():
		return route{}, false
	}
	if werr := g.opts.Wake(wctx, t.name); werr != nil {
		g.log.Debug("a call whose backend lost its session could not bring the connection back", "connection", t.name, "err", werr)
		return route{}, false
	}
	r, ok := g.routes.Load().route(name)
	if !ok || r.target == t {
		return route{}, false
	}
	g.log.Debug("a call whose backend lost its session is sent again on the new one", "connection", t.name, "tool", name)
	return r, true
}

// wake asks Options.Wake to bring d's connection back for a request, within
// the connection's call timeout, and reports whether it is served again.
func (g *Gateway) wake(ctx context.Context, d *downTarget) bool {
	if g.opts.Wake == nil {
		return false
	}
	timeout := d.timeout
	if timeout <= 0 {
		timeout = spec.DefaultCallTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := g.opts.Wake(ctx, d.name); err != nil {
		g.log.Debug("a request could not bring its connection back", "connection", d.name, "err", err)
		return false
	}
	return true
}

func (g *Gateway) interceptDown(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == methodCallTool {
			table := g.routes.Load()
			if table.down != nil || table.downPrefixes != nil {
				if cr, ok := req.(*mcp.CallToolRequest); ok && cr.Params != nil {
					name := cr.Params.Name
					if _, live := table.route(name); !live {
						if d := table.lookupDown(name); d != nil && g.wake(ctx, d) {
							return next(ctx, method, req) // served again: route it
						}
						if d := g.routes.Load().lookupDown(name); d != nil {
							ctx, span := startCallSpan(ctx, cr.Params.Meta, requestHeader(cr), name)
							g.observe(ctx, d.name, name, ResultError, 0, nil)
							err := d.err()
							span.SetStatus(codes.Error, err.Error())
							span.End()
							return nil, err
						}
					}
				}
			}
		}
		switch method {
		case "prompts/get":
			if r, ok := req.(*mcp.GetPromptRequest); ok && r.Params != nil {
				c := g.cat.Load()
				if _, live := c.prompts[r.Params.Name]; !live {
					if d := c.downPrompts[r.Params.Name]; d != nil {
						if g.wake(ctx, d) {
							return next(ctx, method, req)
						}
						return nil, d.err()
					}
					if d := g.routes.Load().lookupDownPrefix(r.Params.Name); d != nil {
						return nil, d.err()
					}
				}
			}
		case "resources/read":
			if r, ok := req.(*mcp.ReadResourceRequest); ok && r.Params != nil {
				if t, d := g.cat.Load().resourceRoute(r.Params.URI); t == nil {
					if d != nil {
						if g.wake(ctx, d) {
							return next(ctx, method, req)
						}
						return nil, d.err()
					}
				}
			}
		}
		return next(ctx, method, req)
	}
}
