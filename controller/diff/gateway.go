package diff

import (
	"context"
	"fmt"
	"net/http"
	neturl "net/url"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxListed bounds how many names of each kind ListGateway takes.
const MaxListed = 100000

// ListGateway lists what a running tether's gateway serves (its
// streamable HTTP endpoint, url), as an MCP client: tools, prompts,
// resources and templates. token, when set, is sent as the bearer token
// (tether run --auth-token-file); it appears in no error.
func ListGateway(ctx context.Context, url, token string) (Listing, error) {
	u, err := neturl.Parse(url)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return Listing{}, fmt.Errorf("--gateway %q: not an http(s) URL", url)
	}
	hc := &http.Client{Transport: bearer{token: token, scheme: u.Scheme, host: u.Host, next: http.DefaultTransport}}
	client := mcp.NewClient(&mcp.Implementation{Name: "tether-diff", Version: "v1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
	if err != nil {
		return Listing{}, fmt.Errorf("the gateway at %s: %s", url, redact(err, token))
	}
	defer cs.Close()
	var l Listing
	caps := cs.InitializeResult().Capabilities
	list := func(kind string, names *[]string, seq func(yield func(string, error) bool)) error {
		for n, err := range seq {
			if err != nil {
				return fmt.Errorf("the gateway at %s: listing %s: %s", url, kind, redact(err, token))
			}
			if len(*names) >= MaxListed {
				return fmt.Errorf("the gateway at %s lists more than %d %s", url, MaxListed, kind)
			}
			*names = append(*names, n)
		}
		return nil
	}
	if err := list("tools", &l.Tools, func(yield func(string, error) bool) {
		for t, err := range cs.Tools(ctx, nil) {
			if !yield(name(t, err, func(t *mcp.Tool) string { return t.Name })) {
				return
			}
		}
	}); err != nil {
		return Listing{}, err
	}
	if caps != nil && caps.Prompts != nil {
		if err := list("prompts", &l.Prompts, func(yield func(string, error) bool) {
			for p, err := range cs.Prompts(ctx, nil) {
				if !yield(name(p, err, func(p *mcp.Prompt) string { return p.Name })) {
					return
				}
			}
		}); err != nil {
			return Listing{}, err
		}
	}
	if caps != nil && caps.Resources != nil {
		if err := list("resources", &l.Resources, func(yield func(string, error) bool) {
			for r, err := range cs.Resources(ctx, nil) {
				if !yield(name(r, err, func(r *mcp.Resource) string { return r.URI })) {
					return
				}
			}
		}); err != nil {
			return Listing{}, err
		}
		if err := list("resource templates", &l.Templates, func(yield func(string, error) bool) {
			for t, err := range cs.ResourceTemplates(ctx, nil) {
				if !yield(name(t, err, func(t *mcp.ResourceTemplate) string { return t.URITemplate })) {
					return
				}
			}
		}); err != nil {
			return Listing{}, err
		}
	}
	return l, nil
}

func name[T any](v T, err error, f func(T) string) (string, error) {
	if err != nil {
		return "", err
	}
	return f(v), nil
}

// redact keeps the token out of an error's text.
func redact(err error, token string) string {
	s := err.Error()
	if token != "" {
		s = strings.ReplaceAll(s, token, "[redacted]")
	}
	return s
}

// bearer sends the token to the gateway's origin (scheme and host) only:
// a redirect elsewhere must not carry it (net/http drops the header on such
// a redirect, but a RoundTripper that adds it would put it back).
type bearer struct {
	token, scheme, host string
	next                http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	if b.token == "" || r.URL.Scheme != b.scheme || !strings.EqualFold(r.URL.Host, b.host) {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}
