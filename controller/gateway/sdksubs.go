package gateway

import (
	"context"
	"log/slog"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// This file takes out of the go-sdk server the URIs no session holds any
// more (sweepSDK).
//
// The go-sdk server (v1.8.0) keeps, for each URI a session subscribed to,
// the sessions subscribed to it (Server.resourceSubscriptions). A session
// that ends without unsubscribing leaves those sessions, but the URI's key
// stays, empty, for the server's life (Server.disconnect): a client that
// subscribes to new URIs and goes away, again and again, grew it without
// bound, past --max-subscriptions, which bounds only what is held at once.
// The go-sdk deletes a key only in its unsubscribe, when the last session
// of the URI leaves, and has no way to it but a session's request: so the
// gateway opens a session of its own, in memory, and sends
// resources/unsubscribe through it for each URI that pruneSubscriptions
// found nobody holding (and those the gateway forgot with their
// connection, once their sessions ended). The gateway's
// UnsubscribeHandler finds that session holds nothing and does nothing;
// the go-sdk then deletes the empty key. TestSDKForgetsURIsOfSessionsThatEnded fails if a
// go-sdk upgrade changes either.
//
// The session lives for one sweep, and a sweep runs only when pruning
// found such URIs: between sweeps the server has no session of the
// gateway's own, so it tells nobody of tool changes when no client is
// connected, and a session closed by whatever cannot fail the sweeps after
// it.

// sweepProtocol is a classic protocol version: on it the go-sdk client's
// Unsubscribe is a resources/unsubscribe request.
const sweepProtocol = "2025-11-25"

// sweepSDK unsubscribes a session of the gateway's own, in memory, from
// uris, then closes it.
func sweepSDK(ctx context.Context, srv *mcp.Server, uris []string, log *slog.Logger) {
	if len(uris) == 0 {
		return
	}
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		log.Debug("gateway cannot open its session for the go-sdk's subscriptions", "error", err)
		return
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "tether-gateway-sweeper", Version: "0"}, nil)
	cs, err := c.Connect(ctx, ct, &mcp.ClientSessionOptions{ProtocolVersion: sweepProtocol})
	if err != nil {
		ss.Close()
		log.Debug("gateway cannot open its session for the go-sdk's subscriptions", "error", err)
		return
	}
	defer cs.Close()
	for _, uri := range uris {
		if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
			log.Debug("gateway could not take a URI nobody holds out of the go-sdk server", "uri", uri, "error", err)
		}
	}
}
