package connection

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// Done is closed when the session ended, by itself (child exited, transport
// broke) or by Close, and everything it ran has stopped.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err says why the session ended (redacted); nil while it is alive. For a
// stdio child that exited, spec.ProcessOf(Err()) describes it.
func (s *Session) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

// Process describes the stdio child (pid, exit code once it exited, the
// redacted stderr tail); nil for HTTP. Restarts is the caller's to count.
func (s *Session) Process() *spec.ProcessStatus {
	if s.proc == nil {
		return nil
	}
	return s.proc.status()
}

// Sandbox says what confines the stdio child (status.sandbox: "landlock
// fs+net"); "" for none, and for HTTP.
func (s *Session) Sandbox() string {
	if s.proc == nil || s.proc.conf == nil {
		return ""
	}
	return s.proc.conf.describe
}

// Endpoint describes where the session goes, for traces: the URL without
// credentials or query values, or the stdio command without its arguments,
// redacted like everything else the session shows.
func (s *Session) Endpoint() string { return s.endpoint }

// Redact replaces every resolved secret value in str.
func (s *Session) Redact(str string) string { return s.red.String(str) }

// Close ends the session gracefully: in-flight calls are cancelled first,
// then the transport is closed and a stdio child stopped (stdin, SIGTERM,
// SIGKILL to its group), bounded by StopTimeout. Idempotent; safe
// concurrently with every other method.
func (s *Session) Close() error {
	s.end(ErrClosed)
	s.wg.Wait()
	s.deletes.Wait()
	if s.conn.ownedBySoleSession {
		s.conn.Close()
	}
	return s.closeErr
}

// end ends the session once, for cause.
func (s *Session) end(cause error) {
	s.endOnce.Do(func() {
		s.errMu.Lock()
		s.err = s.red.Err(cause)
		s.errMu.Unlock()
		s.cancel(cause)
		err := s.cs.Close()
		if s.proc != nil {
			wait := stdinGrace
			if code, _ := s.proc.exit(); code != nil {
				// The server is gone; what is left of its group (a
				// wrapper's grandchild) gets no stdin grace.
				wait = 0
			}
			s.proc.stop(wait, termGrace)
		}
		if err != nil && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(cause, ErrClosed) {
			s.log.Debug("closing transport", "error", err)
		}
		if err != nil && errors.Is(cause, ErrClosed) && !errors.Is(err, mcp.ErrConnectionClosed) {
			s.closeErr = s.red.Err(fmt.Errorf("close: %w", err))
		}
		if errors.Is(cause, ErrClosed) {
			s.log.Debug("session closed")
		} else {
			// The reconciler reports this (WARN, with the attempt); keep
			// the detail for debugging only.
			s.log.Debug("session ended", "reason", cause)
		}
		s.refreshMu.Lock()
		s.ended = true
		s.refreshMu.Unlock()
		close(s.done)
		if s.onEnd != nil {
			s.onEnd()
		}
	})
}

// watch ends the session when the child exits, the transport breaks or a
// call saw it die.
func (s *Session) watch() {
	defer s.wg.Done()
	connDone := make(chan error, 1)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		connDone <- s.cs.Wait() // returns once end closed the session, at the latest
	}()
	var exited <-chan struct{}
	if s.proc != nil {
		exited = s.proc.exited
	}
	var cause error
	select {
	case <-s.ctx.Done():
		return // Close is ending it
	case <-exited:
		cause = s.exitErr()
		// A child that wrote junk on stdout exits once the session drops
		// it (its stdin closes): the junk is the news, not the exit. The
		// session's end follows the exit at once (stdout is at EOF), so a
		// short wait tells which it was.
		select {
		case err := <-connDone:
			if junk := explainStdout(err); junk != err {
				cause = s.processErr(junk, true)
			}
		case <-time.After(100 * time.Millisecond):
		}
	case err := <-connDone:
		if e := s.limit.explain(transportErr(err)); s.limit.err() != nil {
			// The server sent a frame over the limit: the read failed, not
			// the child.
			cause = fmt.Errorf("transport unusable: %w", e)
			if s.proc != nil {
				cause = s.processErr(cause, false)
			}
			break
		}
		if s.proc != nil {
			// stdout closed (or unreadable): the child is most likely exiting.
			select {
			case <-s.proc.exited:
				cause = s.exitErr()
				if junk := explainStdout(err); junk != err {
					cause = s.processErr(junk, true)
				}
			case <-time.After(exitWait):
				cause = s.processErr(fmt.Errorf("server closed stdout: %w", transportErr(err)), false)
			case <-s.ctx.Done():
				return
			}
		} else {
			cause = fmt.Errorf("transport closed: %w", transportErr(err))
		}
	case err := <-s.fatal:
		cause = fmt.Errorf("transport unusable: %w", err)
		if s.proc != nil {
			cause = s.processErr(cause, false)
		}
	}
	s.end(cause)
}

