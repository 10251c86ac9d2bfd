//go:build unix

package connection

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// listServer is a go-sdk server whose list answers come from pages: the
// answer to method at cursor is pages(method, cursor), a result's JSON (or
// an error object's, when it starts with `{"code"`). A nil pages answers
// through the go-sdk; hang, when set, makes the server never answer list
// requests whose method it returns true for. It records every POST body.
type listServer struct {
	url   string
	srv   *mcp.Server // AddTool sends tools/list_changed
	pages func(method, cursor string) (string, bool)
	hang  func(method string) bool

	mu     sync.Mutex
	bodies []string
}

func newListServer(t *testing.T, pages func(method, cursor string) (string, bool)) *listServer {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "pages", Version: "1"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Prompts:   &mcp.PromptCapabilities{},
			Resources: &mcp.ResourceCapabilities{},
		},
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	ls := &listServer{srv: srv, pages: pages}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			h.ServeHTTP(w, r)
			return
		}
		body, _ := io.ReadAll(r.Body)
		ls.mu.Lock()
		ls.bodies = append(ls.bodies, string(body))
		hang, pages := ls.hang, ls.pages
		ls.mu.Unlock()
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor string `json:"cursor"`
			} `json:"params"`
		}
		_ = json.Unmarshal(body, &m)
		if strings.HasSuffix(m.Method, "/list") && hang != nil && hang(m.Method) {
			<-r.Context().Done()
			return
		}
		if strings.HasSuffix(m.Method, "/list") && pages != nil {
			if res, ok := pages(m.Method, m.Params.Cursor); ok {
				field := "result"
				if strings.HasPrefix(res, `{"code"`) {
					field = "error"
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,%q:%s}`, m.ID, field, res)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)
	ls.url = hs.URL
	return ls
}

// sent returns the bodies of the POSTs that contain s.
func (ls *listServer) sent(s string) []string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	var out []string
	for _, b := range ls.bodies {
		if strings.Contains(b, s) {
			out = append(out, b)
		}
	}
	return out
}

func connectErr(t *testing.T, url string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := Connect(ctx, Request{Name: "pages", Spec: httpSpec(url, ""), Logger: testLogger(t)})
	if err == nil {
		_ = s.Close()
	}
	return err
}

// On a streamable session, the lists are sent beside the go-sdk
// (rawPage), and they follow every cursor to the end, dropping null
// entries, for tools and the catalog alike.
func TestListPagesBesideTheGoSDK(t *testing.T) {
	ls := newListServer(t, func(method, cursor string) (string, bool) {
		switch method + " " + cursor {
		case "tools/list ":
			return `{"tools":[{"name":"a","inputSchema":{"type":"object"}},null],"nextCursor":"2"}`, true
		case "tools/list 2":
			return `{"tools":[],"nextCursor":"3"}`, true
		case "tools/list 3":
			return `{"tools":[{"name":"b","inputSchema":{"type":"object"}}],"nextCursor":null}`, true
		case "prompts/list ":
			return `{"prompts":[{"name":"p1"}],"nextCursor":"x\"y"}`, true
		case `prompts/list x"y`:
			return `{"prompts":[null,{"name":"p2"}]}`, true
		case "resources/list ":
			return `{"resources":[{"name":"r","uri":"file:///r"}]}`, true
		case "resources/templates/list ":
			return `{"resourceTemplates":[{"name":"rt","uriTemplate":"file:///{x}"}]}`, true
		}
		return `{"code":-32602,"message":"bad cursor ` + cursor + `"}`, true
	})
	s := connect(t, Request{Spec: httpSpec(ls.url, "")})
	if got, want := listedNames(s), "a b p1 p2 r rt"; got != want {
		t.Errorf("listed %q, want %q", got, want)
	}
	for _, method := range []string{"tools/list", "prompts/list", "resources/list", "resources/templates/list"} {
		bodies := ls.sent(`"method":"` + method + `"`)
		if len(bodies) == 0 {
			t.Errorf("%s: never sent", method)
		}
		for _, b := range bodies {
			if !strings.Contains(b, `"id":"tether-list-`) {
				t.Errorf("%s not sent beside the go-sdk: %s", method, b)
			}
		}
	}
	if n := len(ls.sent(`"cursor":"x\"y"`)); n != 1 {
		t.Errorf("the cursor with a quote was sent %d times as JSON, want once", n)
	}
}

