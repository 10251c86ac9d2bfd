package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// reply is one scripted answer of a fakeCollector.
type reply struct {
	status int
	header map[string]string
	body   []byte
	// hangUp closes the connection without answering.
	hangUp bool
}

// received is one request as the collector got it.
type received struct {
	at     time.Time
	header http.Header
	req    *coltracepb.ExportTraceServiceRequest
	err    string // why the body did not decode
}

// fakeCollector answers POST /v1/traces with its script, one reply per
// request, and 200 once the script is used up.
type fakeCollector struct {
	mu     sync.Mutex
	script []reply
	got    []received
}

func (c *fakeCollector) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec := received{at: time.Now(), header: r.Header.Clone()}
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			rec.err = err.Error()
		} else {
			body = zr
		}
	}
	data, err := io.ReadAll(body)
	if err != nil && rec.err == "" {
		rec.err = err.Error()
	}
	if rec.err == "" {
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(data, &req); err != nil {
			rec.err = err.Error()
		} else {
			rec.req = &req
		}
	}
	c.mu.Lock()
	c.got = append(c.got, rec)
	rep := reply{status: http.StatusOK}
	if len(c.script) > 0 {
		rep, c.script = c.script[0], c.script[1:]
	}
	c.mu.Unlock()
	if rep.hangUp {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body)
}

func (c *fakeCollector) requests() []received {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]received(nil), c.got...)
}

func startCollector(t *testing.T, script ...reply) (*fakeCollector, *httptest.Server) {
	c := &fakeCollector{script: script}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	return c, srv
}

// testExporter is an exporter with short backoff, so that a test waits for
// Retry-After rather than for the production backoff.
func testExporter(t *testing.T, cfg exportConfig) *otlpExporter {
	if cfg.timeout == 0 {
		cfg.timeout = 10 * time.Second
	}
	e := newExporter(cfg, "test")
	e.firstRetry, e.maxRetry = 10*time.Millisecond, 40*time.Millisecond
	t.Cleanup(func() { _ = e.Shutdown(context.Background()) })
	return e
}

func testSpans(names ...string) []sdktrace.ReadOnlySpan {
	var out tracetest.SpanStubs
	for _, n := range names {
		out = append(out, tracetest.SpanStub{
			Name:        n,
			SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}),
			StartTime:   time.Unix(1700000000, 0), EndTime: time.Unix(1700000001, 0),
		})
	}
	return out.Snapshots()
}

func spanNames(req *coltracepb.ExportTraceServiceRequest) []string {
	var names []string
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				names = append(names, s.GetName())
			}
		}
	}
	return names
}

func TestExportHeadersAndCompression(t *testing.T) {
	for _, gz := range []bool{false, true} {
		name := map[bool]string{false: "plain", true: "gzip"}[gz]
		t.Run(name, func(t *testing.T) {
			c, srv := startCollector(t)
			e := testExporter(t, exportConfig{
				url:     srv.URL + "/v1/traces",
				gzip:    gz,
				headers: map[string]string{"Authorization": "Bearer s3cret", "x-tenant": "blue", "Content-Type": "text/plain"},
			})
			if err := e.ExportSpans(context.Background(), testSpans("a", "b")); err != nil {
				t.Fatal(err)
			}
			got := c.requests()
			if len(got) != 1 {
				t.Fatalf("%d requests, want 1", len(got))
			}
			r := got[0]
			if r.err != "" {
				t.Fatalf("the collector could not read the request: %s", r.err)
			}
			if n := spanNames(r.req); strings.Join(n, ",") != "a,b" {
				t.Errorf("spans = %v", n)
			}
			wantEnc := map[bool]string{false: "", true: "gzip"}[gz]
			h := r.header
			if h.Get("Content-Encoding") != wantEnc || h.Get("Content-Type") != "application/x-protobuf" ||
				h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Tenant") != "blue" ||
				!strings.HasPrefix(h.Get("User-Agent"), "tether/test ") {
				t.Errorf("headers = %v", h)
			}
		})
	}
}

