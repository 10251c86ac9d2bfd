package connection

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/spec"
)

// LoginResult is what a login's check found: the server as tether run will
// see it.
type LoginResult struct {
	Server spec.ServerInfo
	Tools  int
}

// Login authorizes a connection with spec.http.oauth.authorizationCode
// interactively (tether login) and stores its tokens in o.Store: a session
// whose OAuth handler is the go-sdk's authorization code handler, so that
// the server asks for a token where it needs one (and the handler asks o's
// person), then, as the check, a session on the stored tokens as tether run
// opens it. A server that never asked for a token is authorized from its
// metadata all the same. req names the connection and its spec; o.Name,
// o.Server, o.Spec and o.ClientSecret are filled from it.
func Login(ctx context.Context, req Request, o oauth.LoginOptions) (LoginResult, error) {
	sp := req.Spec
	if sp == nil || sp.HTTP == nil || sp.HTTP.OAuth == nil || sp.HTTP.OAuth.AuthorizationCode == nil {
		return LoginResult{}, errors.New("connection: no spec.http.oauth.authorizationCode to log in with")
	}
	ac := sp.HTTP.OAuth.AuthorizationCode
	o.Name, o.Server, o.Spec = req.Name, sp.HTTP.URL, ac
	if ac.ClientSecret != nil {
		environ := req.Environ
		if environ == nil {
			environ = os.Getenv
		}
		secret, err := resolveSecret(ctx, "http.oauth.authorizationCode.clientSecret", ac.ClientSecret, valueSources{environ: environ, baseDir: req.ManifestDir})
		if err != nil {
			return LoginResult{}, err
		}
		o.ClientSecret = secret
	}
	l, err := oauth.NewLogin(o)
	if err != nil {
		return LoginResult{}, err
	}
	defer l.Close()

	lreq := req
	lreq.OAuth = OAuth{Login: l}
	s, err := Connect(ctx, lreq)
	if err != nil {
		if l.Saved() {
			return LoginResult{}, fmt.Errorf("the server refused the new token: %w", err)
		}
		return LoginResult{}, err
	}
	_ = s.Close()
	if !l.Saved() {
		// The server answered without asking for a token: authorize from
		// its metadata, as tether run will need a token the day it asks.
		if err := l.AuthorizeNow(ctx, oauth.NewGuard(l.Handler(), nil, nil)); err != nil {
			return LoginResult{}, err
		}
	}

	vreq := req
	vreq.OAuth = OAuth{Tokens: o.Store}
	v, err := Connect(ctx, vreq)
	if err != nil {
		return LoginResult{}, fmt.Errorf("connecting with the stored tokens, as tether run will: %w", err)
	}
	defer v.Close()
	return LoginResult{Server: v.Server(), Tools: len(v.Tools())}, nil
}
