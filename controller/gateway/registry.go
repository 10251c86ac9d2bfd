package gateway

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The gateway answers tools/list and tools/call from its own tables (the
// exposed set and the routing table that Set maintains) instead of
// registering every exposed tool with the go-sdk server. Server.AddTool
// re-decodes each tool's schemas to validate them, each decode with a fresh
// 32 KiB buffer: at 1,000 connections of 5 tools that was ~430 MB allocated
// while starting, half of everything tether allocated, to fill a registry
// that only repeated the gateway's own.
//
// The go-sdk server keeps two kinds of tools: a sentinel, re-added whenever
// the exposed set changes so that the server sends its (debounced)
// notifications/tools/list_changed to every session; and the rare exposed
// tool that binds parameters to headers (x-mcp-header), so that the go-sdk's
// transport checks an incoming call's Mcp-Param-* headers against it as it
// did before. Neither is ever listed or called through the go-sdk: tools/list
// and tools/call stop at serveTools.

// sentinelTool is what the go-sdk server holds so that re-adding it sends
// tools/list_changed. No exposed name can be it: serveTools answers every
// name from the gateway's own tables.
var sentinelTool = &mcp.Tool{Name: "tether.tools-changed", InputSchema: objectSchema}

func sentinelHandler(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return nil, callError("not a tool") // unreachable: serveTools answers tools/call
}

// serveTools answers tools/list and tools/call for the gateway's tools.
// interceptDown, outside it, has answered calls to tools of connections that
// are not connected.
func (g *Gateway) serveTools(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		// A client has come: names served from now on are kept by whoever
		// serves them first (gateway.go, settle).
		g.settle()
		switch method {
		case "tools/list":
			lr, ok := req.(*mcp.ListToolsRequest)
			if !ok {
				break
			}
			return g.listTools(lr.Params)
		case methodCallTool:
			cr, ok := req.(*mcp.CallToolRequest)
			if !ok || cr.Params == nil {
				break
			}
			if _, live := g.routes.Load().route(cr.Params.Name); !live {
				// The go-sdk's answer to an unknown tool, word for word.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("unknown tool %q", cr.Params.Name)}
			}
			res, err := g.callTool(ctx, cr)
			if err != nil || res == nil {
				return nil, err
			}
			if res.Content == nil {
				// As the go-sdk server does: "content" is never null. This
				// middleware answers in its place, so it does it too.
				cp := *res
				cp.Content = []mcp.Content{}
				res = &cp
			}
			return res, nil
		}
		return next(ctx, method, req)
	}
}

// listPageSize is the go-sdk server's page size, so that clients see the
// same pagination as before.
const listPageSize = mcp.DefaultPageSize

// listTools answers one page of tools/list, sorted by name; the cursor names
// the last tool of the previous page.
func (g *Gateway) listTools(p *mcp.ListToolsParams) (*mcp.ListToolsResult, error) {
	tools := g.listing()
	start := 0
	if p != nil && p.Cursor != "" {
		after, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		if err != nil {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid cursor"}
		}
		start, _ = slices.BinarySearchFunc(tools, string(after), func(t *mcp.Tool, name string) int {
			return strings.Compare(t.Name, name)
		})
		if start < len(tools) && tools[start].Name == string(after) {
			start++
		}
	}
	end := min(start+listPageSize, len(tools))
	res := &mcp.ListToolsResult{Tools: append([]*mcp.Tool{}, tools[start:end]...)}
	res.CacheScope = "public" // what the go-sdk server answers by default
	if end < len(tools) {
		res.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(tools[end-1].Name))
	}
	return res, nil
}

// listing returns the exposed tools sorted by name, built on the first list
// after a change: a cold start of 1,000 connections changes the set 1,000
// times and lists it at most as often as clients ask.
func (g *Gateway) listing() []*mcp.Tool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.listed == nil {
		tools := make([]*mcp.Tool, 0, len(g.exposed))
		for _, et := range g.exposed {
			tools = append(tools, et.tool)
		}
		slices.SortFunc(tools, func(a, b *mcp.Tool) int { return strings.Compare(a.Name, b.Name) })
		g.listed = tools
	}
	return g.listed
}

// publishLocked brings the go-sdk server in line with a change of the
// exposed set (already applied to g.exposed) and tells the sessions.
func (g *Gateway) publishLocked(removed []*exposedTool, added []claim) {
	g.listed = nil
	var sdkRemove []string
	for _, et := range removed {
		if et.inSDK {
			sdkRemove = append(sdkRemove, et.tool.Name)
		}
	}
	if len(sdkRemove) > 0 {
		g.server.RemoveTools(sdkRemove...)
	}
	for _, c := range added {
		for _, fix := range c.et.fixes {
			g.log.Warn("gateway normalised a tool definition", "connection", c.st.name, "tool", c.et.tool.Name, "change", fix)
		}
		if c.et.bindsHeaders {
			g.addTool(c.st.name, c.et)
			c.et.inSDK = true
		}
	}
	// Re-adding the sentinel makes the go-sdk send tools/list_changed to
	// every session, debounced. With no session there is nobody to tell,
	// and AddTool would only decode the sentinel's schema for nothing: a
	// session that starts later lists the tools anyway.
	for range g.server.Sessions() {
		g.server.AddTool(sentinelTool, sentinelHandler)
		break
	}
}
