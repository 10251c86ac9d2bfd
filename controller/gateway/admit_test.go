package gateway

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/controller/httpguard"
)

// request sends one raw request to the gateway with the given headers and
// returns the status code.
func request(t *testing.T, method, url, body string, header map[string]string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestForeignOriginRefused: the streamable HTTP spec asks servers to check
// Origin against DNS rebinding; a browser page of another site gets 403 on
// every method, loopback origins and the allow-list pass.
func TestForeignOriginRefused(t *testing.T) {
	allow, err := httpguard.ParseOrigins([]string{"https://app.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	g := New(Options{AllowedOrigins: allow})
	url, _ := serveOn(t, g, "127.0.0.1:0", "")
	for _, tc := range []struct {
		origin string
		want   int
	}{
		{"", http.StatusOK},
		{"http://localhost:6274", http.StatusOK},
		{"https://app.example.com", http.StatusOK},
		{"https://evil.example", http.StatusForbidden},
		{"null", http.StatusForbidden},
	} {
		h := map[string]string{}
		if tc.origin != "" {
			h["Origin"] = tc.origin
		}
		if got := request(t, http.MethodPost, url, initializeBody, h); got != tc.want {
			t.Errorf("POST initialize with Origin %q: %d, want %d", tc.origin, got, tc.want)
		}
	}
	evil := map[string]string{"Origin": "https://evil.example", sessionIDHeader: "any"}
	for _, method := range []string{http.MethodGet, http.MethodDelete} {
		if got := request(t, method, url, "", evil); got != http.StatusForbidden {
			t.Errorf("%s with a foreign Origin: %d, want 403", method, got)
		}
	}
}
