package oauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/oauth2"

	"github.com/tether-mcp/tether/controller/oauth/oauthtest"
	"github.com/tether-mcp/tether/spec"
)

// session opens an MCP session to srv with h as its OAuth handler.
func session(t *testing.T, ctx context.Context, srv *oauthtest.Server, h auth.OAuthHandler) (*mcp.ClientSession, error) {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.MCPURL, OAuthHandler: h}, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func echo(ctx context.Context, cs *mcp.ClientSession, text string) error {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": text}})
	if err != nil {
		return err
	}
	if res.IsError {
		return errors.New("tool error")
	}
	if got := res.Content[0].(*mcp.TextContent).Text; got != "echo: "+text {
		return errors.New("unexpected result " + got)
	}
	return nil
}

// login runs an interactive login for name against srv, with a person who
// approves at once, and returns what it wrote.
func login(t *testing.T, ctx context.Context, srv *oauthtest.Server, store *Store, name string, ac *spec.OAuthAuthorizationCode, secret string) string {
	t.Helper()
	pr, pw := io.Pipe()
	var out strings.Builder
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		oauthtest.Person(ctx, io.TeeReader(pr, writerFunc(func(b []byte) {
			mu.Lock()
			out.Write(b)
			mu.Unlock()
		})), func(err error) { t.Errorf("person: %v", err) })
	}()
	l, err := NewLogin(LoginOptions{Name: name, Server: srv.MCPURL, Spec: ac, ClientSecret: secret, Store: store, Out: pw})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cs, err := session(t, ctx, srv, NewGuard(l.Handler(), nil, nil))
	if err != nil {
		t.Fatalf("login session: %v", err)
	}
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatalf("login session: %v", err)
	}
	cs.Close()
	pw.Close()
	<-done
	if !l.Saved() {
		t.Fatal("the login stored no token")
	}
	mu.Lock()
	defer mu.Unlock()
	return out.String()
}

type writerFunc func([]byte)

func (f writerFunc) Write(b []byte) (int, error) { f(b); return len(b), nil }

// A login stores the tokens (0600 in a 0700 directory) with what refreshes
// need; tether run's handler then serves calls across several token
// lifetimes without a failed call, refreshing with the resource and writing
// each rotated refresh token back.
func TestLoginThenRefreshWithoutADroppedCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{AccessTTL: 2 * time.Second, Scopes: []string{"mcp:tools"}})
	state := t.TempDir()
	store := NewStore(state)

	out := login(t, ctx, srv, store, "demo", nil, "")
	if !strings.Contains(out, srv.URL+"/authorize?") || !strings.Contains(out, "Tokens stored in "+store.Path("demo")) {
		t.Errorf("login output:\n%s", out)
	}
	if c := srv.Counts(); c.Register != 1 || c.Authorize != 1 || c.CodeGrants != 1 || c.LastAuthorizeResource != srv.MCPURL {
		t.Errorf("counts after login: %+v", c)
	}
	for path, want := range map[string]os.FileMode{store.Dir(): 0o700, store.Path("demo"): 0o600} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", path, fi.Mode().Perm(), err, want)
		}
	}
	first, err := store.Load("demo")
	if err != nil || first.RefreshToken == "" || first.Resource != srv.MCPURL || first.Server != srv.MCPURL ||
		!strings.Contains(strings.Join(first.Scopes, " "), "mcp:tools") || !strings.Contains(strings.Join(first.Scopes, " "), "offline_access") {
		t.Fatalf("stored record %+v, %v", first, err)
	}

	afterLogin := srv.Counts()
	var seen []string
	ts := store.Source("demo", srv.MCPURL, "", "", nil)
	h := NewGuard(NewStoredHandler(ts), func(tok *oauth2.Token) { seen = append(seen, tok.AccessToken) }, func(err error) {
		t.Errorf("session lost its token: %v", err)
	})
	cs, err := session(t, ctx, srv, h)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	calls := 0
	for time.Now().Before(deadline) {
		if err := echo(ctx, cs, "hi"); err != nil {
			t.Fatalf("call %d: %v", calls, err)
		}
		calls++
		time.Sleep(50 * time.Millisecond)
	}
	c := srv.Counts()
	if c.RefreshGrants < 2 || c.MCPUnauthorized != afterLogin.MCPUnauthorized || c.LastRefreshResource != srv.MCPURL {
		t.Errorf("after %d calls over 5s of 2s tokens: %+v; want at least 2 refreshes carrying the resource and no 401", calls, c)
	}
	now, err := store.Load("demo")
	if err != nil || now.RefreshToken == first.RefreshToken || now.AccessToken == first.AccessToken {
		t.Errorf("the rotated tokens were not written back: %v", err)
	}
	if len(seen) < 3 {
		t.Errorf("the session was told of %d tokens, want every refreshed one", len(seen))
	}
}

