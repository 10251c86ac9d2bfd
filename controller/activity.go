package controller

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// trackedSession is a connection.Session that keeps count of what it
// serves: requests in flight, subscriptions open, and when it last served
// anything. That is how an OnDemand server is known to be idle
// (supervisor.Session.Activity). Probes and list refreshes are tether's own
// and do not count. The count costs two atomic operations per request.
type trackedSession struct {
	*connection.Session
	inFlight atomic.Int64
	last     atomic.Int64 // unix nanoseconds of the last request's end

	subsMu sync.Mutex
	subs   map[string]bool
}

func track(s *connection.Session) *trackedSession {
	t := &trackedSession{Session: s, subs: map[string]bool{}}
	t.last.Store(time.Now().UnixNano())
	return t
}

func (t *trackedSession) begin() func() {
	t.inFlight.Add(1)
	return func() {
		t.last.Store(time.Now().UnixNano())
		t.inFlight.Add(-1)
	}
}

// Activity implements supervisor.Session.
func (t *trackedSession) Activity() (busy bool, last time.Time) {
	t.subsMu.Lock()
	subs := len(t.subs)
	t.subsMu.Unlock()
	return t.inFlight.Load() > 0 || subs > 0, time.Unix(0, t.last.Load())
}

func (t *trackedSession) CallTool(ctx context.Context, p *mcp.CallToolParams, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	defer t.begin()()
	return t.Session.CallTool(ctx, p, progress)
}

func (t *trackedSession) CallToolRaw(ctx context.Context, name string, params []wire.RawParam, progress func(*mcp.ProgressNotificationParams)) (json.RawMessage, bool, error) {
	defer t.begin()()
	return t.Session.CallToolRaw(ctx, name, params, progress)
}

func (t *trackedSession) GetPrompt(ctx context.Context, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	defer t.begin()()
	return t.Session.GetPrompt(ctx, p)
}

func (t *trackedSession) ReadResource(ctx context.Context, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	defer t.begin()()
	return t.Session.ReadResource(ctx, p)
}

func (t *trackedSession) Complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	defer t.begin()()
	return t.Session.Complete(ctx, p)
}

func (t *trackedSession) Subscribe(ctx context.Context, uri string) error {
	defer t.begin()()
	err := t.Session.Subscribe(ctx, uri)
	if err == nil {
		t.subsMu.Lock()
		t.subs[uri] = true
		t.subsMu.Unlock()
	}
	return err
}

func (t *trackedSession) Unsubscribe(ctx context.Context, uri string) error {
	defer t.begin()()
	t.subsMu.Lock()
	delete(t.subs, uri)
	t.subsMu.Unlock()
	return t.Session.Unsubscribe(ctx, uri)
}
