package gateway

import (
	"io"
	"net/http"
	"time"
)

// What the gateway admits from clients, and how long it waits for them
// (docs/contract.md, "Limits on what clients send"). Every bound here is a
// field of Options with a default and a flag of tether run.

// Defaults of the client limits in Options.
const (
	// DefaultRequestReadTimeout bounds the arrival of a request body, the
	// common net/http choice for a server's read timeout.
	DefaultRequestReadTimeout = 30 * time.Second
	// DefaultMaxConnections bounds the gateway's open client connections.
	// An agent holds one to three (a POST or two and its SSE stream);
	// 1024 leaves room for hundreds of local agents, and is lowered by the
	// caller to fit the process's descriptor limit (tether run keeps half
	// of it for its own pipes, files and backends).
	DefaultMaxConnections = 1024
)

// withBodyDeadline bounds how long a request body may take to arrive: the
// server's ReadHeaderTimeout ends with the headers, and a client that then
// sends one byte of a long body would hold its connection (a descriptor, a
// go-sdk session) for good. The deadline is lifted once the body is read,
// so a call that runs for minutes afterwards is not cut off (net/http's
// ReadTimeout would cancel it: a read deadline that passes while the
// server watches the connection for a close ends the request's context).
func withBodyDeadline(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
			next.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		next.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline once the body is read to its end.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}
