package connection

import (
	"io"
	"net/http"
	"sync/atomic"
	"time"
)

// liveness remembers when the server last sent anything: bytes on a stdio
// child's stdout or in an HTTP response body. A probe that times
// out while the server was answering other requests is queued behind them,
// not a sign of death: counting any traffic as proof of life keeps a busy
// server from being taken down by its own load.
type liveness struct{ last atomic.Int64 }

func (l *liveness) mark() { l.last.Store(time.Now().UnixNano()) }

// since reports whether the server sent anything after t.
func (l *liveness) since(t time.Time) bool { return l.last.Load() > t.UnixNano() }

// seenStream marks l on every read that returns data: a stdio child's
// stdout, an HTTP response body.
type seenStream struct {
	io.ReadCloser
	l *liveness
}

func (s seenStream) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if n > 0 {
		s.l.mark()
	}
	return n, err
}

// markResponse makes the body of resp mark l as it delivers data (a
// streamable or SSE stream delivers answers there). Headers alone prove
// nothing: an HTTP layer can answer them while the server behind is stuck.
func markResponse(resp *http.Response, l *liveness) *http.Response {
	if l == nil || resp == nil || resp.Body == nil {
		return resp
	}
	resp.Body = seenStream{ReadCloser: resp.Body, l: l}
	return resp
}
