package connection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/tracing"
)

// CallTool calls a tool upstream. p.Name and p.Arguments are forwarded
// verbatim (as are the multi-round-trip fields); p.Meta is not: the
// downstream _meta may carry keys an older server rejects.
// The upstream _meta carries the trace context of ctx's span instead
// (traceparent, tracestate: the MCP trace-context convention), so that the
// backend's spans join the caller's trace; servers that do not trace ignore
// those keys.
//
// If progress is non-nil, the upstream call carries a progress token of the
// session's own, and the server's progress notifications for it reach
// progress in order, from a goroutine of this call, before CallTool returns,
// with ProgressToken set to nil and Message redacted: the caller sets its own
// downstream token before forwarding. progress must not block for long. The
// go-sdk may hand the server's last notifications over after the result, so
// a call whose progress did not reach its total waits up to 25 ms for them.
//
// Cancelling ctx cancels the upstream call (the go-sdk sends
// notifications/cancelled). Errors, and the text of results marked isError,
// are redacted.
func (s *Session) CallTool(ctx context.Context, p *mcp.CallToolParams, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	if p == nil {
		return nil, errors.New("tools/call: no params")
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	s.awaitToolHeaders(callCtx, p.Name) // the go-sdk sets its headers from the tools it holds (lists.go)
	var answered bool
	var token string
	if progress != nil {
		// Before the call's flight: a question the server asks for the
		// call finds its progress in the flight's ctx (relayTo).
		var done func(answered bool)
		callCtx, token, done = s.trackProgress(callCtx, progress)
		defer func() { done(answered) }()
	}
	defer s.inFlight(callCtx)()
	callCtx, sent := withDelivery(callCtx)
	callCtx, mark := s.withOrder(callCtx)
	defer mark.done()
	meta := tracing.InjectMeta(ctx, nil)
	if m := s.levelMeta(ctx, meta); m != nil {
		meta = m
	}
	up := &mcp.CallToolParams{
		Meta:           meta,
		Name:           p.Name,
		Arguments:      p.Arguments,
		InputResponses: p.InputResponses,
		RequestState:   p.RequestState,
	}
	if progress != nil {
		up.SetProgressToken(token)
	}
	res, err := s.cs.CallTool(callCtx, up)
	answered = err == nil
	if answeredByServer(err) {
		mark.await(callCtx) // its log messages first (order.go)
	}
	if err != nil {
		return nil, afterDelivery(sent, s.callErr(fmt.Sprintf("tools/call %q", p.Name), ctx, err))
	}
	if res.IsError {
		s.redactErrorResult(res)
	}
	return res, nil
}

// trackProgress gives one call a progress token of the session's own and
// routes the server's notifications for it to progress. callCtx is the
// call's: while it lasts and the call waits, the server's progress for the
// token proves it alive (liveness.go). It returns callCtx carrying the route
// (progressFrom), for the call's flight and its requests to the server. done
// ends the route; answered says the call got its result, so that progress
// trailing it (the go-sdk may hand it over after the result, and a
// JSON-response server sends it on its standalone stream) is still
// delivered for a moment.
func (s *Session) trackProgress(callCtx context.Context, progress func(*mcp.ProgressNotificationParams)) (ctx context.Context, token string, done func(answered bool)) {
	token = fmt.Sprintf("tether-%d", s.progressSeq.Add(1))
	route := newProgressRoute(callCtx, progress)
	s.routes.Store(token, route)
	return context.WithValue(callCtx, progressKey{}, route), token, func(answered bool) {
		if answered {
			route.linger(progressLinger)
		}
		s.routes.Delete(token)
		route.close() // delivers what is queued, then waits
	}
}

// redactErrorResult redacts what a tool error result says: its text, an
// embedded resource's text, and its structured content (redacted as JSON;
// dropped if redaction would leave it unreadable, since a tool error needs
// only its message).
func (s *Session) redactErrorResult(res *mcp.CallToolResult) {
	for _, c := range res.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			c.Text = s.red.String(c.Text)
		case *mcp.EmbeddedResource:
			if c.Resource != nil {
				c.Resource.Text = s.red.String(c.Resource.Text)
			}
		}
	}
	if res.StructuredContent != nil {
		raw, err := json.Marshal(res.StructuredContent)
		var v any
		if err == nil && json.Unmarshal([]byte(s.red.String(string(raw))), &v) == nil {
			res.StructuredContent = v
		} else {
			res.StructuredContent = nil
		}
	}
}