// A list whose answer is not a list fails the connect, naming what is
// wrong; endless cursors and too many entries meet their bounds; a catalog
// list the server refuses is no catalog, not a failure.
func TestListPagesRefuseBadAnswers(t *testing.T) {
	tools := `{"tools":[]}`
	for _, tc := range []struct {
		name  string
		pages func(method, cursor string) (string, bool)
		want  string // "" for a connect that succeeds
	}{
		{"not an object", func(m, _ string) (string, bool) { return `[1]`, m == "tools/list" }, "invalid result"},
		{"tools not a list", func(m, _ string) (string, bool) { return `{"tools":5}`, m == "tools/list" }, "invalid result: tools"},
		{"nested deeper than the go-sdk reads", func(m, _ string) (string, bool) {
			deep := strings.Repeat(`{"items":`, wire.SDKMaxDepth) + `{}` + strings.Repeat(`}`, wire.SDKMaxDepth)
			return `{"tools":[{"name":"a","inputSchema":{"type":"object","properties":{"x":` + deep + `}}}]}`, m == "tools/list"
		}, fmt.Sprintf("nested deeper than %d levels", wire.SDKMaxDepth)},
		{"cursor not a string", func(m, _ string) (string, bool) { return `{"tools":[],"nextCursor":5}`, m == "tools/list" }, "invalid result: nextCursor"},
		{"endless cursors", func(m, c string) (string, bool) {
			return `{"tools":[],"nextCursor":"` + c + `x"}`, m == "tools/list"
		}, fmt.Sprintf("more than %d pages", maxListPages)},
		{"too many tools", func(m, c string) (string, bool) {
			if c == "" {
				return `{"tools":[` + strings.Repeat(`{"name":"t","inputSchema":{"type":"object"}},`, maxCatalogItems-1) +
					`{"name":"t","inputSchema":{"type":"object"}}],"nextCursor":"more"}`, m == "tools/list"
			}
			return `{"tools":[{"name":"last","inputSchema":{"type":"object"}}]}`, m == "tools/list"
		}, fmt.Sprintf("more than %d entries", maxCatalogItems)},
		{"too many prompts", func(m, c string) (string, bool) {
			if m == "tools/list" {
				return tools, true
			}
			if c == "" {
				return `{"prompts":[` + strings.Repeat(`{"name":"p"},`, maxCatalogItems-1) + `{"name":"p"}],"nextCursor":"more"}`, m == "prompts/list"
			}
			return `{"prompts":[{"name":"last"}]}`, m == "prompts/list"
		}, fmt.Sprintf("more than %d entries", maxCatalogItems)},
		{"refused catalog", func(m, _ string) (string, bool) {
			if m == "tools/list" {
				return tools, true
			}
			return `{"code":-32601,"message":"no such list"}`, true
		}, ""},
		{"failed tools", func(m, _ string) (string, bool) {
			return `{"code":-32000,"message":"broken"}`, m == "tools/list"
		}, "broken"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ls := newListServer(t, tc.pages)
			err := connectErr(t, ls.url)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Connect: %v, want success", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Connect: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// A list the caller stops waiting for is cancelled on the server, by the
// raw request's own id.
func TestListPagesCancelled(t *testing.T) {
	ls := newListServer(t, nil)
	s := connect(t, Request{Spec: httpSpec(ls.url, "")})
	ls.mu.Lock()
	ls.hang = func(method string) bool { return method == "tools/list" }
	ls.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := s.RefreshTools(ctx); err == nil {
		t.Fatal("RefreshTools of a list never answered: no error")
	}
	lists := ls.sent(`"method":"tools/list"`)
	var id struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(lists[len(lists)-1]), &id); err != nil || !strings.HasPrefix(id.ID, "tether-list-") {
		t.Fatalf("last tools/list %s: not a raw list (%v)", lists[len(lists)-1], err)
	}
	if n := len(ls.sent(`"method":"notifications/cancelled","params":{"requestId":"` + id.ID + `"`)); n != 1 {
		t.Errorf("the server was told %d times that %s was cancelled, want once", n, id.ID)
	}
}

// A 2026-07-28 session lists and calls through the go-sdk, which adds each
// request's _meta (SEP-2575), also when its server gave it a session id:
// sent as bytes, the lists lacked that _meta and the server refused them,
// failing the connect, and so it refused the gateway's fast calls.
func TestNoRawRequestsOn2026Sessions(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "sessions-2026", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{Name: "t", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	srv.AddPrompt(&mcp.Prompt{Name: "p"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
		return &mcp.GetPromptResult{}, nil
	})
	// Stateless: the go-sdk negotiates 2026-07-28 (server/discover) there;
	// the session id is the server's own.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{Stateless: true})
	var mu sync.Mutex
	var raw []string
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"id":"tether-list-`)) {
			mu.Lock()
			raw = append(raw, string(body))
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		w.Header().Set("Mcp-Session-Id", "s-2026")
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	s := connect(t, Request{Spec: httpSpec(hs.URL, "")})
	if v := s.Server().ProtocolVersion; v < protocol2026 || s.cs.ID() == "" {
		t.Fatalf("negotiated %s with session id %q: want %s with one", v, s.cs.ID(), protocol2026)
	}
	if len(s.Tools()) != 1 || len(s.Prompts()) != 1 {
		t.Errorf("listed %d tools and %d prompts, want one each", len(s.Tools()), len(s.Prompts()))
	}
	if v, ok := s.RawProtocolVersion(); ok {
		t.Errorf("RawProtocolVersion = %s, true: the gateway would send its calls as bytes", v)
	}
	if _, _, err := s.CallToolRaw(context.Background(), "t", nil, nil); err == nil || !strings.Contains(err.Error(), "cannot carry raw requests") {
		t.Errorf("CallToolRaw: %v, want it refused before it is sent", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(raw) != 0 {
		t.Errorf("lists sent as bytes on a 2026-07-28 session: %q", raw)
	}
}

// Where the lists go through the go-sdk (here stdio), they keep the bounds
// and the null rule of the lists sent as bytes: a null entry is no entry,
// and a list whose cursors never end fails at maxListPages pages rather
// than holding the connect until its deadline.
func TestListPagesThroughTheGoSDK(t *testing.T) {
	for _, tc := range []struct {
		name, resources string
		want            string // "" for a connect that succeeds
	}{
		{"null entries", `{"resources":[null,{"name":"r","uri":"file:///r"}]}`, ""},
		{"endless cursors", `{"resources":[],"nextCursor":"again"}`, fmt.Sprintf("more than %d pages", maxListPages)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A stdio server in sh: the answer to each request by its method.
			script := `while IFS= read -r line; do
  case "$line" in *'"id":'*) ;; *) continue ;; esac
  id=${line#*'"id":'}; id=${id%%[!0-9]*}
  case "$line" in
  *'"method":"initialize"'*) r='{"protocolVersion":"2025-06-18","capabilities":{"tools":{},"prompts":{},"resources":{}},"serverInfo":{"name":"pages","version":"1"}}' ;;
  *'"method":"tools/list"'*) r='{"tools":[null,{"name":"t","inputSchema":{"type":"object"}}]}' ;;
  *'"method":"prompts/list"'*) r='{"prompts":[{"name":"p"},null]}' ;;
  *'"method":"resources/list"'*) r='` + tc.resources + `' ;;
  *) r='{}' ;;
  esac
  printf '{"jsonrpc":"2.0","id":%s,"result":%s}\n' "$id" "$r"
done`
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			s, err := Connect(ctx, Request{Name: "pages", Spec: shSpec(script), Logger: testLogger(t)})
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("Connect: %v, want an error with %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			t.Cleanup(func() { _ = s.Close() })
			if got, want := listedNames(s), "t p r"; got != want {
				t.Errorf("listed %q, want %q", got, want)
			}
		})
	}
}

// listedNames is the names of the session's tools, prompts, resources and
// templates, in that order.
func listedNames(s *Session) string {
	var names []string
	for _, tl := range s.Tools() {
		names = append(names, tl.Name)
	}
	for _, p := range s.Prompts() {
		names = append(names, p.Name)
	}
	for _, r := range s.Resources() {
		names = append(names, r.Name)
	}
	for _, r := range s.ResourceTemplates() {
		names = append(names, r.Name)
	}
	return strings.Join(names, " ")
}
