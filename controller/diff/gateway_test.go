package diff

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// The bearer token goes to the --gateway URL's origin only: a gateway (or
// something in front of it) that redirects elsewhere must not get it sent on.
func TestListGatewayKeepsTheTokenOnItsOrigin(t *testing.T) {
	var mu sync.Mutex
	var sentHere, sentThere []string
	there := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sentThere = append(sentThere, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Error(w, "no", http.StatusNotFound)
	}))
	defer there.Close()
	here := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sentHere = append(sentHere, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Redirect(w, r, there.URL+"/mcp", http.StatusTemporaryRedirect)
	}))
	defer here.Close()
	_, err := ListGateway(context.Background(), here.URL+"/mcp", "s3cret-token")
	if err == nil {
		t.Fatal("listing a gateway that only redirects succeeded")
	}
	if strings.Contains(err.Error(), "s3cret-token") {
		t.Errorf("the error shows the token: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sentHere) == 0 || sentHere[0] != "Bearer s3cret-token" {
		t.Fatalf("the gateway got Authorization %q, want the bearer token", sentHere)
	}
	if len(sentThere) == 0 {
		t.Fatal("the redirect was not followed: the test shows nothing")
	}
	for _, a := range sentThere {
		if a != "" {
			t.Errorf("the other origin got Authorization %q", a)
		}
	}
}

func TestListGatewayRefusesANonHTTPURL(t *testing.T) {
	for _, u := range []string{"127.0.0.1:8808/mcp", "file:///etc/passwd", "://x", "http:///mcp"} {
		if _, err := ListGateway(context.Background(), u, ""); err == nil || !strings.Contains(err.Error(), "not an http(s) URL") {
			t.Errorf("ListGateway(%q) = %v, want not an http(s) URL", u, err)
		}
	}
}

// Without a token, nothing is redacted: the error is the client's own text.
func TestListGatewayErrorWithoutToken(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close() // refused
	_, err := ListGateway(context.Background(), srv.URL+"/mcp", "")
	if err == nil || strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("err %v", err)
	}
}
