package connection

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
	"testing"
)

// TestRedactorShapes: a secret is redacted in every shape a server may
// print it in: each line of a multi-line value on its own (a stderr tail is
// split into lines), the whole value, and either as base64 (standard and
// URL alphabets, padded and raw) or URL-encoded (query and path). Lines
// shorter than MinLineRedactLen are structure and stay.
func TestRedactorShapes(t *testing.T) {
	const line1, line2, short, eight = "first-Line-s3cret+/?&= x", "second-LINE-s3cret", "short12", "exactly8"
	value := line1 + "\r\n" + line2 + "\n}\n" + short + "\n  " + eight + "\n"
	r := newRedactor([]namedValue{{"KEY", value}}, nil)
	json64 := func(s string) string { b, _ := json.Marshal(s); return string(b[1 : len(b)-1]) }
	shown := map[string]string{
		"the whole value":                value,
		"the whole, JSON-escaped":        json64(value),
		"line 1":                         line1,
		"line 2":                         line2,
		"line 2 with its CR":             line2 + "\r",
		"a line of MinLineRedactLen":     eight,
		"base64 std":                     base64.StdEncoding.EncodeToString([]byte(value)),
		"base64 url":                     base64.URLEncoding.EncodeToString([]byte(value)),
		"base64 raw std":                 base64.RawStdEncoding.EncodeToString([]byte(value)),
		"base64 raw url":                 base64.RawURLEncoding.EncodeToString([]byte(value)),
		"base64 of line 1":               base64.StdEncoding.EncodeToString([]byte(line1)),
		"base64 raw url of line 2":       base64.RawURLEncoding.EncodeToString([]byte(line2)),
		"query-escaped":                  url.QueryEscape(value),
		"path-escaped":                   url.PathEscape(value),
		"query-escaped line 1":           url.QueryEscape(line1),
		"path-escaped line 1":            url.PathEscape(line1),
		"line 1 in a URL query":          "https://example.com/cb?code=" + url.QueryEscape(line1) + "&state=1",
		"a header carrying it in base64": "Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte(value)),
	}
	for what, secret := range shown {
		got := r.String("before " + secret + " after")
		if !strings.Contains(got, Redacted) {
			t.Errorf("%s: %q not redacted: %q", what, secret, got)
		}
		for _, part := range []string{line1, line2, url.QueryEscape(line1), base64.RawStdEncoding.EncodeToString([]byte(value))} {
			if strings.Contains(got, part) {
				t.Errorf("%s: %q still shows %q", what, got, part)
			}
		}
	}
	// Short lines are structure, not secrets: they stay.
	for _, keep := range []string{"map[a:1]}", "got " + short + " items"} {
		if got := r.String(keep); got != keep {
			t.Errorf("String(%q) = %q: a line under MinLineRedactLen was redacted", keep, got)
		}
	}
	// The stderr tail, line by line, keeps no line of the value.
	tail := newStderrTail(r)
	_, _ = tail.Write([]byte("starting with KEY=" + value + "\nauth failed for " + value))
	for _, l := range tail.Lines() {
		if strings.Contains(l, line1) || strings.Contains(l, line2) {
			t.Errorf("stderr tail line %q shows a line of the secret", l)
		}
	}
}

// TestLiveSecretShapes: tokens learnt while a session runs (OAuth tokens,
// the session id) are redacted in the same shapes as the manifest's values.
func TestLiveSecretShapes(t *testing.T) {
	const token = "live-t0ken/with+chars?"
	l := &liveSecrets{}
	l.add(token)
	for _, shown := range []string{
		token,
		base64.StdEncoding.EncodeToString([]byte(token)),
		base64.RawURLEncoding.EncodeToString([]byte(token)),
		url.QueryEscape(token),
		url.PathEscape(token),
	} {
		if got := l.replace("x " + shown + " y"); got != "x "+Redacted+" y" {
			t.Errorf("replace(%q) = %q", shown, got)
		}
	}
}
