package oauth

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
)

// Timeouts of the requests tether makes to an authorization server.
const (
	// requestTimeout bounds one request to an authorization server
	// (discovery, registration, token): a handler's Authorize may run on a
	// context that does not end (see NewClientCredentials).
	requestTimeout = 30 * time.Second
	// maxRefreshMargin is how long before its expiry an access token is
	// refreshed at most; a short-lived token is refreshed a quarter of its
	// lifetime before, so that no request goes out with a token that
	// expires on its way.
	maxRefreshMargin = 30 * time.Second
)

// authClient is the HTTP client for an authorization server: the process's
// proxy settings, every request bounded.
func authClient(rt http.RoundTripper) *http.Client {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &http.Client{Transport: rt, Timeout: requestTimeout}
}

// TokenSource hands out one connection's access token from its token file
// and refreshes it before it expires, writing the refreshed token (and a
// rotated refresh token) back. One TokenSource serves every session of the
// connection, so a rotated refresh token is used once. It is safe for
// concurrent use; a refresh holds it (bounded by requestTimeout).
type TokenSource struct {
	store *Store
	name  string
	log   *slog.Logger

	mu       sync.Mutex
	server   string // spec.http.url the tokens must be for
	clientID string // the manifest's registered client ID ("" for dynamic registration or a metadata document)
	secret   string // the manifest's client secret, if any
	rec      *Record
	onDisk   [sha256.Size]byte // digest of the file as last read or written
	problem  string            // why rec cannot be used ("" when it can)
	// fresh is the access token that a refresh after a 401 brought, and
	// freshAt when: a 401 for it soon after means that the server will
	// not take a new token either.
	fresh   string
	freshAt time.Time
}

// Source returns the token source of name, for a session to server with the
// manifest's client (clientID "" unless registered beforehand, secret ""
// unless it has one). It reads the token file when it has no usable token.
func (s *Store) Source(name, server, clientID, secret string, log *slog.Logger) *TokenSource {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s.mu.Lock()
	ts := s.sources[name]
	if ts == nil {
		ts = &TokenSource{store: s, name: name, log: log}
		s.sources[name] = ts
	}
	s.mu.Unlock()
	ts.mu.Lock()
	defer ts.mu.Unlock()
	changed := ts.server != server || ts.clientID != clientID || ts.secret != secret
	ts.server, ts.clientID, ts.secret, ts.log = server, clientID, secret, log
	if ts.rec == nil || ts.problem != "" || changed {
		ts.loadLocked()
	}
	return ts
}

// reload reads the token file again (a login wrote it).
func (ts *TokenSource) reload() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.loadLocked()
}

func (ts *TokenSource) loadLocked() {
	ts.rec, ts.problem, ts.fresh = nil, "", ""
	rec, sum, err := ts.store.load(ts.name)
	ts.onDisk = sum
	switch {
	case err != nil:
		ts.problem = err.Error()
	case rec == nil:
		ts.problem = "no token is stored for this connection"
	case rec.Server != ts.server:
		ts.problem = "the stored token was obtained for another server than spec.http.url"
	case ts.clientID != "" && rec.ClientID != ts.clientID:
		ts.problem = "the stored token was issued to another client than spec.http.oauth.authorizationCode.clientID"
	default:
		ts.rec = rec
	}
}

// usableLocked returns why no token can be had, as an AuthRequiredError.
func (ts *TokenSource) usableLocked() error {
	if ts.problem != "" || ts.rec == nil {
		reason := ts.problem
		if reason == "" {
			reason = "no token is stored for this connection"
		}
		return &AuthRequiredError{Name: ts.name, Login: true, Reason: reason}
	}
	return nil
}

// Token returns a valid access token, refreshing it first when it expires
// within its refresh margin. The error is an AuthRequiredError when a
// login is needed.
func (ts *TokenSource) Token() (*oauth2.Token, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.usableLocked(); err != nil {
		return nil, err
	}
	if !ts.expiringLocked() {
		return ts.rec.token(), nil
	}
	return ts.refreshLocked("the access token expired")
}

// expiringLocked reports whether the access token expires within its
// refresh margin.
func (ts *TokenSource) expiringLocked() bool {
	r := ts.rec
	if r.AccessToken == "" {
		return true
	}
	if r.Expiry.IsZero() {
		return false
	}
	margin := maxRefreshMargin
	if !r.Obtained.IsZero() {
		margin = min(margin, r.Expiry.Sub(r.Obtained)/4)
	}
	return !ts.store.now().Add(margin).Before(r.Expiry)
}

