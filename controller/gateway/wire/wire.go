// Package wire holds the few types that cross between the gateway and a
// backend session (controller/connection) without either package importing
// the other: the gateway declares what it needs of a backend
// (gateway.Backend) in these terms, and connection.Session provides it.
package wire

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// RawParam is one params key of a tools/call, forwarded as it came.
type RawParam struct {
	Key   string
	Value json.RawMessage
}

// Caller is the downstream client on whose behalf the gateway sends a
// request to a backend (tools/call, prompts/get, resources/read): what the
// backend may send that client while it serves the request. The gateway
// puts it in the request's context (WithCaller); the backend session reads
// it there (CallerFrom) and keeps it while the request is in flight.
type Caller interface {
	// Client identifies the downstream session: two Callers of one session
	// return equal values.
	Client() any
	// Log relays a backend's notifications/message to the client, on the
	// request's own stream where there is one, if the client's logging
	// level admits it.
	Log(p *mcp.LoggingMessageParams)
	// LogLevel is the client's logging level, "" when it set none: a
	// backend of the 2026-07-28 protocol takes it with each request.
	LogLevel() mcp.LoggingLevel
	// Capabilities are what the client declared at initialize (never nil).
	Capabilities() *mcp.ClientCapabilities
	// CreateMessage, Elicit and ListRoots relay a backend's request to the
	// client and return its answer. ctx bounds the wait.
	CreateMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error)
	Elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error)
	ListRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error)
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the Caller ctx carries, or nil.
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}

// Listener receives what a backend sends that belongs to no request in
// flight: resource updates, and log messages it cannot relate to a call.
// Its methods must not block.
type Listener interface {
	ResourceUpdated(p *mcp.ResourceUpdatedNotificationParams)
	Log(p *mcp.LoggingMessageParams)
}

// ErrCallReached is in the error of a tools/call that reached its server
// before the server lost the session (it restarted while the call ran):
// the gateway does not send such a call again, since the tool may have run,
// and the caller's error says so.
var ErrCallReached = errors.New("the server had taken the call")
