//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/controller/oauth/oauthtest"
	"github.com/tether-mcp/tether/hack/testport"
	"github.com/tether-mcp/tether/spec"
)

// tetherLogin runs the real `tether login NAME --dir dir` with the test in
// the person's part: it follows the authorization URL the login prints, as
// a browser would. It returns everything the login wrote.
func tetherLogin(t *testing.T, dir, name string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), "login", name, "--dir", dir, "--no-browser", "--timeout", "60s")
	var out syncBuffer
	cmd.Stderr = &out
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	oauthtest.Person(ctx, io.TeeReader(stdout, &out), func(err error) { t.Errorf("the person: %v", err) })
	err = cmd.Wait()
	return out.String(), err
}

// gatewayCall calls a tool through tether's gateway.
func gatewayCall(gc *gatewayClient, tool, text string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	args := map[string]any{}
	if text != "" {
		args["text"] = text
	}
	res, err := gc.session.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		return "", err
	}
	if res.IsError {
		return textOf(res), fmt.Errorf("tool error: %s", textOf(res))
	}
	return textOf(res), nil
}

// noSecretsIn fails for every secret found in any of the texts.
func noSecretsIn(t *testing.T, secrets []string, texts map[string]string) {
	t.Helper()
	if len(secrets) == 0 {
		t.Fatal("no secrets to look for")
	}
	for what, text := range texts {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s shows a secret (%.8s…)", what, s)
			}
		}
	}
}

