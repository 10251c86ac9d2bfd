package tracing

import (
	"errors"
	"io/fs"
	"maps"
	"strings"
	"testing"
	"time"
)

func TestExportConfigFromEnv(t *testing.T) {
	const secret = "s3cr3t-t0ken"
	ca, _ := testCA(t)
	client := ca.issue(t, "tether-client", false)
	files := map[string][]byte{
		"/ca.pem":     ca.certPEM,
		"/client.pem": client.certPEM,
		"/client.key": client.keyPEM,
		"/junk.pem":   []byte("not a certificate"),
	}
	readFile := func(name string) ([]byte, error) {
		if b, ok := files[name]; ok {
			return b, nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}

	type want struct {
		url        string
		headers    map[string]string
		timeout    time.Duration
		gzip       bool
		rootCAs    bool // a custom CA pool
		clientCert bool
		notes      []string // each a substring of one note, in order
		err        string   // substring; "" for none
	}
	def := func(w want) want {
		if w.timeout == 0 {
			w.timeout = defaultTimeout
		}
		return w
	}
	tests := []struct {
		name string
		env  map[string]string
		want want
	}{
		{"nothing: the default endpoint", nil, def(want{url: "http://localhost:4318/v1/traces"})},
		{"base endpoint gets /v1/traces", map[string]string{envEndpoint: "http://c:4318"}, def(want{url: "http://c:4318/v1/traces"})},
		{"base endpoint with a slash", map[string]string{envEndpoint: "http://c:4318/"}, def(want{url: "http://c:4318/v1/traces"})},
		{"base endpoint with a path", map[string]string{envEndpoint: "https://c/otlp/"}, def(want{url: "https://c/otlp/v1/traces"})},
		{"base endpoint upper-case scheme", map[string]string{envEndpoint: "HTTP://c:4318"}, def(want{url: "http://c:4318/v1/traces"})},
		{"traces endpoint as is", map[string]string{envTracesEndpoint: "http://c:4318/custom"}, def(want{url: "http://c:4318/custom"})},
		{"traces endpoint without a path gets /", map[string]string{envTracesEndpoint: "https://c:4318"}, def(want{url: "https://c:4318/"})},
		{"traces endpoint wins", map[string]string{envEndpoint: "http://a:1", envTracesEndpoint: "http://b:2/x"}, def(want{url: "http://b:2/x"})},
		{"endpoint without a scheme", map[string]string{envEndpoint: "collector:4318"}, want{err: "want an http:// or https:// URL"}},
		{"grpc-style endpoint", map[string]string{envTracesEndpoint: "dns:///c:4317"}, want{err: envTracesEndpoint}},
		{"unparseable endpoint hides its text", map[string]string{envEndpoint: "http://u:" + secret + "@[::1"}, want{err: envEndpoint + " is not a URL"}},

		{"headers", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "api-key=" + secret + ", x-scope = a%20b%2Cc ,empty="},
			def(want{url: defaultEndpoint, headers: map[string]string{"api-key": secret, "x-scope": "a b,c", "empty": ""}})},
		{"traces headers replace the general ones", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "a=1,b=2", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "b=3"},
			def(want{url: defaultEndpoint, headers: map[string]string{"b": "3"}})},
		{"plus is not a space, equals in a value", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "authorization=Basic a+b==" + secret},
			def(want{url: defaultEndpoint, headers: map[string]string{"authorization": "Basic a+b==" + secret}})},
		{"bad header entries are skipped without their values", map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": "good=1," + secret + ",bad key=" + secret + ",pct=%zz" + secret},
			def(want{url: defaultEndpoint, headers: map[string]string{"good": "1"},
				notes: []string{"entry 2 (no '=')", "entry 3 (the key is not", "header pct (bad percent-encoding)"}})},

		{"timeout", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "2500"}, def(want{url: defaultEndpoint, timeout: 2500 * time.Millisecond})},
		{"traces timeout wins", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "700"}, def(want{url: defaultEndpoint, timeout: 700 * time.Millisecond})},
		{"timeout with a unit", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, def(want{url: defaultEndpoint, notes: []string{`"10s" is not a positive number of milliseconds`}})},
		{"zero timeout", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "0"}, def(want{url: defaultEndpoint, notes: []string{"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"}})},
		{"huge timeout", map[string]string{"OTEL_EXPORTER_OTLP_TIMEOUT": "99999999999999999"}, def(want{url: defaultEndpoint, notes: []string{"milliseconds"}})},

		{"gzip", map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip"}, def(want{url: defaultEndpoint, gzip: true})},
		{"traces compression wins", map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "none"}, def(want{url: defaultEndpoint})},
		{"unknown compression", map[string]string{"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, def(want{url: defaultEndpoint, notes: []string{`"zstd": want gzip or none`}})},

		{"custom CA", map[string]string{envEndpoint: "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem"}, def(want{url: "https://c/v1/traces", rootCAs: true})},
		{"traces CA wins", map[string]string{envEndpoint: "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/missing.pem", "OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": "/ca.pem"},
			def(want{url: "https://c/v1/traces", rootCAs: true})},
		{"client certificate", map[string]string{envEndpoint: "https://c", "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/client.pem", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/client.key"},
			def(want{url: "https://c/v1/traces", clientCert: true})},
		{"traces client pair wins", map[string]string{envEndpoint: "https://c",
			"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/missing.pem", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/missing.key",
			"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": "/client.pem", "OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": "/client.key"},
			def(want{url: "https://c/v1/traces", clientCert: true})},
		{"client key without certificate", map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_KEY": "/client.key"}, want{err: "OTEL_EXPORTER_OTLP_CLIENT_KEY is set without OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"}},
		{"missing CA file", map[string]string{envEndpoint: "https://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/missing.pem"}, want{err: "OTEL_EXPORTER_OTLP_CERTIFICATE: open /missing.pem"}},
		{"CA file without PEM", map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": "/junk.pem"}, want{err: "no PEM certificate in /junk.pem"}},
		{"key that does not match", map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": "/ca.pem", "OTEL_EXPORTER_OTLP_CLIENT_KEY": "/client.key"}, want{err: "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY"}},
		{"certificates ignored for http", map[string]string{envEndpoint: "http://c", "OTEL_EXPORTER_OTLP_CERTIFICATE": "/ca.pem"},
			def(want{url: "http://c/v1/traces", notes: []string{"plain http: ignoring the certificate variables"}})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, notes, err := exportConfigFromEnv(func(k string) string { return tt.env[k] }, readFile)
			for _, s := range append(notes, errString(err)) {
				if strings.Contains(s, secret) {
					t.Errorf("a header value or credential reached a message: %q", s)
				}
			}
			if tt.want.err != "" {
				var ce *configError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), tt.want.err) {
					t.Fatalf("err = %v, want a configError containing %q", err, tt.want.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			w := tt.want
			if cfg.url != w.url || cfg.timeout != w.timeout || cfg.gzip != w.gzip {
				t.Errorf("url, timeout, gzip = %s, %v, %v; want %s, %v, %v", cfg.url, cfg.timeout, cfg.gzip, w.url, w.timeout, w.gzip)
			}
			if len(cfg.headers) != len(w.headers) || (w.headers != nil && !maps.Equal(cfg.headers, w.headers)) {
				t.Errorf("headers = %q, want %q", cfg.headers, w.headers)
			}
			gotCA := cfg.tls != nil && cfg.tls.RootCAs != nil
			gotClient := cfg.tls != nil && len(cfg.tls.Certificates) == 1
			if gotCA != w.rootCAs || gotClient != w.clientCert {
				t.Errorf("custom CA %v, client certificate %v; want %v, %v", gotCA, gotClient, w.rootCAs, w.clientCert)
			}
			if len(notes) != len(w.notes) {
				t.Fatalf("notes = %q, want %d", notes, len(w.notes))
			}
			for i := range notes {
				if !strings.Contains(notes[i], w.notes[i]) {
					t.Errorf("note %d = %q, want one containing %q", i, notes[i], w.notes[i])
				}
			}
		})
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
