package tracing

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// The OTLP exporter's variables (OpenTelemetry specification, "OTLP
// Exporter Configuration"). Each has a traces-specific variant,
// OTEL_EXPORTER_OTLP_TRACES_<name>, which wins when it is set.
const (
	envPrefix       = "OTEL_EXPORTER_OTLP_"
	envTracesPrefix = "OTEL_EXPORTER_OTLP_TRACES_"

	optHeaders     = "HEADERS"
	optTimeout     = "TIMEOUT"
	optCompression = "COMPRESSION"
	optCertificate = "CERTIFICATE"
	optClientCert  = "CLIENT_CERTIFICATE"
	optClientKey   = "CLIENT_KEY"
)

const (
	defaultEndpoint = "http://localhost:4318/v1/traces"
	tracesPath      = "/v1/traces"
	defaultTimeout  = 10 * time.Second
)

// exportConfig is what the exporter needs from the environment.
type exportConfig struct {
	// url is where spans are POSTed.
	url string
	// headers are sent with every export. Their values are credentials:
	// they never go into a log line, an error or a String method.
	headers map[string]string
	// timeout bounds one export, retries and their waits included.
	timeout time.Duration
	gzip    bool
	// tls is nil for the system roots and no client certificate.
	tls *tls.Config
}

// configError is a setting the exporter cannot work with. Its message
// names variables and files, never a header value.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }

// exportConfigFromEnv reads the OTEL_EXPORTER_OTLP_* variables. A value
// that can be ignored (a malformed header entry, timeout or compression)
// is ignored with a note; one that cannot (an endpoint that is not an
// http(s) URL, certificate files that do not load) is an error, so that
// spans are not sent somewhere the user did not mean, or without the
// credentials meant for them.
func exportConfigFromEnv(getenv func(string) string, readFile func(string) ([]byte, error)) (exportConfig, []string, error) {
	cfg := exportConfig{timeout: defaultTimeout}
	var notes []string
	get := func(opt string) (name, value string) { return lookupOpt(getenv, opt) }

	u, err := endpointURL(getenv)
	if err != nil {
		return cfg, notes, err
	}
	cfg.url = u.String()

	if name, v := get(optHeaders); v != "" {
		var bad []string
		cfg.headers, bad = parseHeaders(v)
		for _, b := range bad {
			notes = append(notes, fmt.Sprintf("%s: ignoring %s", name, b))
		}
	}

	if name, v := get(optTimeout); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms <= 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			notes = append(notes, fmt.Sprintf("%s=%q is not a positive number of milliseconds; using %v", name, v, defaultTimeout))
		} else {
			cfg.timeout = time.Duration(ms) * time.Millisecond
		}
	}

	if name, v := get(optCompression); v != "" {
		switch strings.ToLower(v) {
		case "gzip":
			cfg.gzip = true
		case "none":
		default:
			notes = append(notes, fmt.Sprintf("%s=%q: want gzip or none; not compressing", name, v))
		}
	}

	tlsCfg, err := tlsFromEnv(getenv, readFile)
	if err != nil {
		return cfg, notes, err
	}
	if tlsCfg != nil && u.Scheme == "http" {
		notes = append(notes, fmt.Sprintf("the endpoint %s is plain http: ignoring the certificate variables", RedactURL(cfg.url)))
		tlsCfg = nil
	}
	cfg.tls = tlsCfg
	return cfg, notes, nil
}

// lookupOpt returns the traces variable of an option when it is set, else
// the general one, with the name of the variable the value came from.
func lookupOpt(getenv func(string) string, opt string) (name, value string) {
	if v := strings.TrimSpace(getenv(envTracesPrefix + opt)); v != "" {
		return envTracesPrefix + opt, v
	}
	return envPrefix + opt, strings.TrimSpace(getenv(envPrefix + opt))
}

