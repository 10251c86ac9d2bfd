//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// pagingServer is an HTTP MCP server whose /paging answers every tools/list
// with a page of four tools of 1 MiB each and a fresh cursor, page after
// page; /mcp is a real go-sdk server with a tool hello. It counts the lists
// it was asked for and the big pages it sent.
//
// After 64 big pages in one list (256 MiB) it goes on with empty pages and
// fresh cursors: enough for a tether without the bound on one list's bytes
// to hold far more than the test allows, not enough to take the machine
// down (1,000 pages of 4 MiB would be 4 GiB).
func pagingServer(t *testing.T) (hs *httptest.Server, lists, bigPages *atomic.Int64) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "paging", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "hello", InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
		})
	inner := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	description := strings.Repeat("d", 1<<20)
	lists, bigPages = new(atomic.Int64), new(atomic.Int64)
	var fresh atomic.Int64
	mux := http.NewServeMux()
	mux.Handle("/mcp", inner)
	mux.HandleFunc("/paging", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			inner.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &msg)
		if msg.Method != "tools/list" {
			r.Body = io.NopCloser(bytes.NewReader(body))
			inner.ServeHTTP(w, r)
			return
		}
		// The cursor is the page's number in its list, and a fresh part.
		page := 0
		if n, _, ok := strings.Cut(msg.Params.Cursor, "-"); ok {
			page, _ = strconv.Atoi(n)
		} else {
			lists.Add(1)
		}
		next := fmt.Sprintf("%d-%d", page+1, fresh.Add(1))
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[`, msg.ID)
		if page < 64 {
			bigPages.Add(1)
			for i := range 4 {
				if i > 0 {
					io.WriteString(w, ",")
				}
				fmt.Fprintf(w, `{"name":"big_%d_%d","description":"%s","inputSchema":{"type":"object"}}`, page, i, description)
			}
		}
		fmt.Fprintf(w, `],"nextCursor":%q}}`, next)
	})
	hs = httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return hs, lists, bigPages
}

// TestFaultListPagedWithoutEnd: a server that answers every cursor of
// tools/list with another 4 MiB page and a fresh cursor
// (docs/reliability.md, row H4). Each page is within --max-message-bytes;
// the list passes the bound on one list's bytes (the same 16 MiB, the pages
// together) at its fifth page: the connect fails naming the bound
// (lastError, Reconnecting, backoff), tether's peak RSS stays under 150
// MB, and the other connection of the run stays Connected and callable
// through the gateway.
func TestFaultListPagedWithoutEnd(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	hs, lists, bigPages := pagingServer(t)
	dir := t.TempDir()
	paging, ok := filepath.Join(dir, "paging.yaml"), filepath.Join(dir, "ok.yaml")
	writeFile(t, paging, httpManifest("paging", hs.URL+"/paging", "streamable", quick))
	writeFile(t, ok, httpManifest("ok", hs.URL+"/mcp", "streamable", quick))
	tt, ep := startTetherServing(t, dir)

	const want = "tools/list: more than 16777216 bytes in one list, its pages together (the bound set by --max-message-bytes)"
	st := waitStatus(t, paging, "paging", 60*time.Second, "Reconnecting after 3 attempts over the bound", func(st spec.ConnectionStatus) bool {
		return st.Phase == spec.PhaseReconnecting && st.Attempt >= 3 && strings.Contains(st.LastError, want)
	})
	t.Logf("lastError: %s", st.LastError)
	// Each list stopped at the page that passed the bound: five of 4 MiB
	// (the fifth read whole, within the message bound), not 64.
	if n, l := bigPages.Load(), lists.Load(); n > 5*l {
		t.Errorf("the server sent %d big pages in %d lists, want at most 5 a list", n, l)
	}

	waitStatus(t, ok, "ok", 30*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)
	if res, err := call(s, 10*time.Second, "ok_hello", nil); err != nil || textOf(res) != "hello" {
		t.Errorf("ok_hello through the gateway = %q, want hello", callError(res, err))
	}

	peak := peakRSSMB(t, tt.cmd.Process.Pid)
	t.Logf("tether's peak RSS (VmHWM) after %d attempts at the paging server: %.1f MB", st.Attempt, peak)
	if peak >= 150 {
		t.Errorf("tether's peak RSS is %.1f MB, want under 150 MB", peak)
	}
}