// transportDied ends the session after a call saw its transport die: a
// stdio session's watch does it; an HTTP session's watcher waits in the
// go-sdk, so a goroutine of the session's ends it.
func (s *Session) transportDied(err error) {
	if s.proc != nil {
		select {
		case s.fatal <- err:
		default:
		}
		return
	}
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	s.endSoonLocked(fmt.Errorf("transport unusable: %w", err))
}

// endSoonLocked ends the session on a goroutine of its own, unless its end
// is under way. The caller holds refreshMu.
func (s *Session) endSoonLocked(cause error) {
	if s.ended || s.ending {
		return
	}
	s.ending = true
	s.wg.Add(1) // under refreshMu, as in startRefreshLocked
	go func() {
		defer s.wg.Done()
		s.end(cause)
	}()
}

// connClosed is the end hook of tether's own transport (streamable.go): the
// go-sdk closes the connection when a Read or Write fails, and end closes
// it. It replaces watchHTTP's goroutine for those sessions. It runs under
// the go-sdk's connection lock, so it only starts the end, on a goroutine;
// while Connect runs, Connect fails by itself, and goLive looks once more.
func (s *Session) connClosed(cause error) {
	if s.ctx.Err() != nil {
		return // end is under way (Close, or a call saw the transport die)
	}
	if errors.Is(cause, errModernServer) {
		return // Connect connects again, on the go-sdk's transport
	}
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	s.connGone, s.connCause = true, cause
	if s.live {
		s.endSoonLocked(s.connEnded())
	}
}

// connEnded is the cause of a session whose own transport closed. The
// caller holds refreshMu.
func (s *Session) connEnded() error {
	return fmt.Errorf("transport closed: %w", s.limit.explain(transportErr(s.connCause)))
}

// limitHit ends a live session whose server sent a message over its limit.
// While Connect runs, the failed read fails the handshake, and Connect
// explains it (failConnect); goLive looks once more, for a hit on a stream
// no request waits on.
func (s *Session) limitHit(err error) {
	s.refreshMu.Lock()
	live := s.live
	s.refreshMu.Unlock()
	if live {
		s.transportDied(err)
	}
}

// watchHTTP ends an HTTP session when its transport breaks or a call saw it
// die. It is watch without a child, on one goroutine: the go-sdk's Wait
// returns when the connection fails or end closes it, and a call that saw
// the transport die closes it through end on a goroutine of its own.
func (s *Session) watchHTTP() {
	defer s.wg.Done()
	err := s.cs.Wait()
	if s.ctx.Err() != nil {
		return // end is under way (Close, or a call saw the transport die)
	}
	s.end(fmt.Errorf("transport closed: %w", s.limit.explain(transportErr(err))))
}

// explainStdout says what a stdio session's decode error means: any line on
// the child's stdout that is not JSON-RPC ends the session. Other errors are
// returned as they are.
func explainStdout(err error) error {
	if err == nil || !strings.Contains(err.Error(), "invalid character") {
		return err
	}
	return fmt.Errorf("%w (the server wrote something other than JSON-RPC to stdout; logs belong on stderr)", err)
}

func transportErr(err error) error {
	if err == nil {
		return mcp.ErrConnectionClosed
	}
	return err
}

// exitErr describes a child that exited by itself. Its last words (often a
// line without a newline, written as it died) may still be in the pipe
// when it is reaped: the stderr drain gets a moment to reach EOF first.
func (s *Session) exitErr() error {
	s.proc.awaitStderr(stderrAfterExit)
	_, desc := s.proc.exit()
	return s.processErr(fmt.Errorf("server process exited: %s", desc), false)
}
