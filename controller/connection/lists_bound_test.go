//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The bound on one list's bytes in these tests: the message bound they
// connect with (Request.MaxMessageBytes), 64 KiB.
const testListBound = 64 << 10

// bigTool is a tools/list page of one tool whose description is n bytes,
// and the cursor next.
func bigTool(name string, n int, next string) string {
	return fmt.Sprintf(`{"tools":[{"name":%q,"description":%q,"inputSchema":{"type":"object"}}],"nextCursor":%q}`,
		name, strings.Repeat("d", n), next)
}

func listTooLarge(method string) string {
	return fmt.Sprintf("%s: more than %d bytes in one list, its pages together (the bound set by --max-message-bytes)", method, testListBound)
}

// listPages bounds the bytes of a list, its pages together: pages sized as
// read (the raw road) and pages the go-sdk decoded (sized as their entries
// and cursor encode), a page that alone passes the bound, a list exactly at
// the bound.
func TestListPagesByteBound(t *testing.T) {
	entry := func(n int) *string { s := strings.Repeat("e", n); return &s }
	for _, tc := range []struct {
		name  string
		max   int64
		pages []func() ([]*string, string, int) // in order; the last repeats
		want  int                               // entries listed, -1 for the bound's error
		asked int                               // pages asked for
	}{
		{"as read, at the bound", 4000, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return []*string{entry(1)}, "2", 2000 },
			func() ([]*string, string, int) { return []*string{entry(1)}, "", 2000 },
		}, 2, 2},
		{"as read, a byte over", 4000, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return []*string{entry(1)}, "2", 2000 },
			func() ([]*string, string, int) { return []*string{entry(1)}, "", 2001 },
		}, -1, 2},
		{"as read, endless", 4000, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return nil, "again", 1000 },
		}, -1, 5},
		{"decoded, endless", 4000, []func() ([]*string, string, int){
			// 1000 bytes and two quotes, one line end: 1003 a page.
			func() ([]*string, string, int) { return []*string{entry(1000)}, "again", sizeUnread },
		}, -1, 4},
		{"decoded, the cursors count", 4000, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return []*string{nil}, strings.Repeat("c", 1500), sizeUnread },
		}, -1, 3},
		{"decoded, null entries", 4000, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return make([]*string, 1000), "", sizeUnread },
		}, -1, 1},
		{"decoded, one page alone", 4000, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return []*string{entry(4000)}, "", sizeUnread },
		}, -1, 1},
		{"decoded, under the bound", 4000, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return []*string{entry(1000), nil, entry(1000)}, "2", sizeUnread },
			func() ([]*string, string, int) { return []*string{entry(1000)}, "", sizeUnread },
		}, 3, 2},
		{"no bound", 0, []func() ([]*string, string, int){
			func() ([]*string, string, int) { return []*string{entry(5000)}, "2", 5000 },
			func() ([]*string, string, int) { return []*string{entry(5000)}, "", sizeUnread },
		}, 2, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			asked := 0
			got, err := listPages(context.Background(), maxCatalogItems, tc.max, func(_ context.Context, cursor string) ([]*string, string, int, error) {
				p := tc.pages[min(asked, len(tc.pages)-1)]
				asked++
				items, next, size := p()
				return items, next, size, nil
			})
			var tooLarge *listTooLargeError
			switch {
			case tc.want < 0 && !errors.As(err, &tooLarge):
				t.Fatalf("listPages: %d entries, %v; want the bound's error", len(got), err)
			case tc.want < 0:
				if want := fmt.Sprintf("more than %d bytes in one list, its pages together (the bound set by --max-message-bytes)", tc.max); err.Error() != want {
					t.Errorf("error %q, want %q", err, want)
				}
			case err != nil || len(got) != tc.want:
				t.Fatalf("listPages: %d entries, %v; want %d", len(got), err, tc.want)
			}
			if asked != tc.asked {
				t.Errorf("asked for %d pages, want %d", asked, tc.asked)
			}
		})
	}
}

// countedEntry counts its encodings.
type countedEntry struct{ calls *int }