// statusTexts reads every status file under dir.
func statusTexts(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".status.yaml") {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestOAuthAuthorizationCodeEndToEnd drives the real tether against a real
// OAuth-protected MCP server (the go-sdk's auth.RequireBearerToken in front
// of its MCP server, and an authorization server): without a login the
// connection is AuthRequired and the server hears nothing; `tether login`
// (the test playing the person) brings it to Connected by itself; calls
// through the gateway go on across several token lifetimes with no call
// lost, the rotated refresh tokens written back; a refresh the server
// refuses makes it AuthRequired again, quietly, until the next login. No
// token shows in any status file, log line, /metrics or error.
func TestOAuthAuthorizationCodeEndToEnd(t *testing.T) {
	srv := oauthtest.New(t, oauthtest.Options{AccessTTL: 2 * time.Second, Scopes: []string{"mcp:tools"}})
	dir := t.TempDir()
	manifest := filepath.Join(dir, "remote.yaml")
	writeFile(t, manifest, httpManifest("remote", srv.MCPURL, "streamable", "    oauth:\n      authorizationCode: {}\n"))
	gw, metricsPort := testport.Free(t), testport.Free(t)
	tt := startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gw), "--metrics-addr", fmt.Sprintf("127.0.0.1:%d", metricsPort))
	waitTCP(t, gw, 20*time.Second)
	metricsURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)

	// No token yet: AuthRequired, nothing sent to the server, no retries.
	st := waitStatus(t, manifest, "remote", 20*time.Second, "AuthRequired", phaseIs(spec.PhaseAuthRequired))
	ready := st.Conditions[0]
	if ready.Status != spec.ConditionFalse || ready.Reason != spec.ReasonAuthRequired ||
		ready.Message != "no token is stored for this connection: run `tether login remote`" || st.NextRetryTime != nil {
		t.Errorf("status without a token: %+v", st)
	}
	waitFor(t, 10*time.Second, "the authrequired state metric", func() (bool, string) {
		_, body, err := get(metricsURL)
		return err == nil && strings.Contains(body, `tether_connection_state{connection="remote",state="authrequired"} 1`), body
	})
	if c := srv.Counts(); c.MCP != 0 {
		t.Errorf("the server got %d requests from a connection without a token", c.MCP)
	}

	out, err := tetherLogin(t, dir, "remote")
	if err != nil || !strings.Contains(out, "Logged in: connected to oauthtest 1.0.0, 2 tools") {
		t.Fatalf("tether login: %v\n%s", err, out)
	}
	logins := out
	store := oauth.NewStore(filepath.Join(dir, ".tether"))
	for path, want := range map[string]os.FileMode{store.Dir(): 0o700, store.Path("remote"): 0o600} {
		if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: %v, want mode %v", path, err, want)
		}
	}
	first, err := store.Load("remote")
	if err != nil || first == nil {
		t.Fatalf("the login stored no token: %v", err)
	}
	waitStatus(t, manifest, "remote", 20*time.Second, "Connected after the login", phaseIs(spec.PhaseConnected))

	gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)})
	gc.waitTools(t, "remote_echo", hasAll("remote_echo"))
	before := srv.Counts()
	deadline := time.Now().Add(6 * time.Second)
	calls := 0
	for time.Now().Before(deadline) {
		if got, err := gatewayCall(gc, "remote_echo", "hi"); err != nil || got != "echo: hi" {
			t.Fatalf("call %d through the gateway: %q, %v", calls, got, err)
		}
		calls++
		time.Sleep(50 * time.Millisecond)
	}
	after := srv.Counts()
	if after.RefreshGrants-before.RefreshGrants < 2 || after.MCPUnauthorized != before.MCPUnauthorized {
		t.Errorf("%d calls over 6s of 2s tokens: %d refreshes, %d refused requests; want at least 2 refreshes and no refusal",
			calls, after.RefreshGrants-before.RefreshGrants, after.MCPUnauthorized-before.MCPUnauthorized)
	}
	t.Logf("%d calls through the gateway over 6s of 2s tokens: %d refreshes, %d refused requests",
		calls, after.RefreshGrants-before.RefreshGrants, after.MCPUnauthorized-before.MCPUnauthorized)
	rotated, err := store.Load("remote")
	if err != nil || rotated.RefreshToken == first.RefreshToken {
		t.Errorf("the rotated refresh token was not written back (%v)", err)
	}

	// The server revokes everything: the next call fails, the connection
	// becomes AuthRequired and leaves the server alone.
	srv.RevokeAccessTokens()
	srv.RevokeRefreshTokens()
	_, callErr := gatewayCall(gc, "remote_echo", "after revocation")
	if callErr == nil {
		t.Fatal("a call succeeded after every token was revoked")
	}
	st = waitStatus(t, manifest, "remote", 20*time.Second, "AuthRequired after the refused refresh", phaseIs(spec.PhaseAuthRequired))
	if msg := st.Conditions[0].Message; !strings.Contains(msg, "invalid_grant") || !strings.Contains(msg, "run `tether login remote`") {
		t.Errorf("AuthRequired message %q", msg)
	}
	quiet := srv.Counts()
	time.Sleep(2 * time.Second) // what a hot loop would fill with requests
	if c := srv.Counts(); c.MCP != quiet.MCP || c.RefusedRefreshes != quiet.RefusedRefreshes || c.RefreshGrants != quiet.RefreshGrants {
		t.Errorf("requests while waiting for a login: %+v then %+v", quiet, c)
	} else {
		t.Logf("AuthRequired for 2s: %d requests to the MCP server, %d to the token endpoint", c.MCP-quiet.MCP, c.RefusedRefreshes+c.RefreshGrants-quiet.RefusedRefreshes-quiet.RefreshGrants)
	}
	_, downErr := gatewayCall(gc, "remote_echo", "while down")

	out, err = tetherLogin(t, dir, "remote")
	if err != nil {
		t.Fatalf("second tether login: %v\n%s", err, out)
	}
	logins += out
	waitStatus(t, manifest, "remote", 20*time.Second, "Connected after the second login", phaseIs(spec.PhaseConnected))
	waitFor(t, 20*time.Second, "a call after the second login", func() (bool, string) {
		got, err := gatewayCall(gc, "remote_echo", "back")
		return err == nil && got == "echo: back", fmt.Sprint(got, err)
	})

	_, metrics, err := get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	texts := statusTexts(t, dir)
	texts["tether run's log"] = tt.logs.String()
	texts["tether login's output"] = logins
	texts["/metrics"] = metrics
	texts["the call error after revocation"] = fmt.Sprint(callErr)
	texts["the call error while down"] = fmt.Sprint(downErr)
	noSecretsIn(t, srv.Issued(), texts)
}

