package httpguard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestOriginsAllows(t *testing.T) {
	custom, err := ParseOrigins([]string{"https://app.example.com", "http://dash.internal:3000"})
	if err != nil {
		t.Fatal(err)
	}
	star, err := ParseOrigins([]string{"*"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		origin        string
		loopback, cus bool
	}{
		{"", true, true}, // not a browser
		{"http://localhost", true, true},
		{"http://localhost:6274", true, true},
		{"https://127.0.0.1:8443", true, true},
		{"http://127.5.6.7", true, true},
		{"http://[::1]:3000", true, true},
		{"HTTP://LOCALHOST:1", true, true},
		{"https://app.example.com", false, true},
		{"HTTPS://APP.EXAMPLE.COM", false, true},
		{"http://dash.internal:3000", false, true},
		{"http://dash.internal:3001", false, false},
		{"https://evil.example", false, false},
		{"http://localhost.evil.example", false, false},
		{"http://127.0.0.1.nip.io", false, false},
		{"null", false, false},
		{"file://", false, false},
		{"ftp://localhost", false, false},
		{"http://localhost/path", false, false},
	} {
		if got := (Origins{}).Allows(tc.origin); got != tc.loopback {
			t.Errorf("default: Allows(%q) = %v, want %v", tc.origin, got, tc.loopback)
		}
		if got := custom.Allows(tc.origin); got != tc.cus {
			t.Errorf("custom: Allows(%q) = %v, want %v", tc.origin, got, tc.cus)
		}
		if !star.Allows(tc.origin) {
			t.Errorf("*: Allows(%q) = false", tc.origin)
		}
	}
}

func TestParseOriginsErrors(t *testing.T) {
	for _, bad := range []string{"example.com", "ftp://x", "https://", "https://a/b", "https://u@a", "https://a?x=1"} {
		if _, err := ParseOrigins([]string{bad}); err == nil {
			t.Errorf("ParseOrigins(%q) accepted it", bad)
		}
	}
	if _, err := ParseOrigins([]string{"loopback", " ", "https://a.example/"}); err != nil {
		t.Errorf("valid list refused: %v", err)
	}
}

// TestCheck: a foreign Host on a loopback listener and a foreign Origin get
// 403; the rest reaches next.
func TestCheck(t *testing.T) {
	loop := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8808}
	wide := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 1), Port: 8808}
	for _, tc := range []struct {
		name   string
		local  net.Addr
		host   string
		origin string
		want   int
	}{
		{"loopback", loop, "127.0.0.1:8808", "", 200},
		{"localhost", loop, "localhost:8808", "http://localhost:5173", 200},
		{"rebound host", loop, "evil.example:8808", "", 403},
		{"foreign origin", loop, "127.0.0.1:8808", "https://evil.example", 403},
		{"foreign host off loopback", wide, "tether.internal:8808", "", 200},
		{"foreign origin off loopback", wide, "tether.internal:8808", "https://evil.example", 403},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := Origins{}.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(200) }))
			r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, tc.local))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.want {
				t.Fatalf("status %d, want %d (%s)", w.Code, tc.want, w.Body)
			}
		})
	}
}
