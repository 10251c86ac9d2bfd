//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// mcpHandler is a real MCP server (go-sdk, streamable HTTP) with one tool.
func mcpHandler() http.Handler {
	s := mcp.NewServer(&mcp.Implementation{Name: "in-test", Version: "1"}, nil)
	s.AddTool(&mcp.Tool{Name: "hello", InputSchema: json.RawMessage(`{"type":"object"}`)}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello"}}}, nil
	})
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
}

// TestFaultHTTPAnswers: HTTP servers that answer with an error status,
// redirect, or carry the credentials tether sends (docs/reliability.md, rows
// S15, S17, X2). Each shows the status code in lastError, retries with backoff,
// and never shows the header value.
func TestFaultHTTPAnswers(t *testing.T) {
	t.Parallel() // beside TestFaultHangs, which waits out the connect timeout
	const token = "Bearer s3cret-http-t0ken"
	secretFile := filepath.Join(t.TempDir(), "bearer")
	must(t, os.WriteFile(secretFile, []byte(token+"\n"), 0o600))

	backend := mcpHandler()
	// The real server wants the token, and says what it got when it is wrong.
	authed := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != token {
			http.Error(w, "bad credentials: "+got, http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	})
	mux := http.NewServeMux()
	mux.Handle("/mcp", authed)
	mux.HandleFunc("/unauthorized", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="test"`)
		http.Error(w, "token "+r.Header.Get("Authorization")+" is not valid here", http.StatusUnauthorized)
	})
	mux.HandleFunc("/broken", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "internal error while handling "+r.Header.Get("Authorization"), http.StatusInternalServerError)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/mcp", http.StatusPermanentRedirect)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/loop", http.StatusTemporaryRedirect)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	// The same server under another host name: a redirect there must not
	// carry the credentials along.
	otherHost := "http://localhost:" + u.Port()
	mux.HandleFunc("/elsewhere", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherHost+"/mcp", http.StatusTemporaryRedirect)
	})

	header := fmt.Sprintf("    headers:\n      - name: Authorization\n        valueFrom: {file: %s}\n", secretFile)
	rows := []struct {
		row, name, path string
		phase           spec.Phase
		lastError       []string // substrings of lastError
	}{
		{"S15 401", "unauthorized", "/unauthorized", spec.PhaseReconnecting, []string{"Unauthorized"}},
		{"S15 404", "not-found", "/nowhere", spec.PhaseReconnecting, []string{"Not Found"}},
		{"S15 500", "broken", "/broken", spec.PhaseReconnecting, []string{"Internal Server Error"}},
		{"S17 redirect on the same host", "moved", "/moved", spec.PhaseConnected, nil},
		{"S17 redirect loop", "loop", "/loop", spec.PhaseReconnecting, []string{"redirects"}},
		{"S17 redirect to another host drops the credentials", "elsewhere", "/elsewhere", spec.PhaseReconnecting, []string{"Unauthorized"}},
		{"S15 the right server with the right token", "right", "/mcp", spec.PhaseConnected, nil},
	}
	dir := t.TempDir()
	for _, r := range rows {
		writeFile(t, filepath.Join(dir, r.name+".yaml"), httpManifest(r.name, srv.URL+r.path, "streamable", header+quick))
	}
	tt := startTether(t, dir)
	for _, r := range rows {
		t.Run(r.row, func(t *testing.T) {
			m := filepath.Join(dir, r.name+".yaml")
			st := waitStatus(t, m, r.name, 15*time.Second, string(r.phase), func(st spec.ConnectionStatus) bool {
				return st.Phase == r.phase && (r.phase == spec.PhaseConnected || st.Attempt >= 2)
			})
			for _, want := range r.lastError {
				if !strings.Contains(st.LastError, want) {
					t.Errorf("lastError %q lacks %q", st.LastError, want)
				}
			}
			t.Logf("%s: %s", st.Phase, st.LastError)
			if r.phase == spec.PhaseConnected && (st.Tools == nil || st.Tools.Count != 1) {
				t.Errorf("tools = %+v, want the backend's one tool", st.Tools)
			}
		})
	}
	t.Run("X2 the token shows nowhere", func(t *testing.T) {
		secret := strings.TrimPrefix(token, "Bearer ")
		for _, r := range rows {
			b, err := os.ReadFile(filepath.Join(dir, r.name+".status.yaml"))
			must(t, err)
			if strings.Contains(string(b), secret) {
				t.Errorf("status of %s shows the token:\n%s", r.name, b)
			}
		}
		if strings.Contains(tt.logs.String(), secret) {
			t.Errorf("tether's log shows the token")
		}
	})
}
