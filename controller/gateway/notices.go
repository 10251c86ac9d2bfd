package gateway

import (
	"bytes"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A request the gateway relays to a client for one of its calls (sampling,
// elicitation, roots during tools/call, prompts/get, resources/read) goes
// on that call's own response stream, and so does
// the notifications/cancelled the go-sdk sends when the relay is given up
// (the call timed out or ended). The go-sdk sends that notice from a
// goroutine of its own, and drops it once the call's answer has been
// written: the stream is closed by then. The client's request would stay
// open forever. So a relay given up waits, at most noticeWait, until the
// call's stream has carried the notice; the call's answer comes after (the
// connection's end of a request waits for its relays).

// noticesHeader names, on a session POST as the go-sdk hands it to the
// request's handler, the cancelNotices of that POST's response stream. Set
// by the gateway only; a client's own is removed.
const noticesHeader = "Tether-Internal-Stream"

// noticeWait bounds the wait for a notice: below the connection's bound on
// the end of a request, so that the relay returns first.
const noticeWait = 500 * time.Millisecond

var cancelledMethod = []byte(`"notifications/cancelled"`)

// cancelNotices counts the notifications/cancelled written on one POST's
// response stream.
type cancelNotices struct {
	mu   sync.Mutex
	n    int
	owed int           // notices the relays given up on this stream wait for
	more chan struct{} // closed at the next count
}

// owe records one more relay given up on the stream and returns the count
// of notices below which it is not yet written (its own among them).
func (c *cancelNotices) owe() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.owed++
	return c.owed - 1
}

func newCancelNotices() *cancelNotices { return &cancelNotices{more: make(chan struct{})} }

func (c *cancelNotices) add() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	close(c.more)
	c.more = make(chan struct{})
}

// await waits until more than n notices were written, at most d.
func (c *cancelNotices) await(n int, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		c.mu.Lock()
		got, more := c.n, c.more
		c.mu.Unlock()
		if got > n {
			return true
		}
		select {
		case <-more:
		case <-t.C:
			return false
		}
	}
}

// noticeWriter counts the notices the go-sdk writes on a POST's response.
// A notice is one SSE event, written whole.
type noticeWriter struct {
	http.ResponseWriter
	notices *cancelNotices
}

func (w noticeWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	if err == nil && bytes.Contains(p, cancelledMethod) {
		w.notices.add()
	}
	return n, err
}

func (w noticeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w noticeWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// streamNotices is the gateway's table of the session POSTs in flight.
type streamNotices struct {
	mu  sync.Mutex
	seq uint64
	m   map[string]*cancelNotices
}

// watch wraps w to count the notices of r's response and names them on r
// for the tool handler; done forgets them.
func (s *streamNotices) watch(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, func()) {
	cn := newCancelNotices()
	s.mu.Lock()
	s.seq++
	key := strconv.FormatUint(s.seq, 10)
	if s.m == nil {
		s.m = make(map[string]*cancelNotices)
	}
	s.m[key] = cn
	s.mu.Unlock()
	r.Header.Set(noticesHeader, key)
	return noticeWriter{ResponseWriter: w, notices: cn}, func() {
		s.mu.Lock()
		delete(s.m, key)
		s.mu.Unlock()
	}
}

// of returns the notices of the POST that carried a request.
func (s *streamNotices) of(extra *mcp.RequestExtra) *cancelNotices {
	if extra == nil || extra.Header == nil {
		return nil
	}
	key := extra.Header.Get(noticesHeader)
	if key == "" {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[key]
}
