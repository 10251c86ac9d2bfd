package controller

import (
	"github.com/tether-mcp/tether/controller/gateway"
	"github.com/tether-mcp/tether/spec"
)

// GatewayExposer drives the aggregated MCP server from the reconciler.
type GatewayExposer struct {
	G *gateway.Gateway
}

// Set implements Exposer. The gateway reads what the backend offers (tools,
// prompts, resources) from the session itself.
func (x GatewayExposer) Set(e Exposed) {
	x.G.Set(gateway.Connection{
		Name:        e.Name,
		Prefix:      e.Prefix,
		Filter:      e.Filter,
		CallTimeout: e.CallTimeout,
		Backend:     e.Backend,
	})
}

// SetUnavailable implements Exposer.
func (x GatewayExposer) SetUnavailable(name, prefix string, filter *spec.ToolFilter, reason string) {
	x.G.SetUnavailableFiltered(name, prefix, filter, reason)
}

// Remove implements Exposer.
func (x GatewayExposer) Remove(name string) { x.G.Remove(name) }

// Exposure implements Exposer.
func (x GatewayExposer) Exposure(name string) gateway.Exposure { return x.G.Exposure(name) }
