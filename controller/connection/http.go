package connection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/spec"
)

// newSharedHTTPTransport makes the transport that carries every HTTP
// session of a Connector: one connection pool for all of them, so that
// 1,000 sessions to one host reuse connections instead of each owning a
// pool. Per-session headers are added by headerRoundTripper.
func newSharedHTTPTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no global cap: the per-host cap below bounds it
	// Enough for a gateway running 64 calls at once to one server; 1,000
	// sessions starting at once open more, and the extra ones close when
	// they go back to the pool instead of idling for IdleConnTimeout.
	t.MaxIdleConnsPerHost = 64
	t.IdleConnTimeout = 90 * time.Second
	// Every connection holds a read and a write buffer, and most of ours
	// are idle or carry one SSE stream of small events: 2 KiB each instead
	// of net/http's 4 KiB saves ~4 MB per 1,000 connections. Larger
	// messages are read and written in more syscalls, not refused.
	t.ReadBufferSize = 2 << 10
	t.WriteBufferSize = 2 << 10
	t.ResponseHeaderTimeout = 0 // SSE streams answer headers late; calls are bounded by their ctx
	return t
}

// headerRoundTripper sets the manifest's headers on every request of one
// session that goes to the manifest URL's origin. A redirect elsewhere gets
// none of them: the headers usually carry credentials, and a server must not
// be able to send tether, token and all, to another host (net/http drops
// Authorization on such a redirect itself, but a RoundTripper runs after
// that and would put it back).
type headerRoundTripper struct {
	base    http.RoundTripper
	headers []namedValue
	origin  string        // origin of the manifest URL
	limit   *messageLimit // bounds every response body
	// forgotten is set once the server answered a request of the session
	// that it does not know the session (forgottenSession's 404).
	forgotten *atomic.Bool
	// live learns each session id the server hands out, from the first
	// answer that carries it (a discover's or an initialize's, while
	// Connect still runs): whoever holds the id can use the session, and
	// errors quote it ("session ID: …").
	live *liveSecrets
	// rawQuery is the manifest URL's own query: its values are no session's.
	rawQuery string
	// resumes paces the resumptions of event streams that the go-sdk's
	// transport makes (resume.go).
	resumes *resumeGate
}

// origin is scheme://host:port, the port made explicit.
func origin(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return strings.ToLower(u.Scheme) + "://" + net.JoinHostPort(strings.ToLower(u.Hostname()), port)
}

func (t *headerRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.headers) > 0 && origin(req.URL) == t.origin {
		// A RoundTripper must not modify the caller's request.
		req = req.Clone(req.Context())
		for _, h := range t.headers {
			req.Header.Set(h.Name, h.Value)
		}
	}
	answered, err := t.resumes.admit(req)
	if err != nil {
		return nil, err
	}
	d := deliveryOf(req.Context())
	if d != nil && req.Method == http.MethodPost {
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
			WroteRequest: func(i httptrace.WroteRequestInfo) {
				if i.Err == nil {
					d.written.Store(true)
				}
			},
		}))
	}
	if req.URL.RawQuery != "" && req.URL.RawQuery != t.rawQuery {
		// A legacy SSE server names the session in the query of the
		// message endpoint it hands out (the go-sdk's sessionid, the
		// TypeScript SDK's sessionId, Python's session_id), and net/http
		// quotes the whole URL in a failed request's error.
		for k, vs := range req.URL.Query() {
			if strings.Contains(strings.ToLower(k), "session") {
				for _, v := range vs {
					t.live.sessionID(v)
				}
			}
		}
	}
	resp, err := t.base.RoundTrip(req)
	answered()
	if resp != nil {
		if id := resp.Header.Get(hdrSessionID); id != "" {
			t.live.sessionID(id)
		}
	}
	resp = forgottenSession(req, resp)
	// A DELETE's 404 is no word on a session still in use: the DELETE of
	// a first connection that handed its session to the go-sdk's
	// transport is answered after that session began (streamableTransport.deletes).
	lost := resp != nil && resp.StatusCode == http.StatusNotFound && req.Header.Get(hdrSessionID) != "" && req.Method != http.MethodDelete
	if lost && t.forgotten != nil {
		t.forgotten.Store(true)
	}
	if d != nil && req.Method == http.MethodPost {
		d.answered(resp, lost)
	}
	return markEvents(req, t.limit.wrap(resp)), err
}

