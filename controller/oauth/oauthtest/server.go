// Package oauthtest is an OAuth-protected MCP server for tests: a small
// authorization server (RFC 8414 metadata, dynamic client registration, an
// authorization endpoint that a test approves by following its redirect,
// and a token endpoint for the authorization code grant with PKCE, the
// refresh token grant with rotation, and the client credentials grant) and
// an MCP endpoint behind the go-sdk's auth.RequireBearerToken, with its
// protected resource metadata (RFC 9728). Everything listens on one
// loopback port. Tests revoke tokens, count requests and list every token
// issued, to look for them where they must not be.
package oauthtest

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
)

// Options configure a Server.
type Options struct {
	// AccessTTL is the lifetime of an access token (default 1h).
	AccessTTL time.Duration
	// Scopes are the scopes the MCP endpoint requires and the servers
	// advertise (default none).
	Scopes []string
	// Clients are confidential clients registered beforehand: ID to secret
	// (for the client credentials grant and pre-registered clients).
	Clients map[string]string
}

// Counts are the requests a Server answered, by kind.
type Counts struct {
	Register, Authorize                        int
	CodeGrants, RefreshGrants, ClientGrants    int
	RefusedRefreshes, RefusedClients           int
	MCP, MCPUnauthorized                       int
	LastRefreshResource, LastAuthorizeResource string
	LastScope                                  string // of the last token issued
}

// Server is a running test server. Its methods are safe for concurrent use.
type Server struct {
	// URL is the issuer and the base of every endpoint; MCPURL the
	// streamable HTTP endpoint, SSEURL the SSE one (each its own protected
	// resource).
	URL, MCPURL, SSEURL string

	opts Options
	hs   *httptest.Server

	mu      sync.Mutex
	clients map[string]client // registered clients by ID
	codes   map[string]grant  // authorization codes
	access  map[string]grant  // live access tokens
	refresh map[string]grant  // live refresh tokens
	issued  []string          // every token issued, in order
	counts  Counts
	now     func() time.Time
}

type client struct {
	secret       string
	redirectURIs []string
	authMethod   string
}

type grant struct {
	client    string
	scopes    []string
	expiry    time.Time
	redirect  string
	challenge string
	resource  string
}