// callContext derives a call's ctx from the caller's and the session's.
func (s *Session) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	callCtx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(s.ctx, func() { cancel(ErrClosed) })
	return callCtx, func() {
		stop()
		cancel(context.Canceled)
	}
}

// ctxErr prefers the reason a ctx ended over the go-sdk's echo of it.
func (s *Session) ctxErr(callerCtx context.Context, err error) error {
	if callerCtx.Err() == nil && s.ctx.Err() != nil {
		if cause := context.Cause(s.ctx); cause != nil && !errors.Is(err, cause) {
			return fmt.Errorf("%w (%w)", cause, err)
		}
	}
	return err
}

// callErr wraps the error of an upstream call: redacted, naming the
// operation, and ending the session when the transport is gone for good.
func (s *Session) callErr(op string, callerCtx context.Context, err error) error {
	// A message over the limit: whatever the go-sdk made of the failed
	// read, that is the reason (and the limit ends the session).
	if explained := s.limit.explain(err); explained != err {
		return s.red.Err(fmt.Errorf("%s: %w", op, explained))
	}
	err = s.notSent(err)
	// The session's end cancels the caller's ctx too when the caller is
	// the gateway: it ends the calls on a connection that was dropped. A
	// call cancelled while its session ended is the session's, and says
	// why it ended (a lost session, which the gateway sends again when the
	// call had not reached the server): the go-sdk, seeing both its answer
	// and the cancellation, returned either, and the first call after a
	// backend restart failed with "not connected" when it picked the
	// cancellation.
	ended := s.ctx.Err() != nil && errors.Is(callerCtx.Err(), context.Canceled)
	switch {
	case callerCtx.Err() != nil && !ended:
		if dl, ok := callerCtx.Deadline(); ok && errors.Is(callerCtx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("no answer in time (deadline %s ago): %w", time.Since(dl).Round(time.Millisecond), err)
		}
	case s.ctx.Err() != nil:
		if e := s.Err(); e != nil {
			err = fmt.Errorf("%w (%w)", e, err)
		} else {
			err = s.ctxErr(callerCtx, err)
		}
	case errors.Is(err, mcp.ErrConnectionClosed), errors.Is(err, mcp.ErrSessionMissing):
		s.transportDied(err)
	}
	return s.red.Err(fmt.Errorf("%s: %w", op, err))
}

// notSent is err, made to say mcp.ErrSessionMissing as well when the go-sdk
// refused to send the request because the server had answered another
// request of the session that it no longer knows it. The go-sdk refuses to
// send on a connection that failed, with mcp.ErrConnectionClosed, and keeps
// the failure as text only: after a backend restart, the request that met
// the 404 first (its standalone stream's, a probe's, another call's) told
// the gateway the session was lost, and a call sent in the moment before
// tether's session ended was answered "connection closed", so the gateway,
// which sends a call again only when the session was lost, failed it
// (docs/reliability.md S24). Such a call never left tether.
func (s *Session) notSent(err error) error {
	if !errors.Is(err, mcp.ErrConnectionClosed) || errors.Is(err, mcp.ErrSessionMissing) || !s.forgotten.Load() {
		return err
	}
	return &sessionLostError{err: err}
}

// sessionLostError is a request the go-sdk refused because the server had
// lost the session: err as it is, and mcp.ErrSessionMissing.
type sessionLostError struct{ err error }

func (e *sessionLostError) Error() string   { return e.err.Error() }
func (e *sessionLostError) Unwrap() []error { return []error{e.err, mcp.ErrSessionMissing} }