// delivery records, for one call, that its request may have reached the
// server: the server answered its POST with a 2xx, or its POST was written
// in full and got no answer saying that the server does not know the
// session (none at all: the session ended, or the connection broke, while
// the server ran the call). A session the server loses after that is not a
// call that was never delivered (see reachedError): only a POST that was
// not written in full, or that the server refused as of a lost session,
// is not.
type delivery struct {
	reached atomic.Bool
	written atomic.Bool // the POST's last byte was written
	refused atomic.Bool // the POST met the server's 404 for the session
}

// answered records the outcome of the call's POST: resp is nil when none
// came; lost is the server's answer that it does not know the session.
func (d *delivery) answered(resp *http.Response, lost bool) {
	switch {
	case lost:
		d.refused.Store(true)
	case resp != nil && resp.StatusCode/100 == 2:
		d.reached.Store(true)
	}
}

// mayHaveRun reports whether the server may have taken the call.
func (d *delivery) mayHaveRun() bool {
	return d.reached.Load() || (d.written.Load() && !d.refused.Load())
}

type deliveryKey struct{}

// withDelivery returns ctx carrying a new delivery record for the call.
func withDelivery(ctx context.Context) (context.Context, *delivery) {
	d := &delivery{}
	return context.WithValue(ctx, deliveryKey{}, d), d
}

func deliveryOf(ctx context.Context) *delivery {
	d, _ := ctx.Value(deliveryKey{}).(*delivery)
	return d
}

// reachedError is the error of a call that reached its server before the
// server lost the session (it restarted while the call ran, and refused
// the resumption of the call's stream): the session ends as for
// mcp.ErrSessionMissing, but the error does not match it, because the
// gateway sends a call that met ErrSessionMissing again, and this one may
// have run.
type reachedError struct{ msg string }

func (e *reachedError) Error() string { return e.msg }

func (e *reachedError) Unwrap() error { return wire.ErrCallReached }

// afterDelivery is err, as reachedError when the call had reached its
// server and err says the session is missing.
func afterDelivery(d *delivery, err error) error {
	if err == nil || !d.mayHaveRun() || !errors.Is(err, mcp.ErrSessionMissing) {
		return err
	}
	return &reachedError{msg: err.Error() + " (after the server had taken the call)"}
}