func (e countedEntry) MarshalJSON() ([]byte, error) {
	*e.calls++
	return []byte(`"` + strings.Repeat("x", 998) + `"`), nil
}

// A decoded page is sized only until it passes what is left of the bound:
// a page of a million entries costs the bound's encoding, not its own. HTML
// escaping does not count ('<' is one byte as read, not six).
func TestListBytesStopsAtTheBudget(t *testing.T) {
	calls := 0
	page := make([]*countedEntry, 1000)
	for i := range page {
		page[i] = &countedEntry{calls: &calls}
	}
	if n := listBytes(page, "", 4004); n <= 4004 {
		t.Errorf("listBytes = %d, want past the budget 4004", n)
	}
	if calls != 5 {
		t.Errorf("encoded %d entries, want 5 (1,001 bytes each with its line end: four reach 4004, the fifth passes it)", calls)
	}
	// What is left of the bound is the budget: after a page of 3,500 bytes
	// as read, a decoded page is sized up to its first entry past 500.
	calls = 0
	pages := 0
	_, err := listPages(context.Background(), 0, 4000, func(context.Context, string) ([]*countedEntry, string, int, error) {
		pages++
		if pages == 1 {
			return nil, "2", 3500, nil
		}
		return page, "", sizeUnread, nil
	})
	if !errors.As(err, new(*listTooLargeError)) || calls != 1 {
		t.Errorf("listPages: %v after encoding %d entries of the second page; want the bound's error after 1", err, calls)
	}
	lt := strings.Repeat("<&>", 1000)
	if n, want := listBytes([]*string{&lt}, "next", 1<<20), int64(len(lt)+2+1+len("next")); n != want {
		t.Errorf("listBytes of 3000 HTML characters = %d, want %d", n, want)
	}
}

// On the raw road (bytes beside the go-sdk on a streamable session), a
// server that answers every cursor with another large page fails the
// connect at the bound on one list's bytes, for tools and the catalog
// alike, after as many pages as the bound holds, not 1,000; a list under
// the bound passes.
func TestListBytesBoundedBesideTheGoSDK(t *testing.T) {
	const page = 20 << 10 // the bound holds three pages, not four
	tools := `{"tools":[]}`
	for _, tc := range []struct {
		name   string
		pages  func(method, cursor string) (string, bool)
		method string // the list that fails; "" for a connect that succeeds
	}{
		{"tools", func(m, c string) (string, bool) {
			return bigTool("t"+c, page, c+"x"), m == "tools/list"
		}, "tools/list"},
		{"prompts", func(m, c string) (string, bool) {
			if m == "tools/list" {
				return tools, true
			}
			return fmt.Sprintf(`{"prompts":[{"name":"p%s","description":%q}],"nextCursor":"%sx"}`, c, strings.Repeat("d", page), c), m == "prompts/list"
		}, "prompts/list"},
		{"templates", func(m, c string) (string, bool) {
			if m == "tools/list" {
				return tools, true
			}
			return fmt.Sprintf(`{"resourceTemplates":[{"name":"r%s","uriTemplate":"file:///{x}","description":%q}],"nextCursor":"%sx"}`, c, strings.Repeat("d", page), c), m == "resources/templates/list"
		}, "resources/templates/list"},
		{"under the bound", func(m, c string) (string, bool) {
			next := c + "x"
			if len(c) == 2 {
				next = ""
			}
			return bigTool("t"+c, page, next), m == "tools/list"
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := newListServer(t, tc.pages)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Connect(ctx, Request{Name: "pages", Spec: httpSpec(ls.url, ""), Logger: testLogger(t), MaxMessageBytes: testListBound})
			if tc.method == "" {
				if err != nil {
					t.Fatalf("Connect: %v, want success", err)
				}
				defer s.Close()
				if n := len(s.Tools()); n != 3 {
					t.Errorf("listed %d tools, want 3", n)
				}
				return
			}
			if err == nil {
				_ = s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), listTooLarge(tc.method)) {
				t.Fatalf("Connect: %v, want an error with %q", err, listTooLarge(tc.method))
			}
			if n := len(ls.sent(`"method":"` + tc.method + `"`)); n != 4 {
				t.Errorf("%s sent %d times, want 4 (the page that passed the bound the last)", tc.method, n)
			}
		})
	}
}