// TestOAuthClientCredentialsEndToEnd: a clientCredentials connection needs
// no person: Connected at once, a new token as each expires with no call
// lost; a secret the authorization server refuses makes it AuthRequired
// (retrying at the backoff's cap, not faster); the secret and the tokens
// show nowhere.
func TestOAuthClientCredentialsEndToEnd(t *testing.T) {
	const secret = "cc-e2e-secret-8b1f"
	srv := oauthtest.New(t, oauthtest.Options{AccessTTL: time.Second, Clients: map[string]string{"svc": secret}})
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "secrets", "svc"), secret+"\n")
	manifest := filepath.Join(dir, "svc.yaml")
	cc := func(file string) string {
		return httpManifest("svc", srv.MCPURL, "streamable", fmt.Sprintf(
			"    oauth:\n      clientCredentials:\n        clientID: svc\n        clientSecret: {valueFrom: {file: %s}}\n        scopes: [tools.read]\n", file))
	}
	writeFile(t, manifest, cc("secrets/svc"))
	gw := testport.Free(t)
	tt := startTether(t, dir, "--listen", fmt.Sprintf("127.0.0.1:%d", gw))
	waitTCP(t, gw, 20*time.Second)
	waitStatus(t, manifest, "svc", 20*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	if got := srv.Counts().LastScope; got != "tools.read" {
		t.Errorf("token scope %q, want the manifest's tools.read", got)
	}
	gc := connectGateway(t, &mcp.StreamableClientTransport{Endpoint: fmt.Sprintf("http://127.0.0.1:%d/mcp", gw)})
	gc.waitTools(t, "svc_echo", hasAll("svc_echo"))
	before := srv.Counts()
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if got, err := gatewayCall(gc, "svc_echo", "x"); err != nil || got != "echo: x" {
			t.Fatalf("call %d: %q, %v", i, got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if c := srv.Counts(); c.ClientGrants-before.ClientGrants < 2 {
		t.Errorf("%d new tokens over 3s of 1s tokens", c.ClientGrants-before.ClientGrants)
	}
	leak, leakErr := gatewayCall(gc, "svc_echo", "x")
	if leakErr != nil {
		t.Fatal(leakErr)
	}
	_, leakErr = gatewayCall(gc, "svc_leak", "")

	// A refused secret: AuthRequired, retried at the cap (3s), no faster.
	writeFile(t, filepath.Join(dir, "secrets", "wrong"), "not-the-secret-31c4\n")
	writeFile(t, manifest, cc("secrets/wrong"))
	st := waitStatus(t, manifest, "svc", 20*time.Second, "AuthRequired", phaseIs(spec.PhaseAuthRequired))
	if msg := st.Conditions[0].Message; !strings.Contains(msg, "invalid_client") || !strings.Contains(msg, "check spec.http.oauth.clientCredentials") || st.NextRetryTime == nil {
		t.Errorf("refused client: %+v", st)
	}
	refused := srv.Counts().RefusedClients
	time.Sleep(4 * time.Second) // a hot loop would fill it
	if n := srv.Counts().RefusedClients - refused; n > 2 {
		t.Errorf("%d refused token requests in 4s: want at most 2 at a 3s cap", n)
	} else {
		t.Logf("refused client credentials: %d token requests in 4s", n)
	}

	texts := statusTexts(t, dir)
	texts["tether run's log"] = tt.logs.String()
	texts["a result"] = leak
	texts["the error result that quoted the token"] = fmt.Sprint(leakErr)
	noSecretsIn(t, append(srv.Issued(), secret, "not-the-secret-31c4"), texts)
	if !strings.Contains(fmt.Sprint(leakErr), "Bearer [redacted]") {
		t.Errorf("the error result that quoted the token: %v", leakErr)
	}
}
