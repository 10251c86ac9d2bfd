package controller

import (
	"context"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/controller/supervisor"
)

// A connection.Session is everything the gateway needs of a backend; with
// its activity counted, everything the supervisor needs.
var (
	_ gateway.Backend    = (*connection.Session)(nil)
	_ supervisor.Session = (*trackedSession)(nil)
)

// SDKConnector opens real sessions with the go-sdk (controller/connection).
type SDKConnector struct {
	// Connector is what the sessions share; tether run makes one. Nil
	// gives each session a Connector of its own (tests).
	Connector *connection.Connector
	// Version is tether's version, sent to servers as the client's.
	Version string
	// Secrets returns what reads valueFrom.secretKeyRef for a connection
	// (Kubernetes mode: the Secrets of its object's namespace); nil, or a
	// nil result, outside Kubernetes mode.
	Secrets func(connection string) connection.SecretReader
	// Tokens holds the OAuth tokens `tether login` stored; nil without a
	// state directory.
	Tokens *oauth.Store
	// MaxMessageBytes bounds one message a server sends (tether run
	// --max-message-bytes); 0 means connection.DefaultMaxMessageBytes.
	MaxMessageBytes int64
}

// Connect implements supervisor.Connector.
func (k SDKConnector) Connect(ctx context.Context, req supervisor.ConnectRequest) (supervisor.Session, error) {
	var secrets connection.SecretReader
	if k.Secrets != nil {
		secrets = k.Secrets(req.Name)
	}
	connect := connection.Connect
	if k.Connector != nil {
		connect = k.Connector.Connect
	}
	s, err := connect(ctx, connection.Request{
		Secrets:         secrets,
		Name:            req.Name,
		Spec:            &req.Conn.Spec,
		ManifestDir:     req.ManifestDir,
		Logger:          req.Logger,
		OnToolsChanged:  req.OnToolsChanged,
		OnEnd:           req.OnEnd,
		ClientVersion:   k.Version,
		OAuth:           connection.OAuth{Tokens: k.Tokens},
		MaxMessageBytes: k.MaxMessageBytes,
	})
	if err != nil {
		return nil, err
	}
	return track(s), nil
}
