package controller

//lint:file-ignore SA1019 relaying logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/catalog"
	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/controller/supervisor"
)

// onDemandBackend is what the gateway serves for an OnDemand connection,
// whether its server runs or not, so that the gateway sees one backend for
// the connection's whole life and a call in flight is never cut by a
// switch: while the server is stopped it offers the catalog the server
// published the last time it ran, and a request that needs the server
// starts it (Supervisor.Demand, one start however many requests arrive)
// and is then served by the live session; while it runs, everything goes to
// the live session (the tools/call fast path included).
type onDemandBackend struct {
	sup      *supervisor.Supervisor
	endpoint string

	live atomic.Pointer[liveSession] // nil while the server is stopped
	cat  atomic.Pointer[catalog.Catalog]

	mu       sync.Mutex
	listener wire.Listener      // the gateway's, re-applied to each new session
	level    mcp.LoggingLevel   // the level asked for, sent to each new session
	last     supervisor.Session // the last live session, for ServerError
}

type liveSession struct{ supervisor.Session }

func newOnDemandBackend(sup *supervisor.Supervisor, endpoint string) *onDemandBackend {
	return &onDemandBackend{sup: sup, endpoint: endpoint}
}

// setCatalog sets what is offered while the server is stopped.
func (b *onDemandBackend) setCatalog(c *catalog.Catalog) { b.cat.Store(c) }

// setLive hands over the live session (nil: the server stopped). A new
// session gets the gateway's listener and logging level.
func (b *onDemandBackend) setLive(ss supervisor.Session) {
	old := b.live.Load()
	if ss == nil {
		if old != nil {
			b.live.Store(nil)
		}
		return
	}
	if old != nil && old.Session == ss {
		return
	}
	b.live.Store(&liveSession{ss})
	b.mu.Lock()
	b.last = ss
	l, level := b.listener, b.level
	b.mu.Unlock()
	ss.Listen(l)
	if level != "" {
		go func() { _ = ss.SetLogLevel(context.Background(), level) }()
	}
}

// serves reports whether ss is the live session behind the backend.
func (b *onDemandBackend) serves(ss supervisor.Session) bool {
	l := b.live.Load()
	return l != nil && l.Session == ss
}

// session returns the live session, starting the server when it is not
// running.
func (b *onDemandBackend) session(ctx context.Context) (supervisor.Session, error) {
	if l := b.live.Load(); l != nil {
		return l.Session, nil
	}
	ss, err := b.sup.Demand(ctx)
	if err != nil {
		return nil, fmt.Errorf("starting the server on demand: %w", err)
	}
	b.setLive(ss)
	return ss, nil
}

func (b *onDemandBackend) offered() *catalog.Catalog {
	if c := b.cat.Load(); c != nil {
		return c
	}
	return &catalog.Catalog{}
}

// Tools, Prompts, Resources and ResourceTemplates: the live session's, else
// the saved catalog's.
func (b *onDemandBackend) Tools() []*mcp.Tool {
	if l := b.live.Load(); l != nil {
		return l.Tools()
	}
	return b.offered().Tools
}

func (b *onDemandBackend) Prompts() []*mcp.Prompt {
	if l := b.live.Load(); l != nil {
		return l.Prompts()
	}
	return b.offered().Prompts
}

func (b *onDemandBackend) Resources() []*mcp.Resource {
	if l := b.live.Load(); l != nil {
		return l.Resources()
	}
	return b.offered().Resources
}

func (b *onDemandBackend) ResourceTemplates() []*mcp.ResourceTemplate {
	if l := b.live.Load(); l != nil {
		return l.ResourceTemplates()
	}
	return b.offered().ResourceTemplates
}

func (b *onDemandBackend) CallTool(ctx context.Context, p *mcp.CallToolParams, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error) {
	ss, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	return ss.CallTool(ctx, p, progress)
}

// RawProtocolVersion offers the fast path only while the server runs: a
// call that must start it goes the go-sdk way, through CallTool.
func (b *onDemandBackend) RawProtocolVersion() (string, bool) {
	if l := b.live.Load(); l != nil {
		return l.RawProtocolVersion()
	}
	return "", false
}

func (b *onDemandBackend) CallToolRaw(ctx context.Context, name string, params []wire.RawParam, progress func(*mcp.ProgressNotificationParams)) (json.RawMessage, bool, error) {
	ss, err := b.session(ctx)
	if err != nil {
		return nil, false, err
	}
	return ss.CallToolRaw(ctx, name, params, progress)
}

func (b *onDemandBackend) GetPrompt(ctx context.Context, p *mcp.GetPromptParams) (*mcp.GetPromptResult, error) {
	ss, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	return ss.GetPrompt(ctx, p)
}

func (b *onDemandBackend) ReadResource(ctx context.Context, p *mcp.ReadResourceParams) (*mcp.ReadResourceResult, error) {
	ss, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	return ss.ReadResource(ctx, p)
}

func (b *onDemandBackend) Complete(ctx context.Context, p *mcp.CompleteParams) (*mcp.CompleteResult, error) {
	ss, err := b.session(ctx)
	if err != nil {
		return nil, err
	}
	return ss.Complete(ctx, p)
}

// Subscribe starts the server: an open subscription keeps it running.
func (b *onDemandBackend) Subscribe(ctx context.Context, uri string) error {
	ss, err := b.session(ctx)
	if err != nil {
		return err
	}
	return ss.Subscribe(ctx, uri)
}

// Unsubscribe reaches a running server only: a stopped one holds none.
func (b *onDemandBackend) Unsubscribe(ctx context.Context, uri string) error {
	if l := b.live.Load(); l != nil {
		return l.Unsubscribe(ctx, uri)
	}
	return nil
}

// SetLogLevel is remembered, and sent to the server while it runs; it does
// not start the server.
func (b *onDemandBackend) SetLogLevel(ctx context.Context, level mcp.LoggingLevel) error {
	b.mu.Lock()
	b.level = level
	b.mu.Unlock()
	if l := b.live.Load(); l != nil {
		return l.SetLogLevel(ctx, level)
	}
	return nil
}

func (b *onDemandBackend) Listen(l wire.Listener) {
	b.mu.Lock()
	b.listener = l
	b.mu.Unlock()
	if ls := b.live.Load(); ls != nil {
		ls.Listen(l)
	}
}

func (b *onDemandBackend) Endpoint() string { return b.endpoint }

func (b *onDemandBackend) ServerError(err error) *jsonrpc.Error {
	b.mu.Lock()
	last := b.last
	b.mu.Unlock()
	if last == nil {
		return nil
	}
	return last.ServerError(err)
}