func TestExportNothing(t *testing.T) {
	c, srv := startCollector(t)
	e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces"})
	if err := e.ExportSpans(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if n := len(c.requests()); n != 0 {
		t.Errorf("%d requests for no spans", n)
	}
}

// statusBody is a google.rpc.Status with a message, as an OTLP collector
// sends with a 4xx or 5xx.
func statusBody(code int32, msg string) []byte {
	b := protowire.AppendTag(nil, 1, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(code))
	b = protowire.AppendTag(b, 2, protowire.BytesType)
	return protowire.AppendString(b, msg)
}

var protobufHeader = map[string]string{"Content-Type": "application/x-protobuf"}

func TestExportRetries(t *testing.T) {
	tests := []struct {
		name     string
		script   []reply
		timeout  time.Duration
		requests int
		minWait  time.Duration // between the first and the last request
		err      string        // "" for success
	}{
		{"503 with Retry-After, then 200",
			[]reply{{status: 503, header: map[string]string{"Retry-After": "1"}}},
			0, 2, time.Second, ""},
		{"429 without Retry-After backs off",
			[]reply{{status: 429}, {status: 429}},
			0, 3, 0, ""},
		{"502 and 504 are retried",
			[]reply{{status: 502}, {status: 504}},
			0, 3, 0, ""},
		{"a hang-up is retried",
			[]reply{{hangUp: true}},
			0, 2, 0, ""},
		{"400 is not retried",
			[]reply{{status: 400, header: protobufHeader, body: statusBody(3, "bad span data")}},
			0, 1, 0, "400 Bad Request: bad span data"},
		{"500 is not retried",
			[]reply{{status: 500, body: []byte("  oops \n")}},
			0, 1, 0, "500 Internal Server Error: oops"},
		{"Retry-After beyond the timeout gives up at once",
			[]reply{{status: 503, header: map[string]string{"Retry-After": "30"}}},
			2 * time.Second, 1, 0, "no time left for another attempt"},
		{"always 503: stops at the timeout",
			[]reply{{status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503},
				{status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503}, {status: 503}},
			300 * time.Millisecond, -1, 0, "503 Service Unavailable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, srv := startCollector(t, tt.script...)
			e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces", timeout: tt.timeout})
			start := time.Now()
			err := e.ExportSpans(context.Background(), testSpans("x"))
			took := time.Since(start)
			if tt.err == "" && err != nil {
				t.Fatalf("export failed: %v", err)
			}
			if tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("err = %v, want one containing %q", err, tt.err)
			}
			got := c.requests()
			if tt.requests >= 0 && len(got) != tt.requests {
				t.Fatalf("%d requests, want %d", len(got), tt.requests)
			}
			if tt.requests < 0 && len(got) < 2 {
				t.Errorf("%d requests: no retry before the timeout", len(got))
			}
			for i, r := range got {
				if r.err != "" || len(spanNames(r.req)) != 1 {
					t.Errorf("request %d: the same batch must be resent whole: %v %s", i, spanNames(r.req), r.err)
				}
			}
			if wait := got[len(got)-1].at.Sub(got[0].at); wait < tt.minWait {
				t.Errorf("retried after %v, want at least %v (Retry-After)", wait, tt.minWait)
			}
			if tt.timeout > 0 && took > tt.timeout+time.Second {
				t.Errorf("export took %v with a %v timeout", took, tt.timeout)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in   string
		want time.Duration
	}{
		{"", 0},
		{"3", 3 * time.Second},
		{" 0 ", 0},
		{"-4", 0},
		{"soon", 0},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
		{"99999999999999", 24 * time.Hour},
	}
	for _, tt := range tests {
		if got := retryAfter(tt.in, now); got != tt.want {
			t.Errorf("retryAfter(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestBackoffGrowsWithJitter(t *testing.T) {
	e := newExporter(exportConfig{url: defaultEndpoint, timeout: time.Second}, "test")
	for attempt, hi := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second} {
		seen := map[time.Duration]bool{}
		for range 50 {
			d := e.backoff(attempt)
			if d < hi/2 || d > hi {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, d, hi/2, hi)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("backoff(%d) has no jitter", attempt)
		}
	}
	if d := e.backoff(200); d > 5*time.Second {
		t.Errorf("backoff(200) = %v: overflow", d)
	}
}

// partialSuccessBody is an ExportTraceServiceResponse encoded by the
// official type.
func partialSuccessBody(t *testing.T, rejected int64, msg string) []byte {
	b, err := proto.Marshal(&coltracepb.ExportTraceServiceResponse{
		PartialSuccess: &coltracepb.ExportTracePartialSuccess{RejectedSpans: rejected, ErrorMessage: msg},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// recordErrors installs an OpenTelemetry error handler that keeps what it
// gets, until the test ends.
func recordErrors(t *testing.T) func() []error {
	var mu sync.Mutex
	var errs []error
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}))
	t.Cleanup(func() { otel.SetErrorHandler(prev) })
	return func() []error {
		mu.Lock()
		defer mu.Unlock()
		return append([]error(nil), errs...)
	}
}

func TestExportPartialSuccess(t *testing.T) {
	tests := []struct {
		name   string
		rep    reply
		report string // "" when nothing is reported
	}{
		{"empty partial_success", reply{status: 200, header: protobufHeader}, ""},
		{"full success, empty message", reply{status: 200, header: protobufHeader, body: []byte{}}, ""},
		{"partial success", reply{status: 200, header: protobufHeader}, "2 spans rejected: span too large"},
		{"warning only", reply{status: 200, header: protobufHeader}, "0 spans rejected: deprecated field"},
		{"undecodable body", reply{status: 200, header: protobufHeader, body: []byte{0x0a, 0x05, 0x01}}, "does not decode"},
		{"JSON body ignored", reply{status: 200, header: map[string]string{"Content-Type": "application/json"}, body: []byte(`{"partialSuccess":{}}`)}, ""},
	}
	tests[0].rep.body = partialSuccessBody(t, 0, "")
	tests[2].rep.body = partialSuccessBody(t, 2, "span too large")
	tests[3].rep.body = partialSuccessBody(t, 0, "deprecated field")
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errs := recordErrors(t)
			c, srv := startCollector(t, tt.rep)
			e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces"})
			if err := e.ExportSpans(context.Background(), testSpans("x")); err != nil {
				t.Fatalf("a 200 must not fail the export: %v", err)
			}
			if n := len(c.requests()); n != 1 {
				t.Errorf("%d requests: a partial success must not be retried", n)
			}
			got := errs()
			if tt.report == "" {
				if len(got) != 0 {
					t.Errorf("reported %v", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0].Error(), tt.report) {
				t.Fatalf("reported %v, want one error containing %q", got, tt.report)
			}
			var ps *partialSuccessError
			if strings.Contains(tt.name, "partial") && !errors.As(got[0], &ps) {
				t.Errorf("%T is not a *partialSuccessError", got[0])
			}
		})
	}
}

// TestExportKeepsCredentialsOut: a collector that echoes the request's
// credentials in its error, and a redirect to another host, must not
// carry a header value anywhere.
func TestExportKeepsCredentialsOut(t *testing.T) {
	const secret = "tok-9f8e7d6c"
	t.Run("echoed in an error body", func(t *testing.T) {
		_, srv := startCollector(t, reply{status: 401, body: []byte("bad key " + secret)})
		e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces", headers: map[string]string{"api-key": secret}})
		err := e.ExportSpans(context.Background(), testSpans("x"))
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "bad key REDACTED") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("echoed in a partial success", func(t *testing.T) {
		errs := recordErrors(t)
		_, srv := startCollector(t, reply{status: 200, header: protobufHeader, body: partialSuccessBody(t, 1, "tenant "+secret+" over quota")})
		e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces", headers: map[string]string{"api-key": secret}})
		if err := e.ExportSpans(context.Background(), testSpans("x")); err != nil {
			t.Fatal(err)
		}
		got := errs()
		if len(got) != 1 || strings.Contains(got[0].Error(), secret) || !strings.Contains(got[0].Error(), "tenant REDACTED over quota") {
			t.Errorf("reported %v", got)
		}
	})
	t.Run("URL credentials", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		ln.Close() // nothing listens: the dial fails
		e := testExporter(t, exportConfig{url: "http://user:" + secret + "@" + addr + "/v1/traces?key=" + secret, timeout: 200 * time.Millisecond})
		err = e.ExportSpans(context.Background(), testSpans("x"))
		if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("err = %v", err)
		}
	})
	t.Run("redirect to another origin", func(t *testing.T) {
		other, otherSrv := startCollector(t)
		_, srv := startCollector(t, reply{status: http.StatusTemporaryRedirect, header: map[string]string{"Location": otherSrv.URL + "/v1/traces"}})
		e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces", headers: map[string]string{"api-key": secret}})
		err := e.ExportSpans(context.Background(), testSpans("x"))
		if err == nil || !strings.Contains(err.Error(), "307 Temporary Redirect") || !strings.Contains(err.Error(), "not followed") {
			t.Errorf("err = %v, want a refused redirect", err)
		}
		if n := len(other.requests()); n != 0 {
			t.Errorf("the other origin got %d requests", n)
		}
	})
	t.Run("redirect within the origin", func(t *testing.T) {
		c, srv := startCollector(t, reply{status: http.StatusPermanentRedirect, header: map[string]string{"Location": "/v1/traces-new"}})
		e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces", headers: map[string]string{"api-key": secret}})
		if err := e.ExportSpans(context.Background(), testSpans("x")); err != nil {
			t.Fatal(err)
		}
		got := c.requests()
		if len(got) != 2 || got[1].req == nil || got[1].header.Get("Api-Key") != secret {
			t.Errorf("the redirected request did not arrive whole: %d requests", len(got))
		}
	})
}

func TestExportShutdown(t *testing.T) {
	script := make([]reply, 100)
	for i := range script {
		script[i] = reply{status: 503}
	}
	c, srv := startCollector(t, script...)
	e := testExporter(t, exportConfig{url: srv.URL + "/v1/traces", timeout: time.Minute})
	e.firstRetry, e.maxRetry = time.Second, time.Second // waits between attempts
	done := make(chan error, 1)
	go func() { done <- e.ExportSpans(context.Background(), testSpans("x")) }()
	deadline := time.Now().Add(10 * time.Second)
	for len(c.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no request arrived")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := e.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, errShutdown) {
			t.Errorf("interrupted export returned %v, want errShutdown", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown did not interrupt a retrying export")
	}
	if err := e.ExportSpans(context.Background(), testSpans("y")); !errors.Is(err, errShutdown) {
		t.Errorf("export after Shutdown = %v, want errShutdown", err)
	}
}

// testCert is a certificate and its key, PEM-encoded, that can issue
// others when it is a CA.
type testCert struct {
	cert            *x509.Certificate
	key             *ecdsa.PrivateKey
	certPEM, keyPEM []byte
}

func testCA(t *testing.T) (*testCert, *x509.CertPool) {
	t.Helper()
	ca := makeCert(t, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "tether test CA"},
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}, nil)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return ca, pool
}

