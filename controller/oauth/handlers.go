package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/auth/extauth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// NewStoredHandler returns the handler tether run uses for an
// authorizationCode connection: the tokens `tether login` stored, from ts,
// refreshed as they expire. It never needs a person: where the go-sdk's
// AuthorizationCodeHandler would send one to the authorization server, it
// returns an AuthRequiredError that says to run `tether login`.
func NewStoredHandler(ts *TokenSource) auth.OAuthHandler {
	return &storedHandler{ts: ts}
}

type storedHandler struct{ ts *TokenSource }

// TokenSource is always the stored one: without a usable token its Token
// fails with an AuthRequiredError, so that no request goes out only to be
// refused.
func (h *storedHandler) TokenSource(context.Context) (oauth2.TokenSource, error) {
	return h.ts, nil
}

// Authorize answers a 401 by refreshing the token once (a token revoked
// mid-session, or a server that expires tokens early), and a 403 with
// insufficient_scope (step-up) by noting the scopes for the next login. A
// 403 for another reason is left to the caller, as the go-sdk's handler
// leaves it.
func (h *storedHandler) Authorize(_ context.Context, req *http.Request, resp *http.Response) error {
	challenges := drain(resp)
	if resp.StatusCode == http.StatusForbidden {
		if bearerParam(challenges, "error") != "insufficient_scope" {
			return nil
		}
		scopes := strings.Fields(bearerParam(challenges, "scope"))
		h.ts.requireScopes(scopes)
		return &AuthRequiredError{
			Name: h.ts.name, Login: true, StepUp: true,
			Reason: fmt.Sprintf("the server asks for scope %q, which the access token does not carry", strings.Join(scopes, " ")),
		}
	}
	return h.ts.reject(bearerOf(req))
}

// NewClientCredentials returns the handler of a clientCredentials
// connection: the go-sdk's extauth.ClientCredentialsHandler (discovery,
// then the client credentials grant; a new token when one expires; step-up
// on a 403), asking for scopes when the manifest names them.
//
// extauth v1.8.0 keeps the context of the Authorize call that got the first
// token for every later token request, so a token fetched during a call
// that then ended could never be renewed. Authorize therefore hands it a
// context without cancellation; every request it makes is bounded by the
// handler's HTTP client instead (requestTimeout).
func NewClientCredentials(name, clientID, clientSecret string, scopes []string) (auth.OAuthHandler, error) {
	inner, err := extauth.NewClientCredentialsHandler(&extauth.ClientCredentialsHandlerConfig{
		Credentials: &oauthex.ClientCredentials{
			ClientID:         clientID,
			ClientSecretAuth: &oauthex.ClientSecretAuth{ClientSecret: clientSecret},
		},
		HTTPClient: authClient(nil),
	})
	if err != nil {
		return nil, fmt.Errorf("spec.http.oauth.clientCredentials: %w", err)
	}
	return &ccHandler{inner: inner, name: name, scopes: scopes}, nil
}

type ccHandler struct {
	inner  *extauth.ClientCredentialsHandler
	name   string
	scopes []string
}

func (h *ccHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	ts, err := h.inner.TokenSource(ctx)
	if err != nil || ts == nil {
		return nil, err
	}
	return &ccTokenSource{ts: ts, name: h.name}, nil
}

func (h *ccHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	if len(h.scopes) > 0 {
		// extauth asks for the scopes of the first Bearer challenge that
		// names some: put the manifest's first (with, on a step-up 403,
		// the ones the server asks for).
		want := h.scopes
		if resp.StatusCode == http.StatusForbidden {
			if cs, err := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate")); err == nil {
				want = union(want, strings.Fields(bearerParam(cs, "scope")))
			}
		}
		resp.Header = resp.Header.Clone()
		resp.Header["Www-Authenticate"] = append([]string{`Bearer scope="` + strings.Join(want, " ") + `"`}, resp.Header.Values("WWW-Authenticate")...)
	}
	return ccError(h.name, h.inner.Authorize(context.WithoutCancel(ctx), req, resp))
}

// ccTokenSource reports a refused client as an AuthRequiredError when a
// token expires and a new one cannot be had.
type ccTokenSource struct {
	ts   oauth2.TokenSource
	name string
}

func (s *ccTokenSource) Token() (*oauth2.Token, error) {
	t, err := s.ts.Token()
	return t, ccError(s.name, err)
}

// ccError describes a failed client credentials grant safely; a refused
// client is an AuthRequiredError (someone must fix the manifest's client).
func ccError(name string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := AsAuthRequired(err); ok {
		return err
	}
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return err // discovery: the go-sdk's message names what failed
	}
	safe := tokenError("getting a token with the client credentials", err)
	switch oauthCode(err) {
	case "invalid_client", "unauthorized_client", "invalid_scope", "access_denied", "unsupported_grant_type", "invalid_grant":
		return &AuthRequiredError{Name: name, Reason: safe.Error() + ": check spec.http.oauth.clientCredentials"}
	}
	return safe
}

