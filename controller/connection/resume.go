package connection

import "time"

// How often tether resumes an event stream a server ended (docs/contract.md
// §5a, "Limits on what servers send"; docs/reliability.md). A server's SSE
// retry field sets the delay, but a server that sends retry: 0 and closes
// its stream after every event, each with a fresh id (which counts as
// progress, so streamMaxRetries never ends it), would otherwise have tether
// reconnect as fast as the loopback allows, for the session's life (the
// standalone stream) or the call's (a call's stream). Both roads that
// resume a stream tether reads itself, streamableConn.follow and
// rawExchange.call, take their delay from a resumePace.
const (
	// resumeFloor is the least delay before a resumption, whatever the
	// server says: SEP-1699 servers that poll set retry in hundreds of
	// milliseconds to seconds (the conformance suite's sse-retry scenario
	// asks for 500 ms and fails a client that waits twice that), so the
	// floor is below what they ask and above what a reconnect storm needs.
	resumeFloor = 250 * time.Millisecond
	// resumeQuick: a stream that ended sooner after its response came
	// ended quickly. A polling server holds its stream until it has
	// something to say; one that ends every stream at once is asked again
	// less and less often.
	resumeQuick = time.Second
	// resumeQuickFree quick ends in a row are resumed at the floor; each
	// quick end past them doubles it, up to resumeMaxDelay.
	resumeQuickFree = 4
	// resumeMaxDelay caps the delay, the server's retry included: a stream
	// resumed later than that misses what it would bring for no reason.
	resumeMaxDelay = reconnectMaxDelay
)

// resumePace is the pace of one event stream's resumptions: a call's stream
// or a session's standalone stream. Not safe for concurrent use; one
// goroutine reads a stream.
type resumePace struct {
	now    func() time.Time // nil: time.Now
	opened time.Time        // when the stream being read was answered
	quick  int              // quick ends in a row
}

func (p *resumePace) clock() time.Time {
	if p.now != nil {
		return p.now()
	}
	return time.Now()
}

// started marks the moment a stream (the first or a resumed one) was
// answered.
func (p *resumePace) started() { p.opened = p.clock() }

// next is the delay before resuming the stream that just ended, whose
// server asked for retry (0: it did not say; the go-sdk's backoff then):
// at least resumeFloor, doubled for each quick end past resumeQuickFree in
// a row, at most resumeMaxDelay.
func (p *resumePace) next(retry time.Duration) time.Duration {
	if p.clock().Sub(p.opened) < resumeQuick {
		p.quick++
	} else {
		p.quick = 0
	}
	d := retry
	if d <= 0 {
		d = reconnectDelay(1)
	}
	floor := resumeFloor
	for i := resumeQuickFree; i < p.quick && floor < resumeMaxDelay; i++ {
		floor *= 2
	}
	return min(max(d, floor), resumeMaxDelay)
}