// Where the go-sdk reads the pages (stdio here: tools beneath its list
// cache, the catalog through its ListPrompts, ListResources and
// ListResourceTemplates), the same bound holds, measured as the decoded
// entries encode.
func TestListBytesBoundedThroughTheGoSDK(t *testing.T) {
	for _, tc := range []struct{ method, page string }{
		{"tools/list", `{"tools":[{"name":"t","description":"'"$big"'","inputSchema":{"type":"object"}}],"nextCursor":"again"}`},
		{"prompts/list", `{"prompts":[{"name":"p","description":"'"$big"'"}],"nextCursor":"again"}`},
		{"resources/list", `{"resources":[{"name":"r","uri":"file:///r","description":"'"$big"'"}],"nextCursor":"again"}`},
		{"resources/templates/list", `{"resourceTemplates":[{"name":"r","uriTemplate":"file:///{x}","description":"'"$big"'"}],"nextCursor":"again"}`},
	} {
		t.Run(tc.method, func(t *testing.T) {
			script := `big=$(printf '%20000s' '' | tr ' ' d)
while IFS= read -r line; do
  case "$line" in *'"id":'*) ;; *) continue ;; esac
  id=${line#*'"id":'}; id=${id%%[!0-9]*}
  case "$line" in
  *'"method":"initialize"'*) r='{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"prompts":{},"resources":{}},"serverInfo":{"name":"pages","version":"1"}}' ;;
  *'"method":"` + tc.method + `"'*) r='` + tc.page + `' ;;
  *'"method":"tools/list"'*) r='{"tools":[]}' ;;
  *'"method":"prompts/list"'*) r='{"prompts":[]}' ;;
  *'"method":"resources/list"'*) r='{"resources":[]}' ;;
  *) r='{"resourceTemplates":[]}' ;;
  esac
  printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$r"
done`
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Connect(ctx, Request{Name: "pages", Spec: shSpec(script), Logger: testLogger(t), MaxMessageBytes: testListBound})
			if err == nil {
				_ = s.Close()
			}
			if err == nil || !strings.Contains(err.Error(), listTooLarge(tc.method)) {
				t.Fatalf("Connect: %v, want an error with %q", err, listTooLarge(tc.method))
			}
		})
	}
}

// A 2026-07-28 session lists its tools through the go-sdk's sending
// handler (rawSend); a server whose pages pass the bound together fails
// the connect there too.
func TestListBytesBoundedOn2026Sessions(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "big-2026", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	for i := range 10 {
		srv.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), Description: strings.Repeat("d", 10<<10), InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{}, nil
			})
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	hs := httptest.NewServer(h)
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// The ten tools, 100 KiB together, pass with the default bound.
	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 || len(s.Tools()) != 10 {
		t.Fatalf("negotiated %s and listed %d tools; want %s and 10", v, len(s.Tools()), protocol2026)
	}
	s2, err := Connect(ctx, Request{Name: "big", Spec: httpSpec(hs.URL, ""), Logger: testLogger(t), MaxMessageBytes: testListBound})
	if err == nil {
		_ = s2.Close()
	}
	if err == nil || !strings.Contains(err.Error(), listTooLarge("tools/list")) {
		t.Fatalf("Connect: %v, want an error with %q", err, listTooLarge("tools/list"))
	}
}

