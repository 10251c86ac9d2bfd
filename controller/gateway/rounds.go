package gateway

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// A client of the 2026-07-28 protocol takes no requests from its server
// (SEP-2322): a server that needs input ends the call with an
// input-required result listing what it needs, and the client calls again
// with the answers. A backend of the classic protocol, though, asks in the
// middle of its call and waits. For such a client the gateway bridges the
// two: the backend call runs on beside the client's requests; when the
// backend asks something, the client's tools/call is answered
// input-required with the question and a requestState naming the call in
// flight, and the client's next tools/call with that state hands its
// answers to the waiting backend and waits on. The backend call stays
// bounded by the connection's callTimeout across rounds: a client that
// never calls again leaves nothing behind once it expires.

// roundStatePrefix marks a requestState the gateway issued.
const roundStatePrefix = "tether-round-"

// roundResultKept is how long the state of a call that ended stays valid:
// a backend call can end while its client is asked a question it no longer
// needs (a request of the backend's own, related to the call only because
// the call was in flight), and the client's next round then gets the
// call's result instead of "no call in flight".
const roundResultKept = 30 * time.Second

// roundResultsKeptBytes bounds the bytes of the results kept for rounds
// to come (rounds.keepResult), beside their count (--max-calls-in-flight):
// each is up to a server's message (--max-message-bytes, 16 MiB by
// default), and a client with a backend that ends its calls while they
// wait could otherwise have the gateway hold one for every call it parked
// in the last roundResultKept. Four of the default's largest fit; a
// larger result is still kept, alone.
const roundResultsKeptBytes = 64 << 20

// callRound is a backend call running across a client's requests.
type callRound struct {
	asks chan *roundAsk
	done chan struct{} // closed when the backend call returned
	// The result, once done: res when the go-sdk path made the call, raw
	// when the fast path did (fastpath.go); see result.
	res    *mcp.CallToolResult
	raw    json.RawMessage
	sent   sent // the outcome, once done
	cancel context.CancelFunc

	mu sync.Mutex
	// waiting is the client request waiting now (zero between rounds).
	waiting roundWaiter
	pending map[string]*roundAsk

	// parked: the call waits for its client's next round, and so holds
	// none of --max-calls-in-flight's slots but one of rounds.parked;
	// state is its requestState now (a round that presents one spends
	// it). Both guarded by rounds.mu.
	parked bool
	state  string
	// kept: the call ended while parked, and its result waits in
	// rounds.kept (keptBytes of it) for the client's next round. Guarded
	// by rounds.mu.
	kept      bool
	keptBytes int64
	// watched: a goroutine waits for the call's end to keep its result
	// and forget its state (park starts one, at the call's first park).
	// Guarded by rounds.mu.
	watched bool
}

