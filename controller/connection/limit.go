package connection

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync/atomic"
)

// DefaultMaxMessageBytes bounds one message a server sends when the
// Request names no bound: a stdio frame, an HTTP response body, one
// server-sent event (docs/contract.md §5a, "Limits on what servers send").
// It is the go-sdk's own default for stdio frames and events, so a server
// that works with the go-sdk client works with tether.
const DefaultMaxMessageBytes = 16 << 20

// MaxMessageFlag is the tether run flag that sets the bound; errors name it
// so that whoever meets the limit knows what to change.
const MaxMessageFlag = "--max-message-bytes"

// MessageTooLargeError is the error of a session whose server sent a message
// over the bound: a stdio frame, an HTTP response body or a server-sent
// event (one that never ends counts as one event). The session ends with
// it, and tether connects again.
type MessageTooLargeError struct {
	Connection string
	What       string // "a stdio frame", "an HTTP response body", "an SSE event"
	Limit      int64
}

func (e *MessageTooLargeError) Error() string {
	return fmt.Sprintf("connection %s: the server sent %s of more than %d bytes (the limit set by %s)",
		e.Connection, e.What, e.Limit, MaxMessageFlag)
}

// messageLimit is one session's bound on what its server sends, and the
// first time the server went over it. The session ends on that first time
// (onHit); every later read of the session fails with the same error.
type messageLimit struct {
	conn  string
	max   int64
	stdio bool // the go-sdk bounds the frames (explain reads its error)
	hit   atomic.Pointer[MessageTooLargeError]
	onHit func(error) // ends the session; must not block
}

// exceeded records that the server sent what over the limit and returns the
// session's error (the first one recorded).
func (l *messageLimit) exceeded(what string) error {
	e := &MessageTooLargeError{Connection: l.conn, What: what, Limit: l.max}
	if l.hit.CompareAndSwap(nil, e) {
		if l.onHit != nil {
			l.onHit(e)
		}
		return e
	}
	return l.hit.Load()
}

// err is the limit's error once the server went over it, else nil.
func (l *messageLimit) err() error {
	if l == nil {
		return nil
	}
	if e := l.hit.Load(); e != nil {
		return e
	}
	return nil
}

// explain returns err with the limit's error in front when the server went
// over the limit: whatever the go-sdk made of the failed read ("request
// terminated without response", a closed connection), the reason is the
// limit. The go-sdk's own stdio frame bound (which tether sets to the same
// value) says only "inbound JSON-RPC frame exceeded the configured maximum
// line length": that is recorded here as the limit too.
func (l *messageLimit) explain(err error) error {
	if err == nil || l == nil {
		return err
	}
	// Not a server's own error that merely says so: a server must not end
	// its session by quoting the go-sdk.
	if l.stdio && findServerError(err) == nil && strings.Contains(err.Error(), sdkFrameTooLarge) {
		l.exceeded("a stdio frame")
	}
	e := l.err()
	if e == nil || errors.Is(err, e) || strings.Contains(err.Error(), e.Error()) {
		return err
	}
	return fmt.Errorf("%w (%w)", e, err)
}

// sdkFrameTooLarge is the text of the go-sdk's error for a stdio frame over
// mcp.IOTransport.MaxLineLength (unexported there).
const sdkFrameTooLarge = "inbound JSON-RPC frame exceeded the configured maximum line length"

// wrap bounds the body of resp: an event stream event by event, any other
// body (a JSON answer, an error page) as a whole. Over the bound, Read
// fails with the limit's error, and keeps failing, so that a caller that
// drains what is left (the go-sdk does, to reuse the connection) stops too.
func (l *messageLimit) wrap(resp *http.Response) *http.Response {
	if l == nil || l.max <= 0 || resp == nil || resp.Body == nil {
		return resp
	}
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	resp.Body = &limitedBody{ReadCloser: resp.Body, l: l, sse: mediaType == "text/event-stream"}
	return resp
}

// limitedBody counts what one response body delivers: the bytes of the
// current event of an event stream, line ends included (an event ends at an
// empty line; CRLF, LF and CR all end a line in the SSE format), or the
// whole body otherwise.
type limitedBody struct {
	io.ReadCloser
	l   *messageLimit
	sse bool
	n   int64 // bytes of the current event, or of the body
	eol bool  // SSE: the last byte ended a line (a line end now ends the event)
	cr  bool  // SSE: the last byte was CR (an LF now belongs to it)
	err error
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	over := false
	if b.sse {
		over = b.scan(p[:n])
	} else {
		b.n += int64(n)
		over = b.n > b.l.max
	}
	if over {
		what := "an HTTP response body"
		if b.sse {
			what = "an SSE event"
		}
		b.err = b.l.exceeded(what)
		return 0, b.err
	}
	return n, err
}

// scan counts p into the current event and reports whether an event went
// over the limit.
func (b *limitedBody) scan(p []byte) bool {
	for _, c := range p {
		b.n++
		switch c {
		case '\n':
			if b.cr { // the LF of a CRLF: the line ended at the CR
				b.cr = false
				continue
			}
			b.endLine()
		case '\r':
			b.cr = true
			b.endLine()
		default:
			b.eol, b.cr = false, false
			if b.n > b.l.max {
				return true
			}
		}
	}
	return false
}

// endLine ends a line; a line that ends at once is empty and ends the event.
func (b *limitedBody) endLine() {
	if b.eol {
		b.n = 0
		return
	}
	b.eol = true
}