// A tool that binds parameters to headers makes refreshTools list the tools
// again through the go-sdk's ListTools (its validation sees them): that
// road keeps the bound too. The server answers the first tools/list (beneath
// the go-sdk's client) with one small page, every later one with pages
// that pass the bound together.
func TestListBytesBoundedThroughListTools(t *testing.T) {
	regional := &mcp.Tool{Name: "regional", InputSchema: map[string]any{
		"type":       "object",
		"properties": map[string]any{"region": map[string]any{"type": "string", "x-mcp-header": "Region"}},
	}}
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	small := mcp.NewServer(&mcp.Implementation{Name: "headers", Version: "1"}, nil)
	small.AddTool(regional, handler)
	big := mcp.NewServer(&mcp.Implementation{Name: "headers", Version: "1"}, &mcp.ServerOptions{PageSize: 2})
	big.AddTool(regional, handler)
	for i := range 10 {
		big.AddTool(&mcp.Tool{Name: fmt.Sprintf("t%d", i), Description: strings.Repeat("d", 10<<10), InputSchema: map[string]any{"type": "object"}}, handler)
	}
	// The go-sdk asks for the server more than once a request: which one
	// answers is decided once, as the request comes in.
	h := mcp.NewStreamableHTTPHandler(func(r *http.Request) *mcp.Server {
		if r.Header.Get("X-Test-Big") != "" {
			return big
		}
		return small
	}, &mcp.StreamableHTTPOptions{Stateless: true})
	var lists atomic.Int64
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Mcp-Method") == "tools/list" && lists.Add(1) > 1 {
			r.Header.Set("X-Test-Big", "1")
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, Request{Name: "headers", Spec: httpSpec(hs.URL, ""), Logger: testLogger(t), MaxMessageBytes: testListBound})
	if err == nil {
		v := s.Server().ProtocolVersion
		_ = s.Close()
		if v < protocol2026 {
			t.Skipf("negotiated %s: x-mcp-header needs %s", v, protocol2026)
		}
	}
	if err == nil || !strings.Contains(err.Error(), listTooLarge("tools/list")) {
		t.Fatalf("Connect: %v, want an error with %q", err, listTooLarge("tools/list"))
	}
}

// lockedBuffer is a log sink tests read while the session writes to it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A refresh after list_changed whose list passes the bound fails and
// keeps the lists the session had; the session stays up.
func TestListRefreshOverTheBoundKeepsTheLists(t *testing.T) {
	small := func(m, c string) (string, bool) {
		switch m {
		case "tools/list":
			return `{"tools":[{"name":"a","inputSchema":{"type":"object"}}]}`, true
		case "prompts/list":
			return `{"prompts":[{"name":"p"}]}`, true
		}
		return `{"resources":[],"resourceTemplates":[]}`, true
	}
	for _, tc := range []struct{ name, method string }{
		{"tools", "tools/list"},
		{"prompts", "prompts/list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := newListServer(t, small)
			var logs lockedBuffer
			var told atomic.Int64
			s := connect(t, Request{Spec: httpSpec(ls.url, ""), MaxMessageBytes: testListBound,
				Logger:         slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
				OnToolsChanged: func() { told.Add(1) }})
			if got := listedNames(s); got != "a p" {
				t.Fatalf("listed %q, want %q", got, "a p")
			}
			ls.mu.Lock()
			ls.pages = func(m, c string) (string, bool) {
				if m != tc.method {
					if m == "tools/list" {
						// A real change, so that only the bound keeps it out.
						return `{"tools":[{"name":"b","inputSchema":{"type":"object"}}]}`, true
					}
					return small(m, c)
				}
				return fmt.Sprintf(`{%q:[{"name":"x%s","description":%q,"inputSchema":{}}],"nextCursor":"%sx"}`,
					strings.TrimSuffix(m, "/list"), c, strings.Repeat("d", 20<<10), c), true
			}
			ls.mu.Unlock()
			ls.srv.AddTool(&mcp.Tool{Name: "trigger", InputSchema: map[string]any{"type": "object"}},
				func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
					return &mcp.CallToolResult{}, nil
				})
			waitUntil(t, "the refresh to fail at the bound", func() bool {
				return strings.Contains(logs.String(), "refreshing tools after list_changed") &&
					strings.Contains(logs.String(), listTooLarge(tc.method))
			})
			if err := s.Err(); err != nil {
				t.Errorf("the session ended: %v", err)
			}
			want, wantTold := "a p", int64(0)
			if tc.method == "prompts/list" {
				// The tools changed within the bound and were replaced, the
				// prompts kept: the change is told all the same.
				want, wantTold = "b p", 1
			}
			if got := listedNames(s); got != want {
				t.Errorf("after the failed refresh, listed %q, want %q", got, want)
			}
			if n := told.Load(); n != wantTold {
				t.Errorf("OnToolsChanged called %d times, want %d", n, wantTold)
			}
			if n := len(ls.sent(`"method":"` + tc.method + `"`)); n != 5 {
				t.Errorf("%s sent %d times, want 5 (one at connect, four to pass the bound)", tc.method, n)
			}
		})
	}
}

