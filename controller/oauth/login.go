package oauth

import (
	"context"
	"fmt"
	"html"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"

	"github.com/tether-mcp/tether/spec"
)

// CallbackPath is the path of the loopback redirect URI.
const CallbackPath = "/callback"

// LoginOptions configure one interactive login.
type LoginOptions struct {
	// Name is the connection's name; Server its spec.http.url.
	Name   string
	Server string
	// Spec is spec.http.oauth.authorizationCode; ClientSecret its resolved
	// clientSecret ("" when it has none).
	Spec         *spec.OAuthAuthorizationCode
	ClientSecret string
	// Store receives the tokens.
	Store *Store
	// Out is where the authorization URL and what happens are written.
	Out io.Writer
	// OpenBrowser, when set, is asked to open the authorization URL.
	OpenBrowser func(url string) error
	// Listen is the loopback address of the redirect receiver (default
	// 127.0.0.1:0, a free port).
	Listen string
	// Now is for tests.
	Now func() time.Time
}

// Login is one interactive login: the go-sdk's AuthorizationCodeHandler
// (discovery, client ID metadata document, a registered client or dynamic
// registration, PKCE, resource indicators), the authorization URL shown to
// a person, the redirect received on a loopback port, and the tokens it got
// saved in the Store. Use Handler as a session's OAuth handler; the go-sdk
// calls it when the server asks for a token.
type Login struct {
	opts     LoginOptions
	ln       net.Listener
	srv      *http.Server
	redirect string
	handler  *auth.AuthorizationCodeHandler
	results  chan callback
	saved    atomic.Bool

	mu       sync.Mutex
	resource string // of the last authorization URL
}

type callback struct {
	res *auth.AuthorizationResult
	err error
}

// NewLogin starts the redirect receiver and prepares the handler. Close it.
func NewLogin(o LoginOptions) (*Login, error) {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Spec == nil {
		o.Spec = &spec.OAuthAuthorizationCode{}
	}
	addr := o.Listen
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if host, _, err := net.SplitHostPort(addr); err != nil || !isLoopback(host) {
		return nil, fmt.Errorf("the redirect receiver must listen on a loopback address, not %q", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening for the redirect: %w", err)
	}
	l := &Login{
		opts:     o,
		ln:       ln,
		redirect: "http://" + ln.Addr().String() + CallbackPath,
		results:  make(chan callback, 1),
	}
	// Scopes a server asked for since the last login are asked for now.
	var required []string
	if old, err := o.Store.Load(o.Name); err == nil && old != nil && old.Server == o.Server {
		required = old.RequiredScopes
	}
	cfg := &auth.AuthorizationCodeHandlerConfig{
		RedirectURL:              l.redirect,
		AuthorizationCodeFetcher: l.fetch,
		RequestRefreshToken:      true,
		Client:                   authClient(nil),
		ScopeFilter: func(discovered []string) []string {
			base := discovered
			if len(o.Spec.Scopes) > 0 {
				base = o.Spec.Scopes
			}
			return union(base, required)
		},
		NewTokenSource: l.save,
	}
	dcr := &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
		RedirectURIs:  []string{l.redirect},
		ClientName:    "tether",
		GrantTypes:    []string{"authorization_code", "refresh_token"},
		ResponseTypes: []string{"code"},
	}}
	switch id := o.Spec.ClientID; {
	case strings.HasPrefix(id, "https://"):
		// A metadata document when the server takes them, else dynamic
		// registration.
		cfg.ClientIDMetadataDocumentConfig = &auth.ClientIDMetadataDocumentConfig{URL: id}
		cfg.DynamicClientRegistrationConfig = dcr
	case id != "":
		pre := &oauthex.ClientCredentials{ClientID: id}
		if o.ClientSecret != "" {
			pre.ClientSecretAuth = &oauthex.ClientSecretAuth{ClientSecret: o.ClientSecret}
		}
		cfg.PreregisteredClient = pre
	default:
		cfg.DynamicClientRegistrationConfig = dcr
	}
	if l.handler, err = auth.NewAuthorizationCodeHandler(cfg); err != nil {
		ln.Close()
		return nil, fmt.Errorf("spec.http.oauth.authorizationCode: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(CallbackPath, l.receive)
	l.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = l.srv.Serve(ln) }()
	return l, nil
}