// issue makes a certificate signed by ca: for 127.0.0.1 when server, else
// for client authentication.
func (ca *testCert) issue(t *testing.T, cn string, server bool) *testCert {
	t.Helper()
	tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: cn}, KeyUsage: x509.KeyUsageDigitalSignature}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	return makeCert(t, tmpl, ca)
}

func makeCert(t *testing.T, tmpl *x509.Certificate, parent *testCert) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl.SerialNumber = serial
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(time.Hour)
	parentCert, parentKey := tmpl, key
	if parent != nil {
		parentCert, parentKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parentCert, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{
		cert: cert, key: key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}
}

// startTLSCollector serves the fake collector over TLS with a certificate
// from a private CA; with clientCAs, it requires a client certificate
// signed by them.
func startTLSCollector(t *testing.T, server *testCert, clientCAs *x509.CertPool) (*fakeCollector, *httptest.Server) {
	c := &fakeCollector{}
	srv := httptest.NewUnstartedServer(c)
	pair, err := tls.X509KeyPair(server.certPEM, server.keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // refused handshakes are expected here
	if clientCAs != nil {
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
		srv.TLS.ClientCAs = clientCAs
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return c, srv
}

// TestExportTLS goes through the environment as tether does: the CA file
// and the client certificate files are read by exportConfigFromEnv.
func TestExportTLS(t *testing.T) {
	ca, caPool := testCA(t)
	server := ca.issue(t, "collector", true)
	client := ca.issue(t, "tether", false)
	dir := t.TempDir()
	write := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", ca.certPEM)
	certFile, keyFile := write("client.pem", client.certPEM), write("client.key", client.keyPEM)

	tests := []struct {
		name       string
		requireMTL bool
		env        map[string]string
		err        string // "" for success
	}{
		{"custom CA", false, map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": caFile}, ""},
		{"custom CA, traces variable", false, map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": caFile}, ""},
		{"system roots refuse the private CA", false, nil, "certificate"},
		{"client certificate", true, map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": caFile,
			"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": certFile, "OTEL_EXPORTER_OTLP_CLIENT_KEY": keyFile}, ""},
		{"no client certificate", true, map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": caFile}, "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var clientCAs *x509.CertPool
			if tt.requireMTL {
				clientCAs = caPool
			}
			c, srv := startTLSCollector(t, server, clientCAs)
			env := map[string]string{envEndpoint: srv.URL, "OTEL_EXPORTER_OTLP_TIMEOUT": "2000"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, notes, err := exportConfigFromEnv(func(k string) string { return env[k] }, os.ReadFile)
			if err != nil || len(notes) > 0 {
				t.Fatalf("config: %v %q", err, notes)
			}
			e := testExporter(t, cfg)
			start := time.Now()
			err = e.ExportSpans(context.Background(), testSpans("tls"))
			if tt.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := c.requests(); len(got) != 1 || got[0].req == nil {
					t.Errorf("the collector got %d requests", len(got))
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want one containing %q", err, tt.err)
			}
			if n := len(c.requests()); n != 0 {
				t.Errorf("the collector accepted %d requests", n)
			}
			if time.Since(start) > time.Second {
				t.Errorf("a refused certificate was retried for %v", time.Since(start))
			}
		})
	}
}

// TestSetupHonoursEnvironment runs Setup against a collector, with gzip,
// traces headers and a traces endpoint, and checks what arrives.
func TestSetupHonoursEnvironment(t *testing.T) {
	c, srv := startCollector(t)
	for _, k := range []string{envSDKDisabled, envTracesExporter, envEndpoint, envProtocol, envTracesProtocol,
		"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES"} {
		t.Setenv(k, "")
	}
	t.Setenv(envTracesEndpoint, srv.URL+"/custom/path")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-api-key=k%3Dv,bad")
	t.Setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip")
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "3000")
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
	})
	var logs bytes.Buffer
	p, err := Setup(context.Background(), "v1.2.3", slogTo(&logs))
	if err != nil || !p.Enabled() {
		t.Fatalf("Setup: %v, enabled %v; log: %s", err, p.Enabled(), logs.String())
	}
	if !strings.Contains(logs.String(), "OTEL_EXPORTER_OTLP_TRACES_HEADERS: ignoring entry 2") {
		t.Errorf("no warning about the bad header entry: %s", logs.String())
	}
	_, span := Tracer(nil).Start(context.Background(), "configured")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	got := c.requests()
	if len(got) != 1 || got[0].req == nil {
		t.Fatalf("%d requests: %+v", len(got), got)
	}
	h := got[0].header
	if h.Get("Content-Encoding") != "gzip" || h.Get("X-Api-Key") != "k=v" || h.Get("User-Agent") == "" {
		t.Errorf("headers = %v", h)
	}
	if n := spanNames(got[0].req); len(n) != 1 || n[0] != "configured" {
		t.Errorf("spans = %v", n)
	}
}

func TestSetupBadConfigStaysOff(t *testing.T) {
	for _, k := range []string{envSDKDisabled, envTracesExporter, envTracesEndpoint, envProtocol, envTracesProtocol} {
		t.Setenv(k, "")
	}
	t.Setenv(envEndpoint, "https://collector.invalid")
	t.Setenv("OTEL_EXPORTER_OTLP_CERTIFICATE", filepath.Join(t.TempDir(), "missing.pem"))
	before := otel.GetTracerProvider()
	var logs bytes.Buffer
	p, err := Setup(context.Background(), "test", slogTo(&logs))
	if err != nil {
		t.Fatalf("a bad certificate setting must not stop tether: %v", err)
	}
	if p.Enabled() || otel.GetTracerProvider() != before {
		t.Error("tracing on with a certificate that does not load")
	}
	if !strings.Contains(logs.String(), "OTEL_EXPORTER_OTLP_CERTIFICATE") || !strings.Contains(logs.String(), "tracing stays off") {
		t.Errorf("log = %s", logs.String())
	}
}

func slogTo(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
