package tracing

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpExporter sends spans to an OTLP/HTTP collector as binary protobuf
// (http/protobuf). It is tether's own rather than the OpenTelemetry
// otlptracehttp module because that one links gRPC and grpc-gateway
// through its shared configuration code, whose package initialisation and
// size cost megabytes of resident memory in every tether, traced or not.
//
// It follows the OTLP/HTTP specification: retry on 429, 502, 503 and 504
// and when the collector cannot be reached, with exponential backoff and
// jitter, honouring Retry-After, all within the export timeout; no retry
// on any other status or on a partial success, which is reported through
// the OpenTelemetry error handler.
type otlpExporter struct {
	cfg       exportConfig
	client    *http.Client
	userAgent string
	// firstRetry and maxRetry bound the backoff between attempts; tests
	// shorten them.
	firstRetry, maxRetry time.Duration

	// stopped is done once Shutdown was called: it ends an export that is
	// still retrying, and refuses new ones.
	stopped context.Context
	stop    context.CancelFunc
}

const (
	contentTypeProtobuf = "application/x-protobuf"
	// maxResponseBody bounds what is read of a response: a partial
	// success or an error status is a few hundred bytes.
	maxResponseBody = 64 << 10
	// maxRedirects is how many redirects within the collector's origin
	// one attempt follows.
	maxRedirects = 5
	// maxErrorText bounds the collector's text in an error message.
	maxErrorText = 256
)

var errShutdown = errors.New("OTLP exporter is shut down")

func newExporter(cfg exportConfig, version string) *otlpExporter {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = cfg.tls
	stopped, stop := context.WithCancel(context.Background())
	return &otlpExporter{
		cfg: cfg,
		client: &http.Client{
			Transport: tr,
			// Configured headers carry credentials, and Go forwards all
			// but a few well-known ones on a redirect to another host:
			// follow redirects within the collector's origin only.
			// A redirect not followed is answered as it is, and refused
			// like any other status.
			CheckRedirect: func(req *http.Request, via []*http.Request) error {
				if len(via) >= maxRedirects || req.URL.Scheme != via[0].URL.Scheme || req.URL.Host != via[0].URL.Host {
					return http.ErrUseLastResponse
				}
				return nil
			},
		},
		userAgent:  "tether/" + version + " (OTLP/HTTP trace exporter, Go)",
		firstRetry: 500 * time.Millisecond,
		maxRetry:   5 * time.Second,
		stopped:    stopped,
		stop:       stop,
	}
}

var _ sdktrace.SpanExporter = (*otlpExporter)(nil)

// ExportSpans sends one batch, retrying within the export timeout.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if e.stopped.Err() != nil {
		return errShutdown
	}
	rss := resourceSpans(spans)
	if len(rss) == 0 {
		return nil
	}
	body, err := marshalExportRequest(rss)
	if err != nil {
		return fmt.Errorf("OTLP export: encoding spans: %w", err)
	}
	if e.cfg.gzip {
		if body, err = gzipBytes(body); err != nil {
			return fmt.Errorf("OTLP export: compressing: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, e.cfg.timeout)
	defer cancel()
	defer context.AfterFunc(e.stopped, cancel)()

	var last error // the last failure worth a retry
	for attempt := 1; ; attempt++ {
		err := e.post(ctx, body)
		var re *retryableError
		if !errors.As(err, &re) {
			if err != nil && last != nil && ctx.Err() != nil {
				// Cut short by the timeout or shutdown: the collector's
				// last answer says more than "deadline exceeded".
				return fmt.Errorf("OTLP export: %w (%w after %d attempts)", last, e.interrupted(ctx), attempt)
			}
			return err
		}
		last = re.err
		delay := max(e.backoff(attempt-1), re.after)
		if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < delay {
			return fmt.Errorf("OTLP export: %w (no time left for another attempt within %v, after %d)", last, e.cfg.timeout, attempt)
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("OTLP export: %w (%w after %d attempts)", last, e.interrupted(ctx), attempt)
		case <-t.C:
		}
	}
}

// backoff is the wait before retry attempt+1: doubling from firstRetry up
// to maxRetry, each drawn from its upper half so that exporters that failed
// together do not retry together.
func (e *otlpExporter) backoff(attempt int) time.Duration {
	d := e.maxRetry
	if attempt < 30 {
		d = min(e.firstRetry<<attempt, e.maxRetry)
	}
	return d/2 + rand.N(d/2+1)
}

// interrupted says why ctx ended: shutdown, or the caller's context (the
// batch processor's own timeout, or ours).
func (e *otlpExporter) interrupted(ctx context.Context) error {
	if e.stopped.Err() != nil {
		return errShutdown
	}
	return ctx.Err()
}

// retryableError is a failed attempt worth another: after is the
// collector's Retry-After, zero when it gave none.
type retryableError struct {
	err   error
	after time.Duration
}

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// post makes one attempt. It returns nil on success (a partial success
// included, which it reports), a *retryableError when the specification
// says to retry, or the error that ends the export.
func (e *otlpExporter) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.cfg.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("OTLP export: request to %s: %w", RedactURL(e.cfg.url), redactErr(err))
	}
	req.Header.Set("User-Agent", e.userAgent)
	for k, v := range e.cfg.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", contentTypeProtobuf)
	if e.cfg.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		err = fmt.Errorf("POST %s: %w", RedactURL(e.cfg.url), redactErr(err))
		if ctx.Err() != nil {
			return fmt.Errorf("OTLP export: %w (%w)", err, e.interrupted(ctx))
		}
		if !transient(err) {
			return fmt.Errorf("OTLP export: %w", err)
		}
		// The collector could not be reached or hung up: the
		// specification asks to retry with backoff.
		return &retryableError{err: err}
	}
	defer resp.Body.Close()
	data, readErr := io.ReadAll(io.LimitReader(resp.Body, maxResponseBody))

	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		if readErr == nil && isProtobuf(resp.Header) && len(data) > 0 {
			if ps, err := partialSuccess(data); err != nil {
				otel.Handle(fmt.Errorf("OTLP export: spans accepted, but the response does not decode: %w", err))
			} else if ps != nil {
				// Not an export error: the rest was accepted, and the
				// specification forbids retrying.
				ps.message = e.mask(ps.message)
				otel.Handle(ps)
			}
		}
		return nil
	case code == http.StatusTooManyRequests, code == http.StatusBadGateway,
		code == http.StatusServiceUnavailable, code == http.StatusGatewayTimeout:
		return &retryableError{
			err:   e.statusError(resp, data),
			after: retryAfter(resp.Header.Get("Retry-After"), time.Now()),
		}
	case code >= 300 && code < 400:
		return fmt.Errorf("OTLP export: %w (a redirect to %s, not followed: only redirects within the collector's origin are)",
			e.statusError(resp, nil), RedactURL(resp.Header.Get("Location")))
	default:
		return fmt.Errorf("OTLP export: %w", e.statusError(resp, data))
	}
}