// benchTools is a tools/list page of n tools of the shape real servers
// list: a description, an object schema with a few typed properties.
func benchTools(b *testing.B, n int) []byte {
	b.Helper()
	var tools []string
	for i := range n {
		tools = append(tools, fmt.Sprintf(`{"name":"tool_%d","description":"Does thing %d to the repository: reads the files it names, and answers with what it found, one line each.","inputSchema":{"type":"object","properties":{"path":{"type":"string","description":"the file"},"limit":{"type":"integer","minimum":1,"maximum":100},"recursive":{"type":"boolean"}},"required":["path"]},"annotations":{"readOnlyHint":true}}`, i, i))
	}
	return []byte(`{"tools":[` + strings.Join(tools, ",") + `]}`)
}

// What sizing a page the go-sdk decoded costs (listBytes), beside what
// decoding it costs (the least the go-sdk spends on it, with no 32 KiB
// buffer per message). On 2 cores, 50 tools (18 KB): sizing ~230 µs, 50 KB
// and 1,551 allocations; decoding ~300 µs, 116 KB and 2,167. The schemas
// (map[string]any: keys sorted, values boxed) are most of both.
func BenchmarkListBytes(b *testing.B) {
	page := benchTools(b, 50)
	var res mcp.ListToolsResult
	if err := json.Unmarshal(page, &res); err != nil {
		b.Fatal(err)
	}
	b.Run("size", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			if n := listBytes(res.Tools, "", DefaultMaxMessageBytes); n < int64(len(page))/2 {
				b.Fatalf("listBytes = %d of a %d-byte page", n, len(page))
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(page)))
		for b.Loop() {
			var r mcp.ListToolsResult
			if err := json.Unmarshal(page, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// On a 2026-07-28 session the go-sdk's client keeps every list page it is
// handed, keyed by cursor, until that list's own list_changed: the catalog
// lists go beneath that cache, so that pages a server gives fresh cursors
// do not pile up there refresh after refresh (each within the bound on one
// list), and what a refresh replaced is let go.
func TestListRefreshesHoldNoStalePages(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "fresh-cursors", Version: "1"}, nil)
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	// prompts/list: three pages a list, each cursor fresh.
	var fresh atomic.Int64
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method != "prompts/list" {
				return next(ctx, method, req)
			}
			n := fresh.Add(1)
			res := &mcp.ListPromptsResult{Prompts: []*mcp.Prompt{{Name: fmt.Sprintf("p%d", n), Description: strings.Repeat("d", 1<<10)}}}
			if c := req.GetParams().(*mcp.ListPromptsParams).Cursor; strings.Count(c, "/") < 2 {
				res.NextCursor = fmt.Sprintf("%s/%d", c, n)
			}
			return res, nil
		}
	})
	s := connectModern(t, srv, Request{})
	const refreshes = 20
	var held []weak.Pointer[mcp.Prompt]
	for range refreshes {
		if _, err := s.refreshCatalog(context.Background()); err != nil {
			t.Fatalf("refreshCatalog: %v", err)
		}
		ps := s.Prompts()
		if len(ps) != 3 {
			t.Fatalf("listed %d prompts, want 3", len(ps))
		}
		for _, p := range ps {
			held = append(held, weak.Make(p))
		}
	}
	alive := aliveAfterGC(held)
	// The last refresh's three, which the session holds. (A connect may
	// list through the cache before the go-sdk's _meta is known; no
	// refresh does, and held has only the refreshes' prompts.)
	if alive != 3 {
		t.Errorf("%d of the %d prompts the refreshes listed are still held, want 3 (the last list's)", alive, len(held))
	}
}