// result is the call's result as the go-sdk path answers it, whichever
// path made the call: a round takes the path its own request qualifies
// for, so a call one path began may be resumed by the other.
func (cr *callRound) result() (*mcp.CallToolResult, error) {
	if cr.res != nil || cr.raw == nil {
		return cr.res, nil
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(cr.raw, &res); err != nil {
		return nil, fmt.Errorf("invalid result: %w", err)
	}
	return &res, nil
}

// roundWaiter is a client request that a call in rounds serves while it
// waits: the backend's log messages go to log and its progress to
// progress, each nil when the request takes none. Each round has its own:
// a later round carries its own progressToken and logging level, and
// what the backend sends while that round waits is that round's.
type roundWaiter struct {
	log      func(*mcp.LoggingMessageParams)
	progress func(*mcp.ProgressNotificationParams)
}

// relayLog writes a log message of the backend call on the client
// request waiting now, if any.
func (cr *callRound) relayLog(p *mcp.LoggingMessageParams) {
	cr.mu.Lock()
	log := cr.waiting.log
	cr.mu.Unlock()
	if log != nil {
		log(p)
	}
}

// relayProgress is the backend call's progress callback: each
// notification goes to the client request waiting now, under that
// request's own token, and is dropped between rounds. The connection
// delivers a call's progress one at a time, in order, and all of it
// before the call returns, so a round's progress precedes its answer.
func (cr *callRound) relayProgress(p *mcp.ProgressNotificationParams) {
	cr.mu.Lock()
	progress := cr.waiting.progress
	cr.mu.Unlock()
	if progress != nil {
		progress(p)
	}
}

// ended reports whether the backend call returned.
func (cr *callRound) ended() bool {
	select {
	case <-cr.done:
		return true
	default:
		return false
	}
}

// wait makes w the request the call serves now (roundWaiter{} for none).
func (cr *callRound) wait(w roundWaiter) {
	cr.mu.Lock()
	cr.waiting = w
	cr.mu.Unlock()
}

// resultJSON is the call's result as the fast path answers it (see
// resultJSON in fastpath.go), whichever path made the call.
func (cr *callRound) resultJSON(serverInfo json.RawMessage) (json.RawMessage, error) {
	if cr.raw != nil || cr.res == nil {
		return cr.raw, nil
	}
	b, err := json.Marshal(cr.res)
	if err != nil {
		return nil, fmt.Errorf("invalid result: %w", err)
	}
	return resultJSON(b, serverInfo)
}

// roundAsk is one backend request waiting for the client's answer.
type roundAsk struct {
	params mcp.InputRequest
	answer chan mcp.InputResponse // closed unanswered when refused
	// refused is the backend's answer when the question is not handed
	// to the client (the bound on parked calls).
	refused error
}

type rounds struct {
	mu sync.Mutex
	m  map[string]*callRound
	// parked counts the calls waiting for their client's next round:
	// between rounds a call holds no slot of --max-calls-in-flight, yet
	// its backend call runs on, so these are bounded by the same number
	// (max) of their own (docs/contract.md, Limits).
	parked, max int
	seq         atomic.Uint64
	// kept are the calls that ended while parked, oldest first: their
	// results wait for their clients' next rounds (roundResultKept at
	// most), at most max of them and maxKeptBytes of their results
	// (keptBytes) but the newest; past that the oldest is dropped, and its
	// client's next round gets "no call in flight".
	kept                    []*callRound
	keptBytes, maxKeptBytes int64
}

// keepResult keeps the result of cr (of size bytes, resultBytes), which
// ended while parked, for its client's next round, under rounds.mu, and
// drops the oldest kept results past the bounds. A call whose state is
// spent (a round took it) or that is kept already keeps nothing.
func (r *rounds) keepResult(cr *callRound, size int64) {
	if cr.kept || r.m[cr.state] != cr {
		return
	}
	cr.kept, cr.keptBytes = true, size
	r.kept = append(r.kept, cr)
	r.keptBytes += cr.keptBytes
	for len(r.kept) > r.max || (r.keptBytes > r.maxKeptBytes && len(r.kept) > 1) {
		r.forget(r.kept[0])
	}
}

// forget drops cr's state, under rounds.mu, and its result if kept: no
// round can take it any more, and the timer that forgets cr at
// roundResultKept holds cr until then.
func (r *rounds) forget(cr *callRound) {
	if r.m[cr.state] == cr {
		delete(r.m, cr.state)
	}
	if cr.kept {
		r.unkeep(cr)
		cr.res, cr.raw = nil, nil
	}
}

// unkeep takes cr's result out of the kept ones, under rounds.mu: a
// round took it, or it is forgotten.
func (r *rounds) unkeep(cr *callRound) {
	if !cr.kept {
		return
	}
	cr.kept = false
	r.keptBytes -= cr.keptBytes
	if i := slices.Index(r.kept, cr); i >= 0 {
		r.kept = slices.Delete(r.kept, i, i+1)
	}
}

// resultBytes is the size of the call's result as held: the bytes the
// fast path kept, or the go-sdk path's result as it encodes (measured
// outside rounds.mu: a result may be megabytes).
func (cr *callRound) resultBytes() int64 {
	if cr.raw != nil {
		return int64(len(cr.raw))
	}
	if cr.res == nil {
		return 0
	}
	b, _ := json.Marshal(cr.res)
	return int64(len(b))
}

// unpark is called, under rounds.mu, when cr stops waiting for its
// client: its round came, or its backend call ended.
func (r *rounds) unpark(cr *callRound) {
	if cr.parked {
		cr.parked = false
		r.parked--
	}
}

// roundsClient reports whether a client session speaks the protocol where
// its server may not send it requests.
func roundsClient(ss *mcp.ServerSession) bool {
	ip := ss.InitializeParams()
	return ip != nil && ip.ProtocolVersion >= modernProtocol
}

// sessionLog writes log messages on the go-sdk session's request of ctx
// (the go-sdk drops those its level does not admit).
func sessionLog(ctx context.Context, ss *mcp.ServerSession) func(*mcp.LoggingMessageParams) {
	return func(p *mcp.LoggingMessageParams) { _ = ss.Log(ctx, p) }
}

// roundSend makes the backend call of a call in rounds, keeping its
// result in cr (res or raw), with progress as its progress callback (nil:
// the backend is given no progress token): the go-sdk path and the fast
// path differ only in that.
type roundSend func(cr *callRound, progress func(*mcp.ProgressNotificationParams)) sendFunc

// callInRounds runs (or resumes, when p's requestState is one of the
// gateway's) the backend call of a tools/call of a 2026-07-28 client, on
// either path. c is the client the backend's requests go to (its out is
// set here), w the request that waits now: the backend's log messages
// and progress go there while it waits, whichever round it is and
// whichever path carries it. The backend is given a progress token when
// the call's first request carried one (a token the backend never got
// brings no progress; and a token given only for a later round's sake
// would hold every call's answer a while for progress that never comes:
// a call with a token waits a little for late progress once answered).
//
// It returns the round (nil when a resumed state names no call) and
// either asked, the input-required result of the backend requests the
// client must answer (a new one, or those a resumed round left
// unanswered), or, when the call is done (asked nil), its outcome; the
// result is cr's. The outcome is reported against the target that
// answered (t, or the one a reroute sent the call to); a round that asks
// the client a question is an answer.
func (g *Gateway) callInRounds(ctx context.Context, c *caller, t *target, name string, p *mcp.CallToolParams,
	w roundWaiter, send roundSend) (cr *callRound, asked *mcp.CallToolResult, s sent) {
	if strings.HasPrefix(p.RequestState, roundStatePrefix) {
		var again mcp.InputRequestMap
		var state string
		g.rounds.mu.Lock()
		cr = g.rounds.m[p.RequestState]
		delete(g.rounds.m, p.RequestState)
		if cr != nil {
			g.rounds.unkeep(cr)
			cr.mu.Lock()
			// This request waits from before its answers go: what the
			// backend sends in reply to them is its.
			cr.waiting = w
			for id, resp := range p.InputResponses {
				if a := cr.pending[id]; a != nil {
					a.answer <- resp
					delete(cr.pending, id)
				}
			}
			if len(cr.pending) > 0 && !cr.ended() {
				// Questions this round left unanswered: the backend
				// waits on for them, and the state that named them is
				// spent, so they are asked again (SEP-2322) under a new
				// one rather than left to callTimeout. The call stays
				// parked: the bound holds without a check.
				again = mcp.InputRequestMap{}
				for id, a := range cr.pending {
					again[id] = a.params
				}
				cr.waiting = roundWaiter{}
				state = g.rounds.keep(cr)
			}
			cr.mu.Unlock()
			if again == nil {
				g.rounds.unpark(cr)
			}
		}
		g.rounds.mu.Unlock()
		if cr == nil {
			return nil, nil, sent{t: t, err: callError(fmt.Sprintf("tool %q: requestState %q names no call in flight (it ended, or timed out, or its result was dropped for newer ones past the gateway's bound on kept results)", p.Name, p.RequestState))}
		}
		if again != nil {
			// The call's state is forgotten as park arranged.
			res, err := inputRequired(again, state)
			return cr, res, sent{t: t, answered: err == nil, err: err}
		}
	} else {
		cr = &callRound{asks: make(chan *roundAsk), done: make(chan struct{}), pending: map[string]*roundAsk{}, waiting: w}
		c.out = roundStream{cr: cr}
		// The call outlives this request (a question ends it), bounded by
		// callTimeout and the backend's life; cr.cancel ends it.
		rctx, cancel := context.WithCancel(wire.WithCaller(context.WithoutCancel(ctx), c))
		cr.cancel = cancel
		var progress func(*mcp.ProgressNotificationParams)
		if w.progress != nil {
			progress = cr.relayProgress
		}
		do := send(cr, progress)
		go func() {
			defer close(cr.done)
			defer cancel()
			cr.sent = g.sendCall(rctx, route{target: t, tool: p.Name}, name, do)
		}()
	}
	for {
		select {
		case <-cr.done:
			return cr, nil, cr.sent
		case a := <-cr.asks:
			state, ok := g.park(cr)
			if !ok {
				// At the bound: the backend's question is refused, and
				// the call goes on (it ends with what the backend makes
				// of that) without leaving this request.
				a.refused = fmt.Errorf("tether: %d calls already wait for their clients' answers (--max-calls-in-flight); this question was not sent to the client", g.rounds.max)
				close(a.answer)
				continue
			}
			id := "r" + strconv.FormatUint(g.rounds.seq.Add(1), 10)
			cr.mu.Lock()
			cr.pending[id] = a
			cr.waiting = roundWaiter{}
			cr.mu.Unlock()
			res, err := inputRequired(mcp.InputRequestMap{id: a.params}, state)
			return cr, res, sent{t: t, answered: err == nil, err: err}
		case <-ctx.Done():
			cr.wait(roundWaiter{})
			cr.cancel()
			<-cr.done
			return cr, nil, sent{t: cr.sent.t, err: ctx.Err(), callErr: cr.sent.callErr}
		}
	}
}

// park makes cr wait for its client's next round under a new state, which
// it returns; false, at the bound on parked calls (nothing changed then).
func (g *Gateway) park(cr *callRound) (string, bool) {
	g.rounds.mu.Lock()
	if g.rounds.parked >= g.rounds.max {
		g.rounds.mu.Unlock()
		return "", false
	}
	state := g.rounds.keep(cr)
	cr.parked = true
	g.rounds.parked++
	watch := !cr.watched
	cr.watched = true
	g.rounds.mu.Unlock()
	if !watch {
		return state, true // its first park watches for its end
	}
	go func() { // forget the call's state a while after the call ended
		<-cr.done
		size := cr.resultBytes()
		g.rounds.mu.Lock()
		g.rounds.unpark(cr)
		g.rounds.keepResult(cr, size)
		g.rounds.mu.Unlock()
		time.AfterFunc(roundResultKept, func() {
			g.rounds.mu.Lock()
			g.rounds.forget(cr)
			g.rounds.mu.Unlock()
		})
	}()
	return state, true
}

// keep gives cr a new state, under rounds.mu. One state of a call is valid
// at a time: the one before was spent by the round that came with it.
func (r *rounds) keep(cr *callRound) string {
	// Whoever presents the state answers the backend and gets the call's
	// result: it must not be guessable from states of one's own, as a
	// number in sequence was.
	state := roundStatePrefix + rand.Text()
	if r.m == nil {
		r.m = map[string]*callRound{}
	}
	r.m[state] = cr
	cr.state = state
	return state
}

// resultTypeOf is the resultType of a 2026-07-28 result (SEP-2322):
// input_required when it asks the client something.
func resultTypeOf(asks bool) string {
	if asks {
		return "input_required"
	}
	return "complete"
}

// eraResult gives a result for a 2026-07-28 client its resultType, which
// that era requires of every result, when the backend (of an earlier
// protocol) sent none: the go-sdk server sets it only on the results of
// the tools registered with it, and tether's are not (registry.go). The
// type is set only by decoding: the go-sdk keeps it unexported.
func eraResult(res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	var head struct {
		ResultType string `json:"resultType"`
	}
	if err := json.Unmarshal(b, &head); err != nil || head.ResultType != "" {
		return res, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	m["resultType"] = json.RawMessage(`"` + resultTypeOf(res.InputRequests != nil) + `"`)
	if b, err = json.Marshal(m); err != nil {
		return nil, err
	}
	var out mcp.CallToolResult
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// inputRequired builds an input-required result (its type is set only by
// decoding: the go-sdk keeps it unexported).
func inputRequired(reqs mcp.InputRequestMap, state string) (*mcp.CallToolResult, error) {
	ir, err := json.Marshal(reqs)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(map[string]any{"content": []any{}, "inputRequests": json.RawMessage(ir), "requestState": state, "resultType": "input_required"})
	if err != nil {
		return nil, err
	}
	var res mcp.CallToolResult
	if err := json.Unmarshal(b, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// roundStream reaches a client of a call in rounds: the backend's requests
// become the next round's questions, and its log messages go on the
// client's request waiting now (none between rounds).
type roundStream struct {
	cr *callRound
}

func (s roundStream) log(p *mcp.LoggingMessageParams) { s.cr.relayLog(p) }

func (s roundStream) createMessage(ctx context.Context, p *mcp.CreateMessageWithToolsParams) (*mcp.CreateMessageWithToolsResult, error) {
	return askRound[*mcp.CreateMessageWithToolsResult](ctx, s.cr, p)
}

func (s roundStream) elicit(ctx context.Context, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
	return askRound[*mcp.ElicitResult](ctx, s.cr, p)
}

func (s roundStream) listRoots(ctx context.Context, p *mcp.ListRootsParams) (*mcp.ListRootsResult, error) {
	return askRound[*mcp.ListRootsResult](ctx, s.cr, p)
}

var errWrongAnswer = errors.New("the client answered with another kind of result")

// askRound hands a backend's request to the client's next round and waits
// for its answer, of type R.
func askRound[R mcp.InputResponse](ctx context.Context, cr *callRound, ir mcp.InputRequest) (R, error) {
	var zero R
	a := &roundAsk{params: ir, answer: make(chan mcp.InputResponse, 1)}
	select {
	case cr.asks <- a:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	select {
	case resp, ok := <-a.answer:
		if !ok {
			return zero, a.refused
		}
		if r, ok := resp.(R); ok {
			return r, nil
		}
		return zero, errWrongAnswer
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}