// transient reports whether a transport error may go away: not when TLS
// refused the collector's certificate, or the collector refused ours (a
// TLS alert), which no retry changes.
func transient(err error) bool {
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return false
	}
	var opErr *net.OpError
	return !errors.As(err, &opErr) || opErr.Op != "remote error"
}

// redactErr unwraps the *url.Error that http.Client returns: it quotes
// the whole URL, credentials included, and its cause says what went wrong
// without it.
func redactErr(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// statusError describes a refused export: the status and the collector's
// message (google.rpc.Status.message when the body is protobuf, else the
// start of the text), masked.
func (e *otlpExporter) statusError(resp *http.Response, body []byte) error {
	msg := ""
	if isProtobuf(resp.Header) {
		msg = statusMessage(body)
	} else {
		msg = strings.TrimSpace(string(body))
	}
	if len(msg) > maxErrorText {
		msg = msg[:maxErrorText] + "…"
	}
	msg = e.mask(msg)
	if msg == "" {
		return fmt.Errorf("%s answered %s", RedactURL(e.cfg.url), resp.Status)
	}
	return fmt.Errorf("%s answered %s: %s", RedactURL(e.cfg.url), resp.Status, msg)
}

// mask replaces every configured header value in a collector's text: a
// collector or a proxy may echo the credential it refused.
func (e *otlpExporter) mask(msg string) string {
	for _, v := range e.cfg.headers {
		if v != "" {
			msg = strings.ReplaceAll(msg, v, "REDACTED")
		}
	}
	return msg
}

func isProtobuf(h http.Header) bool {
	ct, _, _ := strings.Cut(h.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(ct), contentTypeProtobuf)
}

// retryAfter reads a Retry-After value: seconds, or an HTTP date. Zero
// when absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// partialSuccessError is a collector's answer that it accepted an export
// except for some spans (rejected), or accepted all of it with a warning
// (rejected is 0). It goes to the OpenTelemetry error handler, not back to
// the batch processor.
type partialSuccessError struct {
	rejected int64
	message  string
}

func (e *partialSuccessError) Error() string {
	msg := e.message
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("OTLP partial success: %d spans rejected: %s", e.rejected, msg)
}

// partialSuccess decodes ExportTraceServiceResponse { ExportTracePartialSuccess
// partial_success = 1 } with { int64 rejected_spans = 1; string
// error_message = 2 }. Those types live in the gRPC-linking collector
// package, hence protowire. nil when the field is absent or empty, which
// is a full success.
func partialSuccess(b []byte) (*partialSuccessError, error) {
	var ps *partialSuccessError
	err := walkFields(b, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
		if num != 1 || typ != protowire.BytesType {
			return nil
		}
		if ps == nil {
			ps = &partialSuccessError{}
		}
		return walkFields(v, func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error {
			switch {
			case num == 1 && typ == protowire.VarintType:
				ps.rejected = int64(n)
			case num == 2 && typ == protowire.BytesType:
				ps.message = string(v)
			}
			return nil
		})
	})
	if err != nil {
		return nil, err
	}
	if ps != nil && ps.rejected == 0 && ps.message == "" {
		return nil, nil
	}
	return ps, nil
}

// statusMessage returns google.rpc.Status.message (field 2), "" when the
// body is not such a message.
func statusMessage(b []byte) string {
	msg := ""
	_ = walkFields(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num == 2 && typ == protowire.BytesType {
			msg = string(v)
		}
		return nil
	})
	return msg
}

// walkFields calls fn with each field of a protobuf message: the bytes of a
// length-delimited field in v, the value of a varint in n; other wire types
// are skipped.
func walkFields(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		var v []byte
		var n uint64
		switch typ {
		case protowire.BytesType:
			v, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			n, l = protowire.ConsumeVarint(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if err := fn(num, typ, v, n); err != nil {
			return err
		}
	}
	return nil
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Shutdown ends an export still in progress and refuses later ones. The
// batch processor has already flushed by the time it calls this.
func (e *otlpExporter) Shutdown(context.Context) error {
	e.stop()
	e.client.CloseIdleConnections()
	return nil
}
