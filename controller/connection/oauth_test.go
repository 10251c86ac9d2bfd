package connection

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/controller/oauth/oauthtest"
	"github.com/tether-mcp/tether/spec"
)

func ccSpec(url, transport, secretFile string) *spec.Spec {
	s := &spec.Spec{HTTP: &spec.HTTPSpec{URL: url, Transport: transport, OAuth: &spec.OAuthSpec{
		ClientCredentials: &spec.OAuthClientCredentials{ClientID: "svc", ClientSecret: spec.SecretValue{ValueFrom: &spec.ValueFrom{File: secretFile}}},
	}}}
	return s
}

// A clientCredentials session, over streamable HTTP and over SSE: the
// go-sdk's calls and tether's raw ones (the gateway's fast path, the raw
// ping) all carry a token, across token lifetimes; what a server quotes of
// the token, and the client secret, are redacted from results, errors and
// logs.
func TestOAuthClientCredentialsSession(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{AccessTTL: time.Second, Clients: map[string]string{"svc": "svc-secret-4711"}})
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("svc-secret-4711\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ transport, url string }{{spec.TransportStreamable, srv.MCPURL}, {spec.TransportSSE, srv.SSEURL}} {
		t.Run(tc.transport, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var logs bytes.Buffer
			s, err := Connect(ctx, Request{
				Name: "cc", Spec: ccSpec(tc.url, tc.transport, "secret"), ManifestDir: dir,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			deadline := time.Now().Add(2500 * time.Millisecond)
			for i := 0; time.Now().Before(deadline); i++ {
				res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}, nil)
				if err != nil || res.IsError {
					t.Fatalf("call %d: %v %+v", i, err, res)
				}
				if tc.transport == spec.TransportStreamable {
					raw, isErr, err := s.CallToolRaw(ctx, "echo", []RawParam{{Key: "arguments", Value: json.RawMessage(`{"text":"y"}`)}}, nil)
					if err != nil || isErr || !strings.Contains(string(raw), "echo: y") {
						t.Fatalf("raw call %d: %v %s", i, err, raw)
					}
					if err := s.Probe(ctx); err != nil {
						t.Fatalf("probe %d: %v", i, err)
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
			if c := srv.Counts(); c.ClientGrants < 3 {
				t.Errorf("%d tokens over 2.5s of 1s tokens", c.ClientGrants)
			}
			res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "leak", Arguments: map[string]any{}}, nil)
			if err != nil || !res.IsError {
				t.Fatalf("leak: %v %+v", err, res)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if tc.transport == spec.TransportStreamable && !strings.Contains(text, "Bearer "+Redacted) {
				t.Errorf("the token a server quoted in an error result is not redacted: %q", text)
			}
			s.log.Debug("a line that quotes the client secret svc-secret-4711 and a token " + s.red.live.vals[len(s.red.live.vals)-1])
			for _, tok := range append(srv.Issued(), "svc-secret-4711") {
				if strings.Contains(text, tok) || strings.Contains(logs.String(), tok) {
					t.Errorf("%q shows in the result %q or a log line:\n%s", tok, text, logs.String())
				}
			}
			if !strings.Contains(logs.String(), Redacted) {
				t.Errorf("the log line was not redacted:\n%s", logs.String())
			}
		})
	}
}

// An authorizationCode connection without a stored token fails its connect
// at once with an AuthRequiredError that names tether login, without a
// request to the server; refused client credentials are an
// AuthRequiredError too, but not one a login fixes.
func TestOAuthConnectNeedsAToken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{Clients: map[string]string{"svc": "right-secret"}})
	ac := &spec.Spec{HTTP: &spec.HTTPSpec{URL: srv.MCPURL, OAuth: &spec.OAuthSpec{AuthorizationCode: &spec.OAuthAuthorizationCode{}}}}
	_, err := Connect(ctx, Request{Name: "ac", Spec: ac, OAuth: OAuth{Tokens: oauth.NewStore(t.TempDir())}})
	ae, ok := oauth.AsAuthRequired(err)
	if !ok || !ae.Login || !strings.Contains(err.Error(), "no token is stored for this connection: run `tether login ac`") {
		t.Fatalf("connect without a token: %v", err)
	}
	if c := srv.Counts(); c.MCP != 0 {
		t.Errorf("%d requests reached the server without a token", c.MCP)
	}
	_, err = Connect(ctx, Request{Name: "ac", Spec: ac})
	if !strings.Contains(err.Error(), "no state directory") {
		t.Errorf("connect without a token store: %v", err)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte("wrong-secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Connect(ctx, Request{Name: "cc", Spec: ccSpec(srv.MCPURL, "", "secret"), ManifestDir: dir})
	ae, ok = oauth.AsAuthRequired(err)
	if !ok || ae.Login || !strings.Contains(err.Error(), "invalid_client") || strings.Contains(err.Error(), "wrong-secret") {
		t.Fatalf("refused client credentials: %v", err)
	}
	_, err = Connect(ctx, Request{Name: "cc", Spec: ccSpec(srv.MCPURL, "", "missing"), ManifestDir: dir})
	if err == nil || !strings.Contains(err.Error(), "http.oauth.clientCredentials.clientSecret: valueFrom.file") {
		t.Errorf("a missing secret file: %v", err)
	}
}

// Login over the SSE transport, which has no OAuth support of its own: the
// RoundTripper answers the server's 401 with the interactive handler; the
// stored tokens then serve a session as tether run opens it.
func TestLoginOverSSE(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := oauthtest.New(t, oauthtest.Options{})
	store := oauth.NewStore(t.TempDir())
	sp := &spec.Spec{HTTP: &spec.HTTPSpec{URL: srv.SSEURL, Transport: spec.TransportSSE, OAuth: &spec.OAuthSpec{AuthorizationCode: &spec.OAuthAuthorizationCode{}}}}
	pr, pw := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		oauthtest.Person(ctx, pr, func(err error) { t.Errorf("person: %v", err) })
	}()
	res, err := Login(ctx, Request{Name: "sse", Spec: sp}, oauth.LoginOptions{Store: store, Out: pw})
	pw.Close()
	<-done
	if err != nil || res.Tools != 2 || res.Server.Name != "oauthtest" {
		t.Fatalf("login: %+v, %v", res, err)
	}
	if c := srv.Counts(); c.Authorize != 1 || c.CodeGrants != 1 || c.LastAuthorizeResource != srv.SSEURL {
		t.Errorf("counts after the login: %+v", c)
	}
	s, err := Connect(ctx, Request{Name: "sse", Spec: sp, OAuth: OAuth{Tokens: store}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "x"}}, nil); err != nil || r.IsError {
		t.Fatalf("call on the stored tokens: %v", err)
	}
}