// Handler is the OAuth handler for the login's session.
func (l *Login) Handler() auth.OAuthHandler { return l.handler }

// RedirectURL is where the authorization server sends the person back.
func (l *Login) RedirectURL() string { return l.redirect }

// Saved reports whether the login got tokens and stored them.
func (l *Login) Saved() bool { return l.saved.Load() }

// AuthorizeNow runs the authorization without a challenge from the server,
// for a server that answered everything without a token: discovery starts
// from its well-known metadata.
func (l *Login) AuthorizeNow(ctx context.Context, h auth.OAuthHandler) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.opts.Server, nil)
	if err != nil {
		return err
	}
	resp := &http.Response{StatusCode: http.StatusUnauthorized, Header: http.Header{}, Body: http.NoBody, Request: req}
	return h.Authorize(ctx, req, resp)
}

// Close stops the redirect receiver.
func (l *Login) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return l.srv.Shutdown(ctx)
}

// fetch shows the authorization URL and waits for the redirect.
func (l *Login) fetch(ctx context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
	if u, err := url.Parse(args.URL); err == nil {
		l.mu.Lock()
		l.resource = u.Query().Get("resource")
		l.mu.Unlock()
	}
	fmt.Fprintf(l.opts.Out, "To log in %s, open this URL in a browser:\n\n  %s\n\n", l.opts.Name, args.URL)
	if l.opts.OpenBrowser != nil {
		if err := l.opts.OpenBrowser(args.URL); err == nil {
			fmt.Fprintln(l.opts.Out, "(a browser was asked to open it)")
		}
	}
	fmt.Fprintf(l.opts.Out, "Waiting for the authorization server to send the browser back to %s ...\n", l.redirect)
	select {
	case r := <-l.results:
		return r.res, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("waiting for the redirect to %s: %w", l.redirect, context.Cause(ctx))
	}
}

// receive takes the authorization server's redirect.
func (l *Login) receive(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var cb callback
	switch {
	case q.Get("error") != "":
		cb.err = fmt.Errorf("the authorization server refused: %s", oneLine(strings.TrimSpace(q.Get("error")+" "+q.Get("error_description"))))
	case q.Get("code") == "":
		http.Error(w, "tether: this is where the authorization server sends the browser back; it sent no code", http.StatusBadRequest)
		return
	default:
		cb.res = &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}
	}
	select {
	case l.results <- cb:
	default:
		http.Error(w, "tether: a redirect was received already", http.StatusConflict)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	msg := "tether received the authorization. You can close this window."
	if cb.err != nil {
		msg = "tether: " + cb.err.Error()
	}
	fmt.Fprintf(w, "<!doctype html><title>tether login %s</title><p>%s</p>\n", html.EscapeString(l.opts.Name), html.EscapeString(msg))
}

// save stores what the code exchange brought, and is the handler's token
// source for the rest of the login's session.
func (l *Login) save(_ context.Context, cfg *oauth2.Config, tok *oauth2.Token) (oauth2.TokenSource, error) {
	l.mu.Lock()
	resource := l.resource
	l.mu.Unlock()
	rec := &Record{
		Server:    l.opts.Server,
		Resource:  resource,
		TokenURL:  cfg.Endpoint.TokenURL,
		AuthStyle: cfg.Endpoint.AuthStyle,
		ClientID:  cfg.ClientID,
		Scopes:    cfg.Scopes,
	}
	if cfg.ClientSecret != l.opts.ClientSecret {
		rec.ClientSecret = cfg.ClientSecret // from dynamic registration
	}
	rec.setToken(tok, l.opts.Now())
	if err := l.opts.Store.Save(l.opts.Name, rec); err != nil {
		return nil, err
	}
	l.saved.Store(true)
	fmt.Fprintf(l.opts.Out, "Tokens stored in %s\n", l.opts.Store.Path(l.opts.Name))
	// The rest of the session refreshes as tether run will, writing a
	// rotated refresh token back: a refresh of its own would spend the
	// stored one.
	clientID := l.opts.Spec.ClientID
	if strings.HasPrefix(clientID, "https://") {
		clientID = ""
	}
	return l.opts.Store.Source(l.opts.Name, l.opts.Server, clientID, l.opts.ClientSecret, nil), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
