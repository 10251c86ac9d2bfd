package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/httpguard"
)

func TestHealthAndReadiness(t *testing.T) {
	m := New("test")
	var ready atomic.Bool
	h := m.Handler(ready.Load, httpguard.Origins{})

	for _, tc := range []struct {
		name  string
		ready bool
		path  string
		code  int
		body  string
	}{
		{"healthz before ready", false, "/healthz", http.StatusOK, "ok"},
		{"readyz before ready", false, "/readyz", http.StatusServiceUnavailable, "not ready"},
		{"readyz once ready", true, "/readyz", http.StatusOK, "ok"},
		{"healthz once ready", true, "/healthz", http.StatusOK, "ok"},
		{"index", true, "/", http.StatusOK, "/metrics"},
		{"unknown path", true, "/nope", http.StatusNotFound, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ready.Store(tc.ready)
			resp, body := scrape(t, h, tc.path, "")
			if resp.StatusCode != tc.code {
				t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.code)
			}
			if !strings.Contains(body, tc.body) {
				t.Errorf("GET %s: body %q lacks %q", tc.path, body, tc.body)
			}
		})
	}

	// A nil ready func means always ready.
	if resp, _ := scrape(t, m.Handler(nil, httpguard.Origins{}), "/readyz", ""); resp.StatusCode != http.StatusOK {
		t.Errorf("readyz with nil ready: %d, want 200", resp.StatusCode)
	}
}

func TestServeStopsWhenContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // Listen must bind it itself; the port was free a moment ago.

	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	bound, err := Listen(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	go func() { served <- ServeListener(ctx, bound, New("test").Handler(nil, httpguard.Origins{})) }()

	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("healthz: %s", resp.Status)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("ServeListener never answered on %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// A second Listen on the same address fails at once.
	if ln, err := Listen(context.Background(), addr); err == nil || !strings.Contains(err.Error(), "address already in use") {
		if ln != nil {
			ln.Close()
		}
		t.Errorf("Listen on a busy address: %v, want address already in use", err)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after cancel: %v, want nil", err)
		}
	case <-time.After(shutdownBound + 2*time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Errorf("still serving on %s after Serve returned", addr)
	}
}

// TestHandlerRefusesForeignHostAndOrigin: /metrics holds connection names
// and errors; a page that rebinds its name to the loopback address (foreign
// Host) or a page of another site (foreign Origin) must not read it.
func TestHandlerRefusesForeignHostAndOrigin(t *testing.T) {
	m := New("test")
	srv := httptest.NewServer(m.Handler(nil, httpguard.Origins{}))
	defer srv.Close()
	for _, tc := range []struct {
		host, origin string
		want         int
	}{
		{"", "", http.StatusOK},
		{"localhost:9464", "http://localhost:3000", http.StatusOK},
		{"rebind.evil.example:9464", "", http.StatusForbidden},
		{"", "https://evil.example", http.StatusForbidden},
	} {
		for _, path := range []string{"/metrics", "/readyz"} {
			req, err := http.NewRequest(http.MethodGet, srv.URL+path, nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			if tc.origin != "" {
				req.Header.Set("Origin", tc.origin)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Errorf("%s Host %q Origin %q: %d, want %d", path, tc.host, tc.origin, resp.StatusCode, tc.want)
			}
			if tc.want == http.StatusForbidden && strings.Contains(string(body), "tether_") {
				t.Errorf("%s: a refused request got metrics: %s", path, body)
			}
		}
	}
}