// Guard makes a handler safe for several requests at once (the go-sdk's
// handlers are not all), skips a second authorization for a 401 that a
// newer token already answers, and tells its owner what the session must
// know: every token it hands out (OnToken, to redact it) and an
// AuthRequiredError that leaves the session without a usable token (OnLost).
type Guard struct {
	inner   auth.OAuthHandler
	onToken func(*oauth2.Token)
	onLost  func(error)

	mu   sync.Mutex // one Authorize at a time; TokenSource waits for it
	last atomic.Pointer[string]
}

// NewGuard wraps inner. onToken and onLost may be nil.
func NewGuard(inner auth.OAuthHandler, onToken func(*oauth2.Token), onLost func(error)) *Guard {
	return &Guard{inner: inner, onToken: onToken, onLost: onLost}
}

func (g *Guard) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	g.mu.Lock()
	ts, err := g.inner.TokenSource(ctx)
	g.mu.Unlock()
	if err != nil || ts == nil {
		return nil, err
	}
	return &guardedSource{g: g, ts: ts}, nil
}

func (g *Guard) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if resp.StatusCode == http.StatusUnauthorized {
		if sent, last := bearerOf(req), g.last.Load(); sent != "" && last != nil && sent != *last {
			drain(resp)
			return nil // another request got a new token meanwhile
		}
	}
	err := g.inner.Authorize(ctx, req, resp)
	g.lost(err)
	return err
}

// Current is the access token the guard last handed out ("" for none).
func (g *Guard) Current() string {
	if p := g.last.Load(); p != nil {
		return *p
	}
	return ""
}

func (g *Guard) lost(err error) {
	if ae, ok := AsAuthRequired(err); ok && !ae.StepUp && g.onLost != nil {
		g.onLost(err)
	}
}

type guardedSource struct {
	g  *Guard
	ts oauth2.TokenSource
}

func (s *guardedSource) Token() (*oauth2.Token, error) {
	t, err := s.ts.Token()
	if err != nil {
		s.g.lost(err)
		return nil, err
	}
	if t != nil {
		if p := s.g.last.Load(); p == nil || *p != t.AccessToken {
			a := t.AccessToken
			s.g.last.Store(&a)
			if s.g.onToken != nil {
				s.g.onToken(t)
			}
		}
	}
	return t, nil
}

// RoundTripper carries the handler's access token on requests to the MCP
// server's origin that lack one, and answers their 401 and 403 as the
// go-sdk's streamable transport does (Authorize, then the request once
// more). With SDKAnswers (the streamable transport, which sets the token
// and answers itself) it answers only requests it gave the token to:
// those tether sends beside the go-sdk.
type RoundTripper struct {
	Base       http.RoundTripper
	Handler    auth.OAuthHandler
	Origin     func(*http.Request) bool // whether a request goes to the MCP server
	SDKAnswers bool
}

func (t *RoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.Origin(req) {
		return t.Base.RoundTrip(req)
	}
	set := false
	if req.Header.Get("Authorization") == "" {
		var err error
		if req, set, err = t.withToken(req); err != nil {
			return nil, err
		}
	}
	resp, err := t.Base.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		return resp, err
	}
	if t.SDKAnswers && !set {
		return resp, nil
	}
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return resp, nil // cannot send it again
	}
	if err := t.Handler.Authorize(req.Context(), req, resp); err != nil {
		return nil, err
	}
	again := req.Clone(req.Context())
	again.Header.Del("Authorization")
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		again.Body = body
	}
	again, _, err = t.withToken(again)
	if err != nil {
		return nil, err
	}
	return t.Base.RoundTrip(again)
}

// withToken returns a copy of req with the current token, if there is one.
func (t *RoundTripper) withToken(req *http.Request) (*http.Request, bool, error) {
	ts, err := t.Handler.TokenSource(req.Context())
	if err != nil || ts == nil {
		return req, false, err
	}
	tok, err := ts.Token()
	if err != nil {
		return nil, false, err
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return req, true, nil
}

// drain reads what is left of a refused response (bounded), closes it and
// returns its Bearer challenges.
func drain(resp *http.Response) []oauthex.Challenge {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	cs, _ := oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	return cs
}

// bearerParam returns a parameter of the first Bearer challenge that has it.
func bearerParam(cs []oauthex.Challenge, key string) string {
	for _, c := range cs {
		if c.Scheme == "bearer" && c.Params[key] != "" {
			return c.Params[key]
		}
	}
	return ""
}

// bearerOf returns the bearer token a request carried ("" for none).
func bearerOf(req *http.Request) string {
	scheme, token, ok := strings.Cut(req.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
