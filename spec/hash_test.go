package spec

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// baseConn is a valid connection with every field set, for hash tests.
func baseConn(t *testing.T) *McpConnection {
	t.Helper()
	docs := DecodeFile("base.yaml", []byte(`apiVersion: tether.dev/v1alpha1
kind: McpConnection
metadata: {name: base, labels: {team: a}}
spec:
  stdio:
    command: srv
    args: [-v]
    workingDir: /srv
    env:
      - {name: A, value: x}
      - {name: B, valueFrom: {file: /run/b}}
  toolPrefix: p
  tools: {allow: ["a*"], deny: ["b*"]}
  healthCheck: {interval: 10s, timeout: 1s, failureThreshold: 2}
  backoff: {initial: 1s, max: 2s}
  callTimeout: 5s
`))
	if len(docs) != 1 || docs[0].Conn == nil {
		t.Fatalf("base manifest invalid: %v", docs)
	}
	return docs[0].Conn
}

// TestHashesFollowChanges changes one thing at a time: every change moves
// Hash; only what needs a reconnect moves ConnectHash.
func TestHashesFollowChanges(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		name        string
		change      func(c *McpConnection)
		wantConnect bool // ConnectHash changes too
	}{
		{"command", func(c *McpConnection) { c.Spec.Stdio.Command = "other" }, true},
		{"args", func(c *McpConnection) { c.Spec.Stdio.Args = append(c.Spec.Stdio.Args, "-x") }, true},
		{"args order", func(c *McpConnection) { c.Spec.Stdio.Args = []string{"-x", "-v"} }, true},
		{"workingDir", func(c *McpConnection) { c.Spec.Stdio.WorkingDir = "/tmp" }, true},
		{"env value", func(c *McpConnection) { c.Spec.Stdio.Env[0].Value = str("y") }, true},
		{"env name", func(c *McpConnection) { c.Spec.Stdio.Env[0].Name = "AA" }, true},
		{"env source file", func(c *McpConnection) { c.Spec.Stdio.Env[1].ValueFrom.File = "/run/c" }, true},
		{"env source kind", func(c *McpConnection) { c.Spec.Stdio.Env[1].ValueFrom = &ValueFrom{Env: "B"} }, true},
		{"env added", func(c *McpConnection) { c.Spec.Stdio.Env = append(c.Spec.Stdio.Env, EnvVar{Name: "C", Value: str("")}) }, true},
		{"transport kind", func(c *McpConnection) {
			c.Spec.Stdio = nil
			c.Spec.HTTP = &HTTPSpec{URL: "http://127.0.0.1:1/mcp"}
		}, true},
		{"suspend", func(c *McpConnection) { c.Spec.Suspend = true }, false},
		{"toolPrefix", func(c *McpConnection) { c.Spec.ToolPrefix = str("q") }, false},
		{"toolPrefix empty", func(c *McpConnection) { c.Spec.ToolPrefix = str("") }, false},
		{"tools allow", func(c *McpConnection) { c.Spec.Tools.Allow = []string{"c*"} }, false},
		{"tools deny", func(c *McpConnection) { c.Spec.Tools.Deny = nil }, false},
		{"health interval", func(c *McpConnection) { c.Spec.HealthCheck.Interval = &Duration{time.Minute} }, false},
		{"health timeout", func(c *McpConnection) { c.Spec.HealthCheck.Timeout = &Duration{2 * time.Second} }, false},
		{"failureThreshold", func(c *McpConnection) { n := 5; c.Spec.HealthCheck.FailureThreshold = &n }, false},
		{"backoff", func(c *McpConnection) { c.Spec.Backoff.Max = &Duration{time.Minute} }, false},
		{"callTimeout", func(c *McpConnection) { c.Spec.CallTimeout = &Duration{time.Minute} }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := baseConn(t)
			changed := base.DeepCopy()
			tt.change(changed)
			if base.Spec.Hash() == changed.Spec.Hash() {
				t.Errorf("Hash did not change")
			}
			if got := base.Spec.ConnectHash() != changed.Spec.ConnectHash(); got != tt.wantConnect {
				t.Errorf("ConnectHash changed = %v, want %v", got, tt.wantConnect)
			}
		})
	}
}

func TestHashHTTP(t *testing.T) {
	implicit := &Spec{HTTP: &HTTPSpec{URL: "http://h/mcp"}}
	explicit := &Spec{HTTP: &HTTPSpec{URL: "http://h/mcp", Transport: TransportStreamable}}
	sse := &Spec{HTTP: &HTTPSpec{URL: "http://h/mcp", Transport: TransportSSE}}
	if implicit.Hash() != explicit.Hash() || implicit.ConnectHash() != explicit.ConnectHash() {
		t.Error("the default transport written out changes a hash")
	}
	if implicit.ConnectHash() == sse.ConnectHash() {
		t.Error("ConnectHash ignores the http transport")
	}
	headers := explicit.DeepCopy()
	headers.HTTP.Headers = []EnvVar{{Name: "Authorization", ValueFrom: &ValueFrom{File: "/t"}}}
	if headers.ConnectHash() == explicit.ConnectHash() {
		t.Error("ConnectHash ignores headers")
	}
	url := explicit.DeepCopy()
	url.HTTP.URL = "http://h/other"
	if url.ConnectHash() == explicit.ConnectHash() {
		t.Error("ConnectHash ignores the url")
	}
}