// routeProgress hands a progress notification to the call that owns its
// token. It runs on the session's reader and never blocks.
func (s *Session) routeProgress(p *mcp.ProgressNotificationParams) {
	if p == nil {
		return
	}
	token, ok := p.ProgressToken.(string)
	if !ok {
		return
	}
	v, ok := s.routes.Load(token)
	if !ok {
		return // the call has returned; late progress is dropped
	}
	route := v.(*progressRoute)
	if route.waiting() {
		// Progress for a request tether still waits on: the server works
		// on it, even if it answers nothing else meanwhile; it counts as
		// long as the server's last answer is within its callTimeout
		// (liveness.go).
		s.seen.progressed()
	}
	out := *p
	out.ProgressToken = nil
	out.Meta = nil
	out.Message = s.red.String(p.Message)
	route.deliver(&out)
}

// progressRoute delivers one call's progress notifications, in order, from a
// goroutine the call owns. When its queue is full, notifications are
// dropped: progress is advisory, the reader must not wait.
type progressRoute struct {
	mu       sync.Mutex
	closed   bool
	ch       chan *mcp.ProgressNotificationParams
	done     chan struct{}
	complete chan struct{} // closed when progress reached its total
	// queued and handed count the notifications queued and those handed
	// on since; handedOne is closed (and replaced) at each hand-off.
	queued, handed int
	handedOne      chan struct{}

	// call is the call's ctx: it ends at the call's deadline (the gateway's
	// callTimeout). Once the call returned the route is gone, but for the
	// linger of an answered call, whose answer proved life already. Calls
	// keep coming, so this alone bounds nothing: liveness also wants an
	// answer within one callTimeout.
	call context.Context
}

func newProgressRoute(call context.Context, fn func(*mcp.ProgressNotificationParams)) *progressRoute {
	r := &progressRoute{
		call:      call,
		ch:        make(chan *mcp.ProgressNotificationParams, 64),
		done:      make(chan struct{}),
		complete:  make(chan struct{}),
		handedOne: make(chan struct{}),
	}
	go func() {
		defer close(r.done)
		for p := range r.ch {
			fn(p)
			r.mu.Lock()
			r.handed++
			close(r.handedOne)
			r.handedOne = make(chan struct{})
			r.mu.Unlock()
		}
	}()
	return r
}

// progressKey marks, in a call's context, the route of its progress.
type progressKey struct{}

// progressFrom is the route of the progress of the call whose context ctx
// is (or derives from), nil if it has none.
func progressFrom(ctx context.Context) *progressRoute {
	r, _ := ctx.Value(progressKey{}).(*progressRoute)
	return r
}

// flush waits, at most until ctx ends, until what was queued so far has
// been handed on: a server that reports progress and then asks its client
// something has that progress reach the client before the question, as it
// sent them (a 2026-07-28 client gets the question as its round's answer,
// after which that round takes nothing more).
func (r *progressRoute) flush(ctx context.Context) {
	r.mu.Lock()
	want := r.queued
	for r.handed < want {
		wait := r.handedOne
		r.mu.Unlock()
		select {
		case <-wait:
		case <-r.done:
			return
		case <-ctx.Done():
			return
		}
		r.mu.Lock()
	}
	r.mu.Unlock()
}

// waiting reports whether the call still waits for its answer, within its
// deadline.
func (r *progressRoute) waiting() bool { return r.call.Err() == nil }

func (r *progressRoute) deliver(p *mcp.ProgressNotificationParams) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	select {
	case r.ch <- p:
		r.queued++
	default:
	}
	if p.Total > 0 && p.Progress >= p.Total {
		select {
		case <-r.complete:
		default:
			close(r.complete)
		}
	}
}

// linger waits up to d for late progress, unless progress already reached
// its total. The go-sdk retires a call in its reader as soon as the response
// arrives, but hands notifications to a separate goroutine: one the server
// sent just before its response may be handled after the call returned.
func (r *progressRoute) linger(d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.complete:
	case <-t.C:
	}
}

// close stops accepting, lets the goroutine deliver what is queued and
// waits for it.
func (r *progressRoute) close() {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		close(r.ch)
	}
	r.mu.Unlock()
	<-r.done
}
