// Package owner makes one tether the owner of a directory of manifests
// (docs/contract.md, "One owner per directory"): an exclusive OS lock on
// the state directory held for as long as the owner runs (Lock), a record
// of who owns it for people and error messages (Record), and a local
// control socket in the state directory (a Unix socket, a named pipe on
// Windows) whose file permissions are its authentication (Listen, Dial).
// The socket serves the owner's API (Server: what the owner watches, and
// MCP sessions for bridges) and, beside it, the gateway's /mcp handler.
//
// The lock decides who owns a directory, never the record: a record left by
// a dead owner names a pid that is gone, and Dial/Query reach only a live
// owner. The package links no MCP SDK and no daemon package, so that the
// command line's readers (tether get, tether connect) can use it.
package owner
