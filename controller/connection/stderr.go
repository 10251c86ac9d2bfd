package connection

import (
	"bytes"
	"strings"
	"sync"
)

// Bounds of a stdio child's stderr tail.
const (
	// TailLines is how many of the last stderr lines are kept.
	TailLines = 20
	// MaxLineBytes bounds one kept line; the rest of a longer line is dropped
	// and the line ends with truncatedMark.
	MaxLineBytes = 1024
)

const truncatedMark = " …[truncated]"

// stderrTail is an io.Writer that keeps the last TailLines lines written to
// it, each redacted and at most MaxLineBytes long. Write never blocks on
// anything but a short mutex and never grows beyond its bounds, whatever the
// child writes (a 10 MB line without a newline included).
type stderrTail struct {
	r *redactor

	mu        sync.Mutex
	lines     []string // ring of completed lines, redacted
	next      int      // ring index of the next line to write, once full
	partial   []byte   // the current line, at most MaxLineBytes
	truncated bool     // the current line lost bytes
	written   int64    // total bytes seen, for tests and debugging
}

func newStderrTail(r *redactor) *stderrTail {
	return &stderrTail{r: r, partial: make([]byte, 0, 256)}
}

// Write implements io.Writer. It always consumes all of p.
func (t *stderrTail) Write(p []byte) (int, error) {
	n := len(p)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.written += int64(n)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if room := MaxLineBytes - len(t.partial); len(chunk) > room {
			t.partial = append(t.partial, chunk[:room]...)
			t.truncated = true
		} else {
			t.partial = append(t.partial, chunk...)
		}
		if i < 0 {
			break
		}
		t.push(t.finish())
		p = p[i+1:]
	}
	return n, nil
}

// finish turns the current partial line into a redacted string and resets it.
func (t *stderrTail) finish() string {
	line := strings.ToValidUTF8(strings.TrimRight(string(t.partial), "\r"), "\uFFFD")
	if t.truncated {
		line = t.r.truncated(line) + truncatedMark
	} else {
		line = t.r.String(line)
	}
	t.partial = t.partial[:0]
	t.truncated = false
	return line
}

func (t *stderrTail) push(line string) {
	if len(t.lines) < TailLines {
		t.lines = append(t.lines, line)
		return
	}
	t.lines[t.next] = line
	t.next = (t.next + 1) % TailLines
}

// Lines returns the kept lines, oldest first, including an unfinished last
// line (a crash message often lacks its newline). The result is a copy.
func (t *stderrTail) Lines() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.lines)+1)
	out = append(out, t.lines[t.next:]...)
	out = append(out, t.lines[:t.next]...)
	if len(t.partial) > 0 {
		// The child may be in the middle of writing a value: drop a
		// trailing prefix of one, as for a cut line.
		line := t.r.truncated(strings.ToValidUTF8(strings.TrimRight(string(t.partial), "\r"), "\uFFFD"))
		if t.truncated {
			line += truncatedMark
		}
		out = append(out, line)
	}
	if len(out) > TailLines {
		out = out[len(out)-TailLines:]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Last returns the last non-empty line, or "".
func (t *stderrTail) Last() string {
	lines := t.Lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if s := strings.TrimSpace(lines[i]); s != "" {
			return s
		}
	}
	return ""
}
