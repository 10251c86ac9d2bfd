// Package controller keeps MCP connections in the state that a directory of
// McpConnection manifests declares: it watches and loads the manifests into a
// desired-state store, feeds a rate-limited workqueue, reconciles each
// connection (connect, health-check, reconnect with backoff) and writes status
// files and metrics.
//
// It owns the desired-state store, the connection table and the status writer;
// it does not decode manifests (package spec does) nor speak MCP itself
// (package controller/connection does).
package controller