// New starts a server; it stops when the test ends.
func New(t testing.TB, o Options) *Server {
	t.Helper()
	if o.AccessTTL <= 0 {
		o.AccessTTL = time.Hour
	}
	s := &Server{
		opts:    o,
		clients: map[string]client{},
		codes:   map[string]grant{},
		access:  map[string]grant{},
		refresh: map[string]grant{},
		now:     time.Now,
	}
	for id, secret := range o.Clients {
		s.clients[id] = client{secret: secret, authMethod: "client_secret_basic"}
	}
	mux := http.NewServeMux()
	s.hs = httptest.NewServer(mux)
	t.Cleanup(s.hs.Close)
	s.URL = s.hs.URL
	s.MCPURL = s.URL + "/mcp"
	s.SSEURL = s.URL + "/sse"

	for _, path := range []string{"/mcp", "/sse"} {
		mux.Handle("/.well-known/oauth-protected-resource"+path, auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource:               s.URL + path,
			AuthorizationServers:   []string{s.URL},
			ScopesSupported:        o.Scopes,
			BearerMethodsSupported: []string{"header"},
		}))
	}
	mux.HandleFunc("/.well-known/oauth-authorization-server", s.metadata)
	mux.HandleFunc("/register", s.register)
	mux.HandleFunc("/authorize", s.authorize)
	mux.HandleFunc("/token", s.token)

	mcpServer := mcp.NewServer(&mcp.Implementation{Name: "oauthtest", Version: "1.0.0"}, nil)
	mcp.AddTool(mcpServer, &mcp.Tool{Name: "echo", Description: "echoes its text"},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Text string `json:"text"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
		})
	// leak answers with an error that quotes the caller's Authorization
	// header: what a careless server might do, for redaction tests.
	mcp.AddTool(mcpServer, &mcp.Tool{Name: "leak", Description: "fails, quoting the caller's token"},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			got := "no header" // the SSE transport passes none on
			if req.Extra != nil && req.Extra.Header != nil {
				got = req.Extra.Header.Get("Authorization")
			}
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{
				Text: "refusing the caller with " + got,
			}}}, nil, nil
		})
	getServer := func(*http.Request) *mcp.Server { return mcpServer }
	for path, handler := range map[string]http.Handler{
		"/mcp": mcp.NewStreamableHTTPHandler(getServer, nil),
		"/sse": mcp.NewSSEHandler(getServer, nil),
	} {
		protected := auth.RequireBearerToken(s.verify, &auth.RequireBearerTokenOptions{
			ResourceMetadataURL: s.URL + "/.well-known/oauth-protected-resource" + path,
			Scopes:              o.Scopes,
		})(handler)
		mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.counts.MCP++
			s.mu.Unlock()
			protected.ServeHTTP(&statusRecorder{ResponseWriter: w, onStatus: func(code int) {
				if code == http.StatusUnauthorized {
					s.mu.Lock()
					s.counts.MCPUnauthorized++
					s.mu.Unlock()
				}
			}}, r)
		}))
	}
	return s
}

// statusRecorder tells onStatus the status a handler writes.
type statusRecorder struct {
	http.ResponseWriter
	onStatus func(int)
	once     sync.Once
}

func (r *statusRecorder) WriteHeader(code int) {
	r.once.Do(func() { r.onStatus(code) })
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	r.once.Do(func() { r.onStatus(http.StatusOK) })
	return r.ResponseWriter.Write(b)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Counts returns the requests answered so far.
func (s *Server) Counts() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts
}

// Issued returns every access and refresh token issued so far.
func (s *Server) Issued() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.issued)
}

// RevokeRefreshTokens makes every refresh token issued so far invalid.
func (s *Server) RevokeRefreshTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.refresh)
}

// RevokeAccessTokens makes every access token issued so far invalid.
func (s *Server) RevokeAccessTokens() {
	s.mu.Lock()
	defer s.mu.Unlock()
	clear(s.access)
}

// Approve plays the person at the authorization URL: it asks for it and
// follows the redirect back to the client's loopback receiver, which must
// answer 200.
func Approve(ctx context.Context, authURL string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("following the authorization URL: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the redirect receiver answered %s", resp.Status)
	}
	return nil
}

// Person plays the person who logs in: it reads what a login writes (r)
// and approves every authorization URL it shows (a line that is only a
// URL), until r ends. Errors go to onErr.
func Person(ctx context.Context, r io.Reader, onErr func(error)) {
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "http") && !strings.ContainsAny(line, " \t") && strings.Contains(line, "?") {
			if err := Approve(ctx, line); err != nil {
				onErr(err)
			}
		}
	}
}

func (s *Server) verify(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g, ok := s.access[token]
	if !ok || !s.now().Before(g.expiry) {
		return nil, fmt.Errorf("%w: unknown or expired", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{Scopes: g.scopes, Expiration: g.expiry, UserID: g.client}, nil
}

func (s *Server) metadata(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, &oauthex.AuthServerMeta{
		Issuer:                            s.URL,
		AuthorizationEndpoint:             s.URL + "/authorize",
		TokenEndpoint:                     s.URL + "/token",
		RegistrationEndpoint:              s.URL + "/register",
		ScopesSupported:                   append(slices.Clone(s.opts.Scopes), "offline_access"),
		ResponseTypesSupported:            []string{"code"},
		GrantTypesSupported:               []string{"authorization_code", "refresh_token", "client_credentials"},
		TokenEndpointAuthMethodsSupported: []string{"none", "client_secret_basic", "client_secret_post"},
		CodeChallengeMethodsSupported:     []string{"S256"},
	})
}

func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	var m oauthex.ClientRegistrationMetadata
	if err := json.NewDecoder(r.Body).Decode(&m); err != nil || len(m.RedirectURIs) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "invalid_client_metadata"})
		return
	}
	id := "client-" + randomString()
	s.mu.Lock()
	s.clients[id] = client{redirectURIs: m.RedirectURIs, authMethod: "none"}
	s.counts.Register++
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id": id, "redirect_uris": m.RedirectURIs, "token_endpoint_auth_method": "none",
		"grant_types": m.GrantTypes,
	})
}

// authorize approves at once (the person said yes) and redirects back.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	c, known := s.clients[q.Get("client_id")]
	s.counts.Authorize++
	s.counts.LastAuthorizeResource = q.Get("resource")
	s.mu.Unlock()
	redirect := q.Get("redirect_uri")
	switch {
	case !known:
		http.Error(w, "unknown client", http.StatusBadRequest)
		return
	case len(c.redirectURIs) > 0 && !slices.Contains(c.redirectURIs, redirect):
		http.Error(w, "redirect_uri not registered", http.StatusBadRequest)
		return
	case q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "":
		http.Error(w, "want response_type=code and a S256 code challenge", http.StatusBadRequest)
		return
	case q.Get("resource") != s.MCPURL && q.Get("resource") != s.SSEURL:
		http.Error(w, "resource is not an MCP endpoint", http.StatusBadRequest)
		return
	}
	code := randomString()
	s.mu.Lock()
	s.codes[code] = grant{client: q.Get("client_id"), scopes: strings.Fields(q.Get("scope")), redirect: redirect,
		challenge: q.Get("code_challenge"), resource: q.Get("resource"), expiry: s.now().Add(time.Minute)}
	s.mu.Unlock()
	u, err := url.Parse(redirect)
	if err != nil {
		http.Error(w, "bad redirect_uri", http.StatusBadRequest)
		return
	}
	v := u.Query()
	v.Set("code", code)
	v.Set("state", q.Get("state"))
	u.RawQuery = v.Encode()
	http.Redirect(w, r, u.String(), http.StatusFound)
}

func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	id, secret, basic := r.BasicAuth()
	if !basic {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, known := s.clients[id]
	if !known || c.secret != secret {
		s.counts.RefusedClients++
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		g, ok := s.codes[r.PostForm.Get("code")]
		delete(s.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || g.client != id || g.redirect != r.PostForm.Get("redirect_uri") ||
			base64.RawURLEncoding.EncodeToString(sum[:]) != g.challenge || r.PostForm.Get("resource") != g.resource {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		s.counts.CodeGrants++
		s.issueLocked(w, g, true)
	case "refresh_token":
		rt := r.PostForm.Get("refresh_token")
		g, ok := s.refresh[rt]
		s.counts.LastRefreshResource = r.PostForm.Get("resource")
		if !ok || g.client != id {
			s.counts.RefusedRefreshes++
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		delete(s.refresh, rt) // rotation: a refresh token is used once
		s.counts.RefreshGrants++
		s.issueLocked(w, g, true)
	case "client_credentials":
		if c.secret == "" {
			tokenError(w, http.StatusUnauthorized, "invalid_client")
			return
		}
		s.counts.ClientGrants++
		s.issueLocked(w, grant{client: id, scopes: strings.Fields(r.PostForm.Get("scope"))}, false)
	default:
		tokenError(w, http.StatusBadRequest, "unsupported_grant_type")
	}
}

func (s *Server) issueLocked(w http.ResponseWriter, g grant, withRefresh bool) {
	at := "at-" + randomString()
	g.expiry = s.now().Add(s.opts.AccessTTL)
	s.access[at] = g
	s.issued = append(s.issued, at)
	s.counts.LastScope = strings.Join(g.scopes, " ")
	body := map[string]any{
		"access_token": at, "token_type": "Bearer",
		"expires_in": int(s.opts.AccessTTL.Round(time.Second) / time.Second),
		"scope":      strings.Join(g.scopes, " "),
	}
	if withRefresh {
		rt := "rt-" + randomString()
		s.refresh[rt] = g
		s.issued = append(s.issued, rt)
		body["refresh_token"] = rt
	}
	writeJSON(w, http.StatusOK, body)
}

func tokenError(w http.ResponseWriter, status int, code string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": "refused by the test server"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func randomString() string {
	b := make([]byte, 18)
	if _, err := rand.Read(b); err != nil {
		panic(errors.New("oauthtest: no randomness"))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}
