package connection

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/spec"
)

// OAuth is what a session of a connection with spec.http.oauth needs
// besides its spec.
type OAuth struct {
	// Tokens is where `tether login` stores the tokens of authorizationCode
	// connections; nil when tether has no state directory.
	Tokens *oauth.Store
	// Login, when set, makes the session authorize interactively (tether
	// login) instead of using the stored tokens.
	Login *oauth.Login
}

// useOAuth gives an HTTP session its OAuth handler (controller/oauth): the
// go-sdk's streamable transport asks it for the access token of every
// request and calls it on a 401 or 403; requests tether sends beside the
// go-sdk (CallToolRaw, the raw ping) and the SSE transport, which has no
// OAuth support, get the token from an oauth.RoundTripper that answers
// their 401 the same way. Every token and client secret is redacted from
// what the session shows; a session left without a usable token ends, so
// that the connection shows AuthRequired instead of failing call by call.
func (s *Session) useOAuth(ctx context.Context, req Request, src valueSources, t mcp.Transport) error {
	h := req.Spec.HTTP
	o := h.OAuth
	var handler auth.OAuthHandler
	switch {
	case req.OAuth.Login != nil:
		handler = req.OAuth.Login.Handler()
	case o.ClientCredentials != nil:
		cc := o.ClientCredentials
		secret, err := resolveSecret(ctx, "http.oauth.clientCredentials.clientSecret", &cc.ClientSecret, src)
		if err != nil {
			return err
		}
		s.red.live.keep(secret)
		if handler, err = oauth.NewClientCredentials(req.Name, cc.ClientID, secret, cc.Scopes); err != nil {
			return err
		}
	default:
		ac := o.AuthorizationCode
		if req.OAuth.Tokens == nil {
			return &oauth.AuthRequiredError{Name: req.Name, Login: true, Reason: "tether has no state directory to keep OAuth tokens in (see --state-dir)"}
		}
		var secret string
		if ac.ClientSecret != nil {
			var err error
			if secret, err = resolveSecret(ctx, "http.oauth.authorizationCode.clientSecret", ac.ClientSecret, src); err != nil {
				return err
			}
			s.red.live.keep(secret)
		}
		clientID := ac.ClientID
		if strings.HasPrefix(clientID, "https://") {
			clientID = "" // a metadata document: the stored client may be a registered one
		}
		handler = oauth.NewStoredHandler(req.OAuth.Tokens.Source(req.Name, h.URL, clientID, secret, s.log))
	}
	g := oauth.NewGuard(handler, func(t *oauth2.Token) { s.red.live.add(t.AccessToken, t.RefreshToken) }, s.authLost)

	u, err := url.Parse(h.URL)
	if err != nil {
		return err
	}
	server := origin(u)
	sameOrigin := func(r *http.Request) bool { return origin(r.URL) == server }
	switch tt := t.(type) {
	case *mcp.StreamableClientTransport:
		tt.OAuthHandler = g
		tt.HTTPClient.Transport = &oauth.RoundTripper{Base: tt.HTTPClient.Transport, Handler: g, Origin: sameOrigin, SDKAnswers: true}
	case *lifetimeTransport:
		if sse, ok := tt.inner.(*mcp.SSEClientTransport); ok {
			sse.HTTPClient.Transport = &oauth.RoundTripper{Base: sse.HTTPClient.Transport, Handler: g, Origin: sameOrigin}
		}
	}
	return nil
}

// authLost ends a live session that has no usable access token any more
// (the refresh token was refused, ...): its cause, an
// oauth.AuthRequiredError, makes the connection AuthRequired. During
// Connect the attempt fails with it by itself.
func (s *Session) authLost(err error) {
	s.refreshMu.Lock()
	live := s.live
	s.refreshMu.Unlock()
	if live {
		s.transportDied(err)
	}
}

