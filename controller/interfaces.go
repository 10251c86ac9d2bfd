package controller

import (
	"context"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// Session is one live MCP client session, as the reconciler needs it.
// controller/connection's *Session implements it; tests use fakes.
type Session interface {
	Server() spec.ServerInfo
	Tools() []*mcp.Tool
	Probe(ctx context.Context) error
	CallTool(ctx context.Context, p *mcp.CallToolParams, progress func(*mcp.ProgressNotificationParams)) (*mcp.CallToolResult, error)
	// Done is closed when the session ended, by itself or by Close.
	Done() <-chan struct{}
	Err() error
	// Process describes a stdio child; nil for HTTP.
	Process() *spec.ProcessStatus
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

// Connector opens sessions. On failure, ProcessOf on the error may describe
// the child that failed (see connector.go).
type Connector interface {
	Connect(ctx context.Context, req ConnectRequest) (Session, error)
}

// Exposed is a connected connection as the gateway serves it.
type Exposed struct {
	Name        string
	Prefix      string
	Filter      *spec.ToolFilter
	CallTimeout time.Duration
	Tools       []*mcp.Tool
	Session     Session
}

// Exposer is the gateway as the reconciler drives it.
type Exposer interface {
	Set(e Exposed)
	SetUnavailable(name, prefix, reason string)
	Remove(name string)
	Exposed(name string) int
	Collisions(name string) []spec.ToolCollision
}

// Metrics is what the reconciler reports; controller/metrics implements it.
type Metrics interface {
	ConnectionAdded(name string)
	ConnectionRemoved(name string)
	SetPhase(name string, phase spec.Phase)
	SetTools(name string, exposed int)
	SetCollisions(name string, n int)
	ObserveAttempt(name string, success bool)
	ObserveHealthCheck(name string, d time.Duration)
	SetManifestErrors(file string, n int)
	ObserveReconcile(result string, d time.Duration)
}

type noopMetrics struct{}

func (noopMetrics) ConnectionAdded(string)                   {}
func (noopMetrics) ConnectionRemoved(string)                 {}
func (noopMetrics) SetPhase(string, spec.Phase)              {}
func (noopMetrics) SetTools(string, int)                     {}
func (noopMetrics) SetCollisions(string, int)                {}
func (noopMetrics) ObserveAttempt(string, bool)              {}
func (noopMetrics) ObserveHealthCheck(string, time.Duration) {}
func (noopMetrics) SetManifestErrors(string, int)            {}
func (noopMetrics) ObserveReconcile(string, time.Duration)   {}