func TestHashDefaults(t *testing.T) {
	bare := &Spec{Stdio: &StdioSpec{Command: "a"}}
	written := &Spec{
		Stdio:       &StdioSpec{Command: "a", Args: []string{}},
		Tools:       &ToolFilter{},
		HealthCheck: &HealthCheck{Interval: &Duration{30 * time.Second}, Timeout: &Duration{5 * time.Second}},
		Backoff:     &Backoff{Max: &Duration{3 * time.Second}},
		CallTimeout: &Duration{time.Minute},
	}
	if bare.Hash() != written.Hash() {
		t.Errorf("defaults written out change Hash: %s vs %s", bare.Hash(), written.Hash())
	}
	if !strings.HasPrefix(bare.Hash(), "sha256:") || len(bare.Hash()) != len("sha256:")+64 {
		t.Errorf("Hash = %q, want sha256:<64 hex>", bare.Hash())
	}
	before := bare.Hash()
	if bare.HealthCheck != nil || bare.Backoff != nil {
		t.Error("Hash mutated the spec")
	}
	if bare.Hash() != before {
		t.Error("Hash is not stable")
	}
}

// The OAuth settings are part of what a session connects with: a change of
// any of them reconnects, and a copy shares nothing with the original.
func TestOAuthHashAndCopy(t *testing.T) {
	secret := "s"
	base := &Spec{HTTP: &HTTPSpec{URL: "http://h/mcp", OAuth: &OAuthSpec{
		AuthorizationCode: &OAuthAuthorizationCode{ClientID: "app", ClientSecret: &SecretValue{Value: &secret}, Scopes: []string{"a"}},
	}}}
	changes := map[string]func(s *Spec){
		"scopes":    func(s *Spec) { s.HTTP.OAuth.AuthorizationCode.Scopes[0] = "b" },
		"client ID": func(s *Spec) { s.HTTP.OAuth.AuthorizationCode.ClientID = "other" },
		"secret":    func(s *Spec) { *s.HTTP.OAuth.AuthorizationCode.ClientSecret.Value = "t" },
		"flow": func(s *Spec) {
			s.HTTP.OAuth = &OAuthSpec{ClientCredentials: &OAuthClientCredentials{ClientID: "app", ClientSecret: SecretValue{ValueFrom: &ValueFrom{File: "/s"}}}}
		},
		"no oauth": func(s *Spec) { s.HTTP.OAuth = nil },
	}
	for name, change := range changes {
		cp := base.DeepCopy()
		if !reflect.DeepEqual(cp, base) {
			t.Fatalf("%s: the copy differs", name)
		}
		before := base.ConnectHash()
		change(cp)
		if cp.ConnectHash() == before {
			t.Errorf("%s: ConnectHash did not change", name)
		}
		if base.ConnectHash() != before || *base.HTTP.OAuth.AuthorizationCode.ClientSecret.Value != "s" || base.HTTP.OAuth.AuthorizationCode.Scopes[0] != "a" {
			t.Errorf("%s: changing the copy changed the original", name)
		}
	}
}

// TestHashLifecycleDefaults: a lifecycle written out with its defaults hashes
// as one left implicit, so adding `mode: Always` changes nothing.
func TestHashLifecycleDefaults(t *testing.T) {
	base := Spec{Stdio: &StdioSpec{Command: "srv"}}
	always := base
	always.Lifecycle = &Lifecycle{Mode: LifecycleAlways}
	empty := base
	empty.Lifecycle = &Lifecycle{}
	if base.Hash() != always.Hash() || base.Hash() != empty.Hash() {
		t.Error("mode Always (or an empty lifecycle) changed the hash")
	}
	onDemand := base
	onDemand.Lifecycle = &Lifecycle{Mode: LifecycleOnDemand}
	explicit := base
	explicit.Lifecycle = &Lifecycle{Mode: LifecycleOnDemand, IdleTimeout: &Duration{DefaultIdleTimeout}}
	if onDemand.Hash() != explicit.Hash() || onDemand.Hash() == base.Hash() {
		t.Error("OnDemand's default idleTimeout, written out or not, must hash alike and unlike Always")
	}
	if onDemand.ConnectHash() != base.ConnectHash() {
		t.Error("the lifecycle is not a reason to reconnect")
	}
}