// resolveSecret reads a SecretValue, naming field in errors (never the
// value).
func resolveSecret(ctx context.Context, field string, v *spec.SecretValue, src valueSources) (string, error) {
	val, err := resolveValue(ctx, spec.EnvVar{Name: field, Value: v.Value, ValueFrom: v.ValueFrom}, src)
	if err != nil {
		return "", &secretError{field: field, err: err}
	}
	return val, nil
}

type secretError struct {
	field string
	err   error
}

func (e *secretError) Error() string { return e.field + ": " + e.err.Error() }
func (e *secretError) Unwrap() error { return e.err }

// maxLiveSecrets bounds the values a session remembers: tokens rotate, and
// only recent ones can still show up in what a server sends back.
const maxLiveSecrets = 32

// liveSecrets are secret values a session learns while it runs (access and
// refresh tokens, an OAuth client secret), redacted like the manifest's
// own. Safe for concurrent use; nil redacts nothing.
type liveSecrets struct {
	mu       sync.RWMutex
	fixed    []string // for the session's life (a client secret)
	vals     []string // tokens, in the order learnt, the last maxLiveSecrets
	ids      []string // session ids the server handed out, the last maxSessionIDs
	replacer *strings.Replacer
}

// maxSessionIDs bounds the session ids a session remembers: a session has
// one (two across a first connect's discover and its retry); a server that
// hands out a new one with every answer must not grow tether's memory.
const maxSessionIDs = 4

// sessionID adds an id the server handed out; nil keeps nothing.
func (l *liveSecrets) sessionID(id string) {
	if l == nil || len(id) < MinRedactLen {
		return
	}
	l.mu.RLock()
	known := slices.Contains(l.ids, id) || slices.Contains(l.fixed, id)
	l.mu.RUnlock()
	if known {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if slices.Contains(l.ids, id) {
		return
	}
	l.ids = append(l.ids, id)
	if n := len(l.ids) - maxSessionIDs; n > 0 {
		l.ids = slices.Delete(l.ids, 0, n)
	}
	l.rebuildLocked()
}

// keep adds values kept for the session's whole life.
func (l *liveSecrets) keep(vals ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range vals {
		if len(v) >= MinRedactLen && !slices.Contains(l.fixed, v) {
			l.fixed = append(l.fixed, v)
		}
	}
	l.rebuildLocked()
}

// add adds tokens; the oldest are forgotten past maxLiveSecrets.
func (l *liveSecrets) add(vals ...string) {
	l.mu.RLock()
	fresh := false
	for _, v := range vals {
		if len(v) >= MinRedactLen && !slices.Contains(l.vals, v) {
			fresh = true
		}
	}
	l.mu.RUnlock()
	if !fresh {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, v := range vals {
		if len(v) >= MinRedactLen && !slices.Contains(l.vals, v) {
			l.vals = append(l.vals, v)
		}
	}
	if n := len(l.vals) - maxLiveSecrets; n > 0 {
		l.vals = slices.Delete(l.vals, 0, n)
	}
	l.rebuildLocked()
}

func (l *liveSecrets) rebuildLocked() {
	// Every shape a value can be echoed in (secretShapes), longest first,
	// so that a value containing another is redacted whole.
	var all []string
	seen := map[string]bool{}
	for _, v := range slices.Concat(l.fixed, l.vals, l.ids) {
		for _, shape := range secretShapes(v) {
			if len(shape) >= MinRedactLen && !seen[shape] {
				seen[shape] = true
				all = append(all, shape)
			}
		}
	}
	slices.SortStableFunc(all, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(all))
	for _, v := range all {
		pairs = append(pairs, v, Redacted)
	}
	l.replacer = strings.NewReplacer(pairs...)
}

func (l *liveSecrets) replace(s string) string {
	if l == nil {
		return s
	}
	l.mu.RLock()
	r := l.replacer
	l.mu.RUnlock()
	if r == nil {
		return s
	}
	return r.Replace(s)
}