// refreshLocked gets a new access token with the refresh token and writes
// it back. why says what made it necessary, for the error when there is no
// refresh token.
func (ts *TokenSource) refreshLocked(why string) (*oauth2.Token, error) {
	// A login may have written the file since it was read: its tokens win
	// over a refresh of the old ones.
	if ts.store.differs(ts.name, ts.onDisk) {
		ts.loadLocked()
		if err := ts.usableLocked(); err != nil {
			return nil, err
		}
		if !ts.expiringLocked() {
			return ts.rec.token(), nil
		}
	}
	r := ts.rec
	if r.RefreshToken == "" {
		ts.problem = why + " and there is no refresh token"
		return nil, ts.usableLocked()
	}
	secret := r.ClientSecret
	if ts.secret != "" {
		secret = ts.secret
	}
	cfg := &oauth2.Config{
		ClientID:     r.ClientID,
		ClientSecret: secret,
		Endpoint:     oauth2.Endpoint{TokenURL: r.TokenURL, AuthStyle: r.AuthStyle},
		Scopes:       r.Scopes,
	}
	// The refresh carries the resource it was issued for (RFC 8707 §2.2).
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, authClient(&resourceParam{base: http.DefaultTransport, resource: r.Resource}))
	tok, err := cfg.TokenSource(ctx, &oauth2.Token{RefreshToken: r.RefreshToken}).Token()
	if err != nil {
		switch code := oauthCode(err); code {
		case "invalid_grant", "invalid_client", "unauthorized_client":
			// The refresh token is revoked or expired (or the client is
			// gone): only a login helps.
			ts.problem = fmt.Sprintf("the authorization server refused the refresh token (%s)", code)
			return nil, ts.usableLocked()
		}
		return nil, tokenError("refreshing the access token", err)
	}
	r.setToken(tok, ts.store.now())
	if ts.store.differs(ts.name, ts.onDisk) {
		// A login wrote the file while the refresh ran: keep what it wrote.
		ts.loadLocked()
		if err := ts.usableLocked(); err != nil {
			return nil, err
		}
		return ts.rec.token(), nil
	}
	sum, err := ts.store.save(ts.name, r)
	ts.onDisk = sum
	if err != nil {
		// The new token works; only a restart would miss it (and then
		// need a login if the refresh token rotated).
		ts.log.Warn("keeping the refreshed token in memory only", "err", err)
	}
	ts.log.Debug("access token refreshed", "expiry", r.Expiry)
	return r.token(), nil
}

// reject is told that the server answered 401 to a request that carried
// sent (empty: none). It returns nil when a newer token is there to retry
// with, refreshing if need be; an AuthRequiredError when none can be had.
func (ts *TokenSource) reject(sent string) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if err := ts.usableLocked(); err != nil {
		return err
	}
	switch {
	case sent != ts.rec.AccessToken && !ts.expiringLocked():
		return nil // none sent, or replaced since: retry with the current one
	case sent != "" && sent == ts.fresh && ts.store.now().Sub(ts.freshAt) < freshWindow:
		ts.problem = "the server refused an access token that was just refreshed"
		return ts.usableLocked()
	}
	tok, err := ts.refreshLocked("the server refused the access token")
	if err == nil {
		ts.fresh, ts.freshAt = tok.AccessToken, ts.store.now()
	}
	return err
}

// freshWindow is how soon after a refresh that answered a 401 another 401
// for the new token means that refreshing does not help.
const freshWindow = 10 * time.Second

// requireScopes remembers scopes a server asked for (a 403 with
// insufficient_scope), so that the next login asks for them.
func (ts *TokenSource) requireScopes(scopes []string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.rec == nil {
		return
	}
	if ts.store.differs(ts.name, ts.onDisk) {
		ts.loadLocked() // a login ran: it asked for what it asked for
		return
	}
	merged := union(ts.rec.RequiredScopes, scopes)
	if len(merged) == len(ts.rec.RequiredScopes) {
		return
	}
	ts.rec.RequiredScopes = merged
	sum, err := ts.store.save(ts.name, ts.rec)
	ts.onDisk = sum
	if err != nil {
		ts.log.Warn("could not note the scopes the server asked for", "err", err)
	}
}

// union returns a followed by the items of b it lacks, in order.
func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// resourceParam adds the resource parameter to refresh requests that lack
// it: golang.org/x/oauth2 has no option for extra refresh parameters.
type resourceParam struct {
	base     http.RoundTripper
	resource string
}

func (t *resourceParam) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.resource == "" || req.Method != http.MethodPost || req.Body == nil ||
		!strings.HasPrefix(req.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return t.base.RoundTrip(req)
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	vals, err := url.ParseQuery(string(body))
	if err == nil && vals.Get("grant_type") == "refresh_token" && !vals.Has("resource") {
		vals.Set("resource", t.resource)
		body = []byte(vals.Encode())
	}
	req = req.Clone(req.Context())
	req.Body = io.NopCloser(strings.NewReader(string(body)))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(string(body))), nil }
	return t.base.RoundTrip(req)
}