// endpointURL applies the specification's rules: the traces endpoint is
// used as it is (its path "/" when it has none); the general endpoint is a
// base URL to which /v1/traces is appended; neither means
// http://localhost:4318/v1/traces.
func endpointURL(getenv func(string) string) (*url.URL, error) {
	name, raw := envTracesEndpoint, strings.TrimSpace(getenv(envTracesEndpoint))
	if raw == "" {
		name, raw = envEndpoint, strings.TrimSpace(getenv(envEndpoint))
	}
	if raw == "" {
		return url.Parse(defaultEndpoint)
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error quotes the URL, which may hold credentials.
		return nil, &configError{fmt.Sprintf("%s is not a URL", name)}
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &configError{fmt.Sprintf("%s=%s: want an http:// or https:// URL with a host", name, RedactURL(raw))}
	}
	if name == envEndpoint {
		u.Path = strings.TrimSuffix(u.Path, "/") + tracesPath
		u.RawPath = ""
	} else if u.Path == "" {
		u.Path = "/"
	}
	return u, nil
}

// parseHeaders reads the W3C baggage-like list the specification uses:
// key=value pairs separated by commas, values percent-decoded. Entries it
// cannot use are described (by key or position, never by value) in bad.
func parseHeaders(list string) (headers map[string]string, bad []string) {
	headers = make(map[string]string)
	for i, entry := range strings.Split(list, ",") {
		if strings.TrimSpace(entry) == "" {
			continue
		}
		k, v, ok := strings.Cut(entry, "=")
		k = strings.TrimSpace(k)
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("entry %d (no '=')", i+1))
			continue
		case !isToken(k):
			bad = append(bad, fmt.Sprintf("entry %d (the key is not an HTTP header name)", i+1))
			continue
		}
		dec, err := url.PathUnescape(v)
		if err != nil {
			bad = append(bad, fmt.Sprintf("header %s (bad percent-encoding)", k))
			continue
		}
		headers[k] = strings.TrimSpace(dec)
	}
	return headers, bad
}

// isToken reports whether s is an HTTP token (RFC 9110), which a header
// name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// tlsFromEnv builds the TLS configuration of an https endpoint: the CA
// file that verifies the collector (instead of the system roots) and the
// client certificate and key. nil when none is set.
func tlsFromEnv(getenv func(string) string, readFile func(string) ([]byte, error)) (*tls.Config, error) {
	var cfg *tls.Config
	if name, file := lookupOpt(getenv, optCertificate); file != "" {
		pem, err := readFile(file)
		if err != nil {
			return nil, &configError{fmt.Sprintf("%s: %v", name, err)}
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &configError{fmt.Sprintf("%s: no PEM certificate in %s", name, file)}
		}
		cfg = &tls.Config{RootCAs: pool}
	}
	// The pair comes from one namespace: a traces certificate with the
	// general key would be a key for another certificate.
	certName, keyName := envTracesPrefix+optClientCert, envTracesPrefix+optClientKey
	certFile, keyFile := strings.TrimSpace(getenv(certName)), strings.TrimSpace(getenv(keyName))
	if certFile == "" && keyFile == "" {
		certName, keyName = envPrefix+optClientCert, envPrefix+optClientKey
		certFile, keyFile = strings.TrimSpace(getenv(certName)), strings.TrimSpace(getenv(keyName))
	}
	switch {
	case certFile == "" && keyFile == "":
		return cfg, nil
	case certFile == "":
		return nil, &configError{fmt.Sprintf("%s is set without %s", keyName, certName)}
	case keyFile == "":
		return nil, &configError{fmt.Sprintf("%s is set without %s", certName, keyName)}
	}
	certPEM, err := readFile(certFile)
	if err != nil {
		return nil, &configError{fmt.Sprintf("%s: %v", certName, err)}
	}
	keyPEM, err := readFile(keyFile)
	if err != nil {
		return nil, &configError{fmt.Sprintf("%s: %v", keyName, err)}
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, &configError{fmt.Sprintf("%s and %s: %v", certName, keyName, err)}
	}
	if cfg == nil {
		cfg = &tls.Config{}
	}
	cfg.Certificates = []tls.Certificate{pair}
	return cfg, nil
}
