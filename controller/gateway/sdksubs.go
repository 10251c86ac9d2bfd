package gateway

import (
	"context"
	"errors"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sdkSweeper takes out of the go-sdk server the URIs no session holds any
// more.
//
// The go-sdk server (v1.8.0) keeps, for each URI a session subscribed to,
// the sessions subscribed to it (Server.resourceSubscriptions). A session
// that ends without unsubscribing leaves those sessions, but the URI's key
// stays, empty, for the server's life (Server.disconnect): a client that
// subscribes to new URIs and goes away, again and again, grew it without
// bound, past --max-subscriptions, which bounds only what is held at once.
// The go-sdk deletes a key only in its unsubscribe, when the last session
// of the URI leaves, and has no way to it but a session's request: so the
// gateway keeps a session of its own, in memory, made at the first need,
// and sends resources/unsubscribe through it for each URI that
// pruneSubscriptions found nobody holding (and those the gateway forgot
// with their connection, once their sessions ended). The gateway's UnsubscribeHandler
// finds that session holds nothing and does nothing; the go-sdk then
// deletes the empty key. TestSDKForgetsURIsOfSessionsThatEnded fails if a
// go-sdk upgrade changes either.
//
// One goroutine owns a sweeper (the loop that prunes, serve.go) and closes
// it when it stops.
type sdkSweeper struct {
	cs *mcp.ClientSession
}

// sweepProtocol is a classic protocol version: on it the go-sdk client's
// Unsubscribe is a resources/unsubscribe request.
const sweepProtocol = "2025-11-25"

// sweep unsubscribes the sweeper's session from uris. A session that
// ended (closed by whatever) is replaced, once a sweep: left, it failed
// every sweep after, and the go-sdk's keys grew again.
func (sw *sdkSweeper) sweep(ctx context.Context, srv *mcp.Server, uris []string, log *slog.Logger) {
	reopened := false
	for i := 0; i < len(uris); i++ {
		if sw.cs == nil && !sw.open(ctx, srv, log) {
			return
		}
		err := sw.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uris[i]})
		if err != nil && errors.Is(err, mcp.ErrConnectionClosed) && !reopened && ctx.Err() == nil {
			sw.close()
			reopened = true
			i-- // again, on a new session
			continue
		}
		if err != nil {
			log.Debug("gateway could not take a URI nobody holds out of the go-sdk server", "uri", uris[i], "error", err)
		}
	}
}

// open connects the sweeper's session to srv, in memory.
func (sw *sdkSweeper) open(ctx context.Context, srv *mcp.Server, log *slog.Logger) bool {
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		log.Debug("gateway cannot open its session for the go-sdk's subscriptions", "error", err)
		return false
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "tether-gateway-sweeper", Version: "0"}, nil)
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: sweepProtocol})
	if err != nil {
		ss.Close()
		log.Debug("gateway cannot open its session for the go-sdk's subscriptions", "error", err)
		return false
	}
	sw.cs = cs
	return true
}

// close ends the sweeper's session.
func (sw *sdkSweeper) close() {
	if sw.cs != nil {
		_ = sw.cs.Close()
		sw.cs = nil
	}
}
