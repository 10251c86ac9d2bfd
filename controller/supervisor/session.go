package supervisor

import (
	"context"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/spec"
)

// Session is one live MCP client session: what the supervisor watches, and
// what the gateway calls through (gateway.Backend). controller/connection's
// *Session implements it; tests use fakes.
type Session interface {
	gateway.Backend
	Server() spec.ServerInfo
	Tools() []*mcp.Tool
	Probe(ctx context.Context) error
	// Done is closed when the session ended, by itself or by Close.
	Done() <-chan struct{}
	Err() error
	// Process describes a stdio child; nil for HTTP.
	Process() *spec.ProcessStatus
	// Activity says whether the session serves something now (a request in
	// flight, a subscription open) and when it last did: what decides that
	// an OnDemand server is idle.
	Activity() (busy bool, last time.Time)
	Close() error
}

// ConnectRequest is what a Connector needs to open one session.
type ConnectRequest struct {
	Name        string
	Conn        *spec.McpConnection
	ManifestDir string
	Logger      *slog.Logger
	// OnToolsChanged is called after the server changed its tool list and the
	// session refreshed it.
	OnToolsChanged func()
	// OnEnd is called once the session has ended, by itself or by Close,
	// after Done is closed. It must not block or call Close.
	OnEnd func()
}

// Connector opens sessions. On failure, spec.ProcessOf on the error may
// describe the child that failed.
type Connector interface {
	Connect(ctx context.Context, req ConnectRequest) (Session, error)
}