// forgottenSession turns a server's answer that it does not know the
// request's session into the answer the MCP specification prescribes for
// it, a plain 404 ("the server MUST respond to requests containing that
// session ID with HTTP 404 Not Found"), so that the go-sdk and the raw path
// both read it as mcp.ErrSessionMissing: the session ends and tether
// reconnects at once, and the gateway sends a call that never reached the
// server again on the new session (see reachedError). Common answers need
// it: servers built on the TypeScript SDK send their 404 with a JSON-RPC
// error body, which the go-sdk takes for a refused request (it keeps the
// dead session); servers written after that SDK's example answer 400 "Bad
// Request: No valid session ID provided", and the Python SDK the same as
// text. Other answers pass unchanged. (A 404 with a JSON-RPC body can also mean
// "method not found" at protocol 2026-07-28, but such sessions carry no
// session id.)
func forgottenSession(req *http.Request, resp *http.Response) *http.Response {
	if resp == nil || req.Header.Get(hdrSessionID) == "" {
		return resp
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
	case http.StatusBadRequest:
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if err != nil || !refusesSession(body) {
			resp.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
			return resp
		}
	default:
		return resp
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	const text = "session not found\n"
	return &http.Response{
		Status: "404 Not Found", StatusCode: http.StatusNotFound,
		Proto: resp.Proto, ProtoMajor: resp.ProtoMajor, ProtoMinor: resp.ProtoMinor,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		Body:          io.NopCloser(strings.NewReader(text)),
		ContentLength: int64(len(text)),
		Request:       resp.Request,
	}
}

// refusesSession reports whether body says that the request's session is
// unknown, invalid or missing: a JSON-RPC error about the session (the
// TypeScript SDK's example), or a text about it (the Python SDK answers
// text/plain "Bad Request: No valid session ID provided").
func refusesSession(body []byte) bool {
	var m struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	text := string(body)
	if json.Unmarshal(body, &m) == nil {
		if m.Error == nil {
			return false
		}
		text = m.Error.Message
	}
	return strings.Contains(strings.ToLower(text), "session")
}

// httpTransport builds the go-sdk transport for h. The SSE transport ties
// its event stream to the ctx given to Connect, so it is wrapped to use the
// session's lifetime ctx instead of the (bounded) connect ctx.
//
// Every response body is bounded by limit (limit.go), which also bounds the
// go-sdk's events: its own event bound is turned off, so that an event over
// the limit fails with the limit's error, which names the flag. forgotten is
// set when the server answers that it does not know the session; live
// learns the session ids the server hands out (nil: none is kept); resumes
// paces the go-sdk transport's resumptions of event streams (resume.go;
// nil: none is paced).
func httpTransport(base http.RoundTripper, h *spec.HTTPSpec, headers []namedValue, lifetime context.Context, limit *messageLimit, forgotten *atomic.Bool, live *liveSecrets, resumes *resumeGate) (mcp.Transport, string, error) {
	u, err := url.Parse(h.URL)
	if err != nil {
		return nil, "", fmt.Errorf("http.url: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, "", fmt.Errorf("http.url: scheme %q is not http or https", u.Scheme)
	}
	client := &http.Client{Transport: &headerRoundTripper{base: base, headers: headers, origin: origin(u), limit: limit, forgotten: forgotten, live: live, rawQuery: u.RawQuery, resumes: resumes}}
	switch h.Transport {
	case "", spec.TransportStreamable:
		return &mcp.StreamableClientTransport{Endpoint: h.URL, HTTPClient: client, MaxEventSize: -1}, spec.TransportStreamable, nil
	case spec.TransportSSE:
		// The go-sdk's SSE client posts its messages (answers to the
		// server's requests among them) with no deadline, and its Close
		// waits for them: against a hung server, bound them by the
		// session's life, which ends before Close.
		client.Transport = &lifetimeRoundTripper{base: client.Transport, life: lifetime}
		return &lifetimeTransport{inner: &mcp.SSEClientTransport{Endpoint: h.URL, HTTPClient: client, MaxEventSize: -1}, ctx: lifetime}, spec.TransportSSE, nil
	default:
		return nil, "", fmt.Errorf("http.transport: %q is not %s or %s", h.Transport, spec.TransportStreamable, spec.TransportSSE)
	}
}

// lifetimeTransport connects inner with a ctx that lives as long as the
// session. The caller's connect ctx still bounds the handshake: Connect
// cancels the lifetime ctx when the connect ctx ends first.
type lifetimeTransport struct {
	inner mcp.Transport
	ctx   context.Context
}

func (t *lifetimeTransport) Connect(context.Context) (mcp.Connection, error) {
	return t.inner.Connect(t.ctx)
}

// lifetimeRoundTripper ends a request (and its response body) when the
// session's life ends.
type lifetimeRoundTripper struct {
	base http.RoundTripper
	life context.Context
}

func (t *lifetimeRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancel(req.Context())
	stop := context.AfterFunc(t.life, cancel)
	release := func() {
		stop()
		cancel()
	}
	resp, err := t.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return nil, err
	}
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	return resp, nil
}

// releasingBody calls release once the body is closed.
type releasingBody struct {
	io.ReadCloser
	release func()
	once    sync.Once
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.release)
	return err
}
