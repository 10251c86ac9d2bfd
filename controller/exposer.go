package controller

import (
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/spec"
)

// GatewayExposer drives the aggregated MCP server from the reconciler.
type GatewayExposer struct {
	G *gateway.Gateway
}

// Set implements Exposer.
// The gateway reads the backend's tools (and the rest of what it offers)
// from the session itself; a session that cannot serve the gateway (not a
// connection.Session) is handed over as none, which the gateway reports as
// unavailable.
func (x GatewayExposer) Set(e Exposed) {
	backend, _ := e.Session.(gateway.Backend)
	x.G.Set(gateway.Connection{
		Name:        e.Name,
		Prefix:      e.Prefix,
		Filter:      e.Filter,
		CallTimeout: e.CallTimeout,
		Backend:     backend,
	})
}

// SetUnavailable implements Exposer.
func (x GatewayExposer) SetUnavailable(name, prefix, reason string) {
	x.G.SetUnavailable(name, prefix, reason)
}

// Remove implements Exposer.
func (x GatewayExposer) Remove(name string) { x.G.Remove(name) }

// Exposed implements Exposer.
func (x GatewayExposer) Exposed(name string) int { return x.G.Exposed(name) }

// Collisions implements Exposer.
func (x GatewayExposer) Collisions(name string) []spec.ToolCollision { return x.G.Collisions(name) }
