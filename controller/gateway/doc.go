// Package gateway is tether's aggregated MCP server (DESIGN §5): one shared
// go-sdk server that exposes the tools of every Connected connection as
// <toolPrefix>_<tool>, routes tools/call to the backend session that owns the
// tool, and serves it over streamable HTTP (/mcp) or stdin/stdout.
//
// It owns the exposed tool set, the routing table and the collision report.
// It does not connect, health-check or reconnect backends: the reconciler
// tells it what is connected (Set, SetUnavailable, Remove) and hands it live
// sessions through the small Backend interface. It creates no Prometheus
// metrics itself: call outcomes go to Options.ObserveCall.
package gateway
