// Package importer turns the MCP server configurations of desktop clients
// into McpConnection manifests (`tether import`): the "mcpServers" format of
// Claude Desktop, Cursor and Claude Code's .mcp.json, and the "servers"
// format of VS Code (mcp.json, or "mcp" in settings.json).
//
// It owns the conversion rules of docs/contract.md §6: one manifest per server, named
// as a DNS-1123 label; credential-looking values moved into mode-0600 files
// under <out>/secrets and referenced with valueFrom.file, so the manifests
// can be committed; ${VAR} and ${env:VAR} turned into valueFrom.env; what
// cannot be converted (VS Code ${input:…} prompts, unexpanded variables,
// credentials in arguments) reported rather than guessed.
//
// A secret value is written to its file and nowhere else: never into a
// manifest, a report line or an error.
package importer