// A refresh token the server no longer takes ends in an AuthRequiredError
// that says to log in, tells the session it lost its token, and shows no
// token; a new login brings calls back.
func TestRefusedRefreshNeedsALogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{})
	store := NewStore(t.TempDir())
	login(t, ctx, srv, store, "demo", nil, "")

	var lost atomic.Value
	ts := store.Source("demo", srv.MCPURL, "", "", nil)
	cs, err := session(t, ctx, srv, NewGuard(NewStoredHandler(ts), nil, func(err error) { lost.Store(err) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(ctx, cs, "a"); err != nil {
		t.Fatal(err)
	}
	// Both revoked: a login is needed.
	srv.RevokeAccessTokens()
	srv.RevokeRefreshTokens()
	err = echo(ctx, cs, "c")
	ae, ok := AsAuthRequired(err)
	if !ok || !ae.Login || !strings.Contains(err.Error(), "run `tether login demo`") || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("call after both tokens were revoked: %v; want an AuthRequiredError naming tether login", err)
	}
	if lost.Load() == nil {
		t.Error("the session was not told it lost its token")
	}
	for _, tok := range srv.Issued() {
		if strings.Contains(err.Error(), tok) {
			t.Errorf("the error shows a token: %v", err)
		}
	}
	// The next request does not go out: nothing to send.
	before := srv.Counts()
	if err := echo(ctx, cs, "d"); err == nil {
		t.Fatal("a call succeeded without a token")
	}
	if after := srv.Counts(); after.MCP != before.MCP || after.RefreshGrants+after.RefusedRefreshes != before.RefreshGrants+before.RefusedRefreshes {
		t.Errorf("a call without a usable token reached the servers: %+v then %+v", before, after)
	}

	login(t, ctx, srv, store, "demo", nil, "")
	ts.reload() // what the watcher does
	cs2, err := session(t, ctx, srv, NewGuard(NewStoredHandler(store.Source("demo", srv.MCPURL, "", "", nil)), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := echo(ctx, cs2, "e"); err != nil {
		t.Fatalf("after a new login: %v", err)
	}
	// A revoked access token with a good refresh token: refreshed and
	// sent again, no call lost. The new token refused at once as well:
	// refreshing does not help, a login does.
	before = srv.Counts()
	srv.RevokeAccessTokens()
	if err := echo(ctx, cs2, "f"); err != nil {
		t.Fatalf("after the access token was revoked: %v", err)
	}
	if c := srv.Counts(); c.RefreshGrants != before.RefreshGrants+1 || c.MCPUnauthorized != before.MCPUnauthorized+1 {
		t.Errorf("counts %+v then %+v: want one 401 answered by one refresh", before, c)
	}
	srv.RevokeAccessTokens()
	if err := echo(ctx, cs2, "g"); !strings.Contains(fmt.Sprint(err), "refused an access token that was just refreshed: run `tether login demo`") {
		t.Errorf("a fresh token refused at once: %v", err)
	}
}

// Tokens for another server, or for another registered client, are not
// used: the connection needs a login.
func TestStoredTokenMustMatchTheManifest(t *testing.T) {
	store := NewStore(t.TempDir())
	if err := store.Save("demo", &Record{Server: "https://a.example/mcp", ClientID: "app", AccessToken: "x", Obtained: time.Now()}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ server, client, want string }{
		{"https://b.example/mcp", "", "another server"},
		{"https://a.example/mcp", "other", "another client"},
		{"https://a.example/mcp", "app", ""},
	} {
		_, err := store.Source("demo", tc.server, tc.client, "", nil).Token()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc, err)
			}
			continue
		}
		if ae, ok := AsAuthRequired(err); !ok || !ae.Login || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an AuthRequiredError saying %q", tc, err, tc.want)
		}
	}
	// A file that is not a token record is reported, never quoted.
	if err := os.WriteFile(store.Path("junk"), []byte(`{"accessToken": "secret-junk", "extra": 1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := store.Source("junk", "https://a.example/mcp", "", "", nil).Token()
	if err == nil || strings.Contains(err.Error(), "secret-junk") || !strings.Contains(err.Error(), store.Path("junk")) {
		t.Errorf("junk token file: %v", err)
	}
}

// Watch reports a token file another process wrote, not the store's own
// writes (a refresh), and a file removed.
func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	state := t.TempDir()
	store := NewStore(state)
	changes := make(chan string, 10)
	done := make(chan error, 1)
	go func() { done <- store.Watch(ctx, discard(), func(n string) { changes <- n }) }()
	waitFor(t, func() bool { _, err := os.Stat(store.Dir()); return err == nil }, "the token directory")

	expect := func(want string) {
		t.Helper()
		select {
		case got := <-changes:
			if got != want {
				t.Fatalf("change of %q, want %q", got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no change reported for %q", want)
		}
	}
	// Another process (a login) writes: reported.
	other := NewStore(state)
	rec := &Record{Server: "s", AccessToken: "a1", Obtained: time.Now()}
	if err := other.Save("demo", rec); err != nil {
		t.Fatal(err)
	}
	expect("demo")
	// This store's own write: quiet. A later write by the other: reported.
	rec.AccessToken = "a2"
	if err := store.Save("demo", rec); err != nil {
		t.Fatal(err)
	}
	rec.AccessToken = "a3"
	if err := other.Save("demo", rec); err != nil {
		t.Fatal(err)
	}
	expect("demo")
	if err := os.Remove(other.Path("demo")); err != nil {
		t.Fatal(err)
	}
	expect("demo")
	select {
	case n := <-changes:
		t.Errorf("an extra change of %q", n)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	if err := <-done; err != nil {
		t.Error(err)
	}
}

// The client credentials grant: a token at the first 401, the manifest's
// scopes asked for, a new token once one expires (no failed call), and a
// refused secret reported as AuthRequired without the secret.
func TestClientCredentials(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{AccessTTL: time.Second, Clients: map[string]string{"svc": "svc-secret-1"}})
	h, err := NewClientCredentials("cc", "svc", "svc-secret-1", []string{"tools.read", "tools.write"})
	if err != nil {
		t.Fatal(err)
	}
	// The connect ctx ends before the token expires: later tokens must
	// not depend on it.
	cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
	cs, err := session(t, cctx, srv, NewGuard(h, nil, nil))
	ccancel()
	if err != nil {
		t.Fatal(err)
	}
	// A scope is a set (RFC 6749 §3.3); the go-sdk handler's union of
	// scopes does not keep their order.
	if got := strings.Fields(srv.Counts().LastScope); !sameSet(got, []string{"tools.read", "tools.write"}) {
		t.Errorf("token scope %q, want the manifest's (tools.read tools.write)", got)
	}
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		if err := echo(ctx, cs, "x"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := srv.Counts(); c.ClientGrants < 3 {
		t.Errorf("%d client credentials grants over 3s of 1s tokens, want a new token as each expires", c.ClientGrants)
	}

	bad, err := NewClientCredentials("cc", "svc", "wrong-secret-2", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = session(t, ctx, srv, NewGuard(bad, nil, nil))
	ae, ok := AsAuthRequired(err)
	if !ok || ae.Login || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret-2") {
		t.Errorf("refused client: %v; want an AuthRequiredError with invalid_client and no secret", err)
	}
}

// The RoundTripper carries the token on requests the go-sdk does not make
// and answers their 401 itself: the first one authorizes, a revoked token
// is refreshed, and the request goes out again with its body.
func TestRoundTripper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{Clients: map[string]string{"svc": "s3cret"}})
	h, err := NewClientCredentials("cc", "svc", "s3cret", nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(srv.MCPURL)
	client := &http.Client{Transport: &RoundTripper{
		Base: http.DefaultTransport, Handler: NewGuard(h, nil, nil),
		Origin: func(r *http.Request) bool { return r.URL.Host == u.Host },
	}}
	post := func() int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.MCPURL, strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(); code != http.StatusOK {
		t.Fatalf("first request: %d", code)
	}
	srv.RevokeAccessTokens()
	if code := post(); code != http.StatusOK {
		t.Fatalf("after revocation: %d", code)
	}
	if c := srv.Counts(); c.ClientGrants != 2 || c.MCPUnauthorized != 2 {
		t.Errorf("counts %+v: want two 401s, each answered by one grant", c)
	}
}

// Scopes a server asked for with a 403 (step-up) are noted for the next
// login, which asks for them beside the ones it discovers.
func TestStepUpScopesReachTheNextLogin(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{Scopes: []string{"mcp:read"}})
	store := NewStore(t.TempDir())
	login(t, ctx, srv, store, "demo", nil, "")
	ts := store.Source("demo", srv.MCPURL, "", "", nil)
	h := NewStoredHandler(ts)
	req, _ := http.NewRequest(http.MethodPost, srv.MCPURL, nil)
	resp := &http.Response{StatusCode: http.StatusForbidden, Body: http.NoBody, Header: http.Header{
		"Www-Authenticate": {`Bearer error="insufficient_scope", scope="mcp:read mcp:write"`},
	}}
	err := h.Authorize(ctx, req, resp)
	ae, ok := AsAuthRequired(err)
	if !ok || !ae.StepUp || !strings.Contains(err.Error(), `"mcp:read mcp:write"`) {
		t.Fatalf("step-up: %v", err)
	}
	rec, _ := store.Load("demo")
	if strings.Join(rec.RequiredScopes, " ") != "mcp:read mcp:write" {
		t.Errorf("required scopes %q", rec.RequiredScopes)
	}
	login(t, ctx, srv, store, "demo", nil, "")
	if got := srv.Counts().LastScope; !strings.Contains(got, "mcp:write") {
		t.Errorf("the next login asked for %q, want mcp:write too", got)
	}
	if rec, _ := store.Load("demo"); len(rec.RequiredScopes) != 0 {
		t.Errorf("required scopes %q kept after the login that asked for them", rec.RequiredScopes)
	}
}

// A registered confidential client logs in with its secret, which the
// token file never holds; the manifest's secret serves the refreshes.
func TestPreregisteredClient(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{AccessTTL: time.Second, Clients: map[string]string{"app": "app-secret-9"}})
	store := NewStore(t.TempDir())
	login(t, ctx, srv, store, "demo", &spec.OAuthAuthorizationCode{ClientID: "app"}, "app-secret-9")
	data, err := os.ReadFile(store.Path("demo"))
	if err != nil || strings.Contains(string(data), "app-secret-9") {
		t.Fatalf("token file holds the manifest's secret (%v)", err)
	}
	if c := srv.Counts(); c.Register != 0 {
		t.Errorf("a registered client registered again: %+v", c)
	}
	cs, err := session(t, ctx, srv, NewGuard(NewStoredHandler(store.Source("demo", srv.MCPURL, "app", "app-secret-9", nil)), nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := store.Load("demo")
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Until(rec.Expiry)) // the token expired: the next call needs a refresh
	if err := echo(ctx, cs, "x"); err != nil {
		t.Fatal(err)
	}
	if c := srv.Counts(); c.RefreshGrants < 1 {
		t.Errorf("no refresh with the manifest's secret: %+v", c)
	}
}

func waitFor(t *testing.T, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
