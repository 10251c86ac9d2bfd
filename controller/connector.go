package controller

import (
	"context"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/controller/supervisor"
)

// SDKConnector opens real sessions with the go-sdk (controller/connection).
type SDKConnector struct {
	// Version is tether's version, sent to servers as the client's.
	Version string
	// Tokens holds the OAuth tokens `tether login` stored; nil without a
	// state directory.
	Tokens *oauth.Store
}

// Connect implements supervisor.Connector.
func (k SDKConnector) Connect(ctx context.Context, req supervisor.ConnectRequest) (supervisor.Session, error) {
	s, err := connection.Connect(ctx, connection.Request{
		Name:           req.Name,
		Spec:           &req.Conn.Spec,
		ManifestDir:    req.ManifestDir,
		Logger:         req.Logger,
		OnToolsChanged: req.OnToolsChanged,
		OnEnd:          req.OnEnd,
		ClientVersion:  k.Version,
		OAuth:          connection.OAuth{Tokens: k.Tokens},
	})
	if err != nil {
		return nil, err
	}
	return s, nil
}
