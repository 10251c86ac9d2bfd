package connection

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
	"github.com/tether-mcp/tether/controller/tracing"
)

// This file lets the gateway forward a tools/call as bytes on a streamable
// HTTP session, beside the go-sdk client that owns the session: decoding and
// encoding every message through the go-sdk costs several times what the
// call itself does (see the README's Performance section). The session's
// HTTP client carries the manifest's headers and bounds what comes back
// (limit.go), and the request carries the go-sdk's session id and protocol
// version headers, so the server sees one more request of the same session.

// Header names of the streamable HTTP transport.
const (
	hdrSessionID       = "Mcp-Session-Id"
	hdrProtocolVersion = "Mcp-Protocol-Version"
	hdrLastEventID     = "Last-Event-ID"
)

// rawSideTimeout bounds a message the raw path sends on its own: the
// notifications/cancelled of an abandoned call, the answer to a server's
// request on a call's stream.
const rawSideTimeout = 2 * time.Second

// rawSeq numbers the requests the raw path sends. Its ids are strings, so
// they never clash with the go-sdk's integer ids on the same session.
var rawSeq atomic.Uint64

// RawParam is one params key of a tools/call, forwarded as it came.
type RawParam = wire.RawParam

// RawProtocolVersion returns the protocol version the session negotiated,
// when CallToolRaw and the lists sent as bytes can be used on it: a live
// streamable HTTP session of a classic protocol with a session id. ok is
// false for stdio and SSE sessions, for a session that ended, and for a
// 2026-07-28 session, even one whose server gave it a session id: a request
// there carries the per-request _meta (SEP-2575), which the go-sdk adds
// (requestMeta) and a raw request lacks, and its server refuses it.
func (s *Session) RawProtocolVersion() (version string, ok bool) {
	if s.ctx.Err() != nil || s.newProtocol() {
		return "", false
	}
	version, _, ok = s.rawTarget()
	return version, ok
}

// rawTarget is what a raw message needs of the session. Unlike
// RawProtocolVersion it holds while the session closes: a call that Close
// cancels must still tell the server, or the server works on for nobody
// and the session's closing DELETE waits for it (up to the go-sdk's 5 s).
func (s *Session) rawTarget() (version, sessionID string, ok bool) {
	if s.httpClient == nil || s.httpURL == "" || s.cs == nil {
		return "", "", false
	}
	res := s.cs.InitializeResult()
	if res == nil || res.ProtocolVersion == "" || s.cs.ID() == "" {
		return "", "", false
	}
	return res.ProtocolVersion, s.cs.ID(), true
}

// CallToolRaw is CallTool for a caller that holds the call as bytes: it
// sends tools/call for the server's tool name with params (arguments and
// the like, forwarded verbatim) on the session's own HTTP endpoint and
// returns the result as the server sent it, with isError read from it. As
// with CallTool, the request's _meta carries only the trace context of ctx's
// span and, when progress is non-nil, a progress token of the session's own;
// progress receives the server's notifications for it in order, with the
// token cleared and the message redacted, before CallToolRaw returns. An
// error result is redacted (its JSON is then the go-sdk's encoding of it);
// errors are redacted and wrap the server's JSON-RPC error when it sent one
// (see ServerError). Cancelling ctx sends the server notifications/cancelled.
// A transport failure that means the session is gone ends the session, as
// CallTool does.
func (s *Session) CallToolRaw(ctx context.Context, name string, params []RawParam, progress func(*mcp.ProgressNotificationParams)) (result json.RawMessage, isError bool, err error) {
	op := fmt.Sprintf("tools/call %q", name)
	if err := s.Err(); err != nil {
		return nil, false, err
	}
	version, ok := s.RawProtocolVersion()
	if !ok {
		return nil, false, s.red.Err(fmt.Errorf("%s: the session cannot carry raw requests", op))
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	var answered bool
	meta := tracing.InjectMeta(ctx, nil)
	if progress != nil {
		// Routed as CallTool's tokens are, so that progress the server
		// sends on its standalone stream arrives too; before the call's
		// flight, as in CallTool.
		var token string
		var done func(answered bool)
		callCtx, token, done = s.trackProgress(callCtx, progress)
		defer func() { done(answered) }()
		if meta == nil {
			meta = mcp.Meta{}
		}
		meta["progressToken"] = token
	}
	defer s.inFlight(callCtx)()
	callCtx, sent := withDelivery(callCtx)

	id := "tether-fast-" + strconv.FormatUint(rawSeq.Add(1), 10)
	body, err := rawRequest(id, name, params, meta)
	if err != nil {
		return nil, false, s.red.Err(fmt.Errorf("%s: %w", op, err))
	}
	x := &rawExchange{s: s, method: "tools/call", version: version, sessionID: s.cs.ID(), id: id, flight: callerFlight(callCtx)}
	result, err = x.call(callCtx, body)
	if err != nil {
		if callCtx.Err() != nil && !x.answered {
			s.sendRaw(ctx, cancelledMessage(id))
		}
		return nil, false, afterDelivery(sent, s.callErr(op, ctx, err))
	}
	answered = true
	var head struct {
		IsError bool `json:"isError"`
	}
	if err := json.Unmarshal(result, &head); err != nil {
		return nil, false, s.red.Err(fmt.Errorf("%s: invalid result: %w", op, err))
	}
	if head.IsError {
		if result, err = s.RedactErrorResultJSON(result); err != nil {
			return nil, false, s.red.Err(fmt.Errorf("%s: %w", op, err))
		}
	}
	return result, head.IsError, nil
}

// RedactErrorResultJSON redacts a tool error result given as JSON the way
// CallTool redacts one (text, embedded resources, structured content) and
// returns its JSON.
func (s *Session) RedactErrorResultJSON(raw json.RawMessage) (json.RawMessage, error) {
	var res mcp.CallToolResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("invalid result: %w", err)
	}
	s.redactErrorResult(&res)
	out, err := json.Marshal(&res)
	if err != nil {
		return nil, fmt.Errorf("encoding the redacted result: %w", err)
	}
	return out, nil
}

// rawRequest encodes a tools/call request. Only the params the caller named
// travel; their values are copied as they are.
func rawRequest(id, name string, params []RawParam, meta mcp.Meta) ([]byte, error) {
	nameJSON, err := json.Marshal(name)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, 128+len(name)+rawParamsLen(params))
	b = append(b, `{"jsonrpc":"2.0","id":"`...)
	b = append(b, id...)
	b = append(b, `","method":"tools/call","params":{"name":`...)
	b = append(b, nameJSON...)
	for _, p := range params {
		if p.Key == "name" || p.Key == "_meta" || len(p.Value) == 0 {
			continue
		}
		key, err := json.Marshal(p.Key)
		if err != nil {
			return nil, err
		}
		b = append(b, ',')
		b = append(b, key...)
		b = append(b, ':')
		b = append(b, p.Value...)
	}
	if len(meta) > 0 {
		m, err := json.Marshal(meta)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"_meta":`...)
		b = append(b, m...)
	}
	b = append(b, "}}"...)
	if !json.Valid(b) {
		return nil, errors.New("params are not valid JSON")
	}
	return b, nil
}

func rawParamsLen(params []RawParam) int {
	n := 0
	for _, p := range params {
		n += len(p.Key) + len(p.Value) + 4
	}
	return n
}

func cancelledMessage(id string) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"` + id + `","reason":"the caller is no longer waiting"}}`)
}

// rawExchange is one raw request and the messages the server sends back.
type rawExchange struct {
	s         *Session
	method    string // the request's method: "tools/call" or "ping"
	version   string
	sessionID string
	id        string // the request's id (a string)
	answered  bool   // the server's response arrived
	// flight is the downstream client the request is made for: what the
	// server sends on the request's stream is that client's. nil if none.
	flight *flight

	// questions are the server's requests (sampling, elicitation, roots)
	// that came on the stream and are being relayed to the client, by
	// their id as the server wrote it (compacted): each is relayed on a
	// goroutine of its own while the stream is read on, so that the
	// server's notifications/cancelled for one of them, or the call's
	// answer, is read while the client is still asked. The exchange ends
	// them when it returns (endQuestions).
	qmu       sync.Mutex
	questions map[string]*question
	asking    int           // question goroutines not yet returned
	idle      chan struct{} // closed when asking drops to 0 after endQuestions began
	// waiting counts the questions whose client has not answered yet;
	// held are the log messages the stream brought meanwhile (qmu), which
	// go to the client once a question is answered, before its answer
	// goes back to the server (holdLog, releaseLogs). logMu orders their
	// writes with the stream's later messages.
	waiting int
	held    []*mcp.LoggingMessageParams
	logMu   sync.Mutex
}

// question is one server request relayed to the client.
type question struct {
	cancel    context.CancelFunc
	withdrawn bool // the server cancelled it: it gets no answer
}

// rawMessage is any JSON-RPC message, decoded only as far as routing needs.
type rawMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
	Result json.RawMessage `json:"result"`
	Error  *jsonrpc.Error  `json:"error"`
}

// call sends body and reads the server's answer: one JSON response, or an
// event stream carrying notifications and server requests before it.
func (x *rawExchange) call(ctx context.Context, body []byte) (json.RawMessage, error) {
	resp, err := x.post(ctx, body)
	if err != nil {
		return nil, err
	}
	defer x.endQuestions()
	prevID := ""
	for resumes := 0; ; {
		result, lastEventID, retry, err := x.read(ctx, resp)
		if err != nil || x.answered {
			return result, err
		}
		// The stream ended before the answer. Like the go-sdk client
		// (whose transport does not carry a call held as bytes), resume it
		// when the server numbered its events, else give up; a stream that
		// brought new events since the last resume starts the count again
		// (servers that poll close the stream between progress events).
		if lastEventID != "" && lastEventID != prevID {
			resumes = 0
		}
		if lastEventID == "" || resumes >= streamMaxRetries {
			return nil, errors.New("request terminated without response")
		}
		prevID = lastEventID
		resumes++
		// Paced as streamableConn.follow paces its streams (resume.go).
		if err := x.s.waitToResume(ctx, retry); err != nil {
			return nil, err
		}
		if resp, err = x.resume(ctx, lastEventID); err != nil {
			return nil, err
		}
	}
}

func (x *rawExchange) newRequest(ctx context.Context, method string, body []byte) (*http.Request, error) {
	return mcpRequest(ctx, method, x.s.httpURL, body, x.version, x.sessionID)
}

// post sends one message and checks the answer's status as the go-sdk
// client does, so that a raw call fails as CallTool would.
func (x *rawExchange) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := x.newRequest(ctx, http.MethodPost, body)
	if err != nil {
		return nil, err
	}
	resp, err := x.s.httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("sending %q: %w", x.method, err)
	}
	if _, err := responseError(x.method, x.sessionID, resp, true); err != nil {
		return nil, err
	}
	return resp, nil
}

func (x *rawExchange) resume(ctx context.Context, lastEventID string) (*http.Response, error) {
	// Paced by call (waitToResume): the session's resumeGate lets it pass.
	req, err := x.newRequest(withPaced(ctx), http.MethodGet, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set(hdrLastEventID, lastEventID)
	resp, err := x.s.httpClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("resuming %q: %w", x.method, err)
	}
	if _, err := responseError(x.method, x.sessionID, resp, true); err != nil {
		return nil, err
	}
	return resp, nil
}

// read consumes one response body. It returns the result once the answer
// arrived (x.answered), or the last event id and retry delay of a stream
// that ended without it.
func (x *rawExchange) read(ctx context.Context, resp *http.Response) (result json.RawMessage, lastEventID string, retry time.Duration, err error) {
	defer drain(resp) // so that the connection can be reused
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "application/json":
		// The session's HTTP client bounds the body (messageLimit.wrap).
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, "", 0, fmt.Errorf("%s: failed to read body: %w", x.method, err)
		}
		result, err := x.handle(ctx, body)
		if err == nil && !x.answered {
			err = fmt.Errorf("%s: the JSON answer is not the response", x.method)
		}
		return result, "", 0, err
	case "text/event-stream":
		return x.readEvents(ctx, resp.Body)
	default:
		return nil, "", 0, fmt.Errorf("%s: unsupported content type %q", x.method, mediaType)
	}
}

// readEvents reads server-sent events until the call's response.
func (x *rawExchange) readEvents(ctx context.Context, body io.Reader) (result json.RawMessage, lastEventID string, retry time.Duration, err error) {
	es := newEventStream(body, 4096)
	defer es.release()
	for {
		data, err := es.next()
		if err != nil {
			var tooLarge *MessageTooLargeError
			if errors.As(err, &tooLarge) {
				return nil, "", 0, fmt.Errorf("%s: %w", x.method, err)
			}
			if ctx.Err() != nil {
				return nil, "", 0, ctx.Err()
			}
			// The stream ended (or broke) before the answer; an
			// incomplete last event is dropped, as the go-sdk client
			// does with the same stream.
			return nil, es.lastID, es.retry, nil
		}
		res, err := x.handle(ctx, data)
		if err != nil || x.answered {
			return res, es.lastID, es.retry, err
		}
	}
}

// handle routes one message the server sent on the call's stream.
func (x *rawExchange) handle(ctx context.Context, msg []byte) (json.RawMessage, error) {
	// What the go-sdk's client would refuse to decode is refused here too:
	// a tool list nested deeper, taken in, would be served to every client
	// of the gateway, and a go-sdk client refuses the whole tools/list.
	if !wire.WithinSDKDepth(msg) {
		return nil, fmt.Errorf("%s: failed to decode event: JSON nested deeper than %d levels", x.method, wire.SDKMaxDepth)
	}
	var m rawMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		return nil, fmt.Errorf("%s: failed to decode event: %w", x.method, err)
	}
	isID := len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null"))
	switch {
	case m.Method == "" && isID:
		var id string
		if json.Unmarshal(m.ID, &id) != nil || id != x.id {
			// Not this request's answer: a stream carries only its own
			// request's response, so this one answers nothing tether
			// asked and proves nothing (liveness.go).
			return nil, nil
		}
		// The answer to tether's request: the server answers (liveness.go).
		x.s.seen.answered()
		x.answered = true
		if m.Error != nil {
			return nil, m.Error
		}
		if len(m.Result) == 0 || bytes.Equal(m.Result, []byte("null")) {
			return nil, fmt.Errorf("%s: response without a result", x.method)
		}
		return m.Result, nil
	case m.Method == "notifications/progress":
		var p mcp.ProgressNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			x.s.routeProgress(&p)
		}
	case m.Method == methodCreateMessage || m.Method == methodElicit || m.Method == methodListRoots:
		// The server asks the client something while it works on the
		// call: this call's client, since it came on the call's stream
		// (after the progress it sent before: relayTo).
		x.ask(ctx, m)
	case m.Method == "notifications/cancelled":
		// The server withdraws a question it asked on this stream (the
		// go-sdk client's handlers, which do not see this stream, would
		// have their ctx cancelled by it).
		var p struct {
			RequestID json.RawMessage `json:"requestId"`
		}
		if json.Unmarshal(m.Params, &p) == nil {
			x.withdraw(p.RequestID)
		}
	case m.Method != "" && isID:
		// Anything else (ping): answer as tether's go-sdk client does;
		// it does not see this stream, so it cannot answer itself.
		x.s.sendRaw(ctx, clientAnswer(m.ID, m.Method))
	case m.Method == "notifications/message":
		var p mcp.LoggingMessageParams
		if json.Unmarshal(m.Params, &p) == nil {
			x.logMu.Lock()
			if !x.holdLog(&p) {
				x.s.relayLog(x.caller(), &p)
			}
			x.logMu.Unlock()
		}
	case m.Method == "notifications/resources/updated":
		var p mcp.ResourceUpdatedNotificationParams
		if json.Unmarshal(m.Params, &p) == nil {
			x.s.resourceUpdated(&p)
		}
	case m.Method == "notifications/tools/list_changed", m.Method == "notifications/prompts/list_changed",
		m.Method == "notifications/resources/list_changed":
		// As the go-sdk client's handlers do, which do not see this
		// stream (servers usually send them on the standalone stream,
		// which the go-sdk client reads).
		x.s.toolsChangedUpstream()
	case m.Method != "":
		x.s.log.Debug("raw tools/call: notification on the call's stream ignored", "method", m.Method)
	}
	return nil, nil
}

// ask relays the server's request m to the client on a goroutine of its
// own and sends the server the client's answer, unless the server
// withdrew the request meanwhile (the spec: no response to a cancelled
// request) or the exchange ended. Past relaysPerRequest questions at once
// the server is answered with errTooManyRelays on the reading goroutine,
// as relayTo would answer it: no goroutine, no question.
func (x *rawExchange) ask(ctx context.Context, m rawMessage) {
	x.qmu.Lock()
	if x.asking >= relaysPerRequest {
		x.qmu.Unlock()
		x.s.sendRaw(ctx, relayAnswer(m.ID, nil, x.s.relayError(m.Method, errTooManyRelays)))
		return
	}
	qctx, cancel := context.WithCancel(ctx)
	q := &question{cancel: cancel}
	key := compactID(m.ID)
	if x.questions == nil {
		x.questions = make(map[string]*question)
	}
	x.questions[key] = q
	x.asking++
	x.waiting++
	x.qmu.Unlock()
	go func() {
		res, err := x.s.relayRequest(qctx, x.flight, m.Method, m.Params)
		x.releaseLogs()
		x.qmu.Lock()
		withdrawn := q.withdrawn
		if x.questions[key] == q {
			delete(x.questions, key)
		}
		x.qmu.Unlock()
		if !withdrawn && ctx.Err() == nil {
			x.s.sendRaw(ctx, relayAnswer(m.ID, res, err))
		}
		cancel()
		x.qmu.Lock()
		if x.asking--; x.asking == 0 && x.idle != nil {
			close(x.idle)
		}
		x.qmu.Unlock()
	}()
}

// caller is the client of the exchange's request, nil if none.
func (x *rawExchange) caller() wire.Caller {
	if x.flight == nil {
		return nil
	}
	return x.flight.caller
}

// holdLog keeps p, a log message read while a question waits for its
// client, until the question is answered (releaseLogs), and reports
// whether it did. The stream is read on while the client is asked (so
// that the server's cancel and the call's answer are seen), but what the
// server sends meanwhile is the client's next round's, on a 2026-07-28
// client (docs/contract.md §5: a message written between rounds reached no
// one), and came after the question for every client. At most
// maxQueuedLogs are held; later ones are dropped as a full log queue
// drops them. The caller holds logMu.
func (x *rawExchange) holdLog(p *mcp.LoggingMessageParams) bool {
	x.qmu.Lock()
	defer x.qmu.Unlock()
	if x.waiting == 0 {
		return false
	}
	if len(x.held) < maxQueuedLogs {
		x.held = append(x.held, p)
	} else {
		x.s.logs.drop()
	}
	return true
}

// releaseLogs counts one question answered (or given up) and writes the
// log messages held meanwhile to the client, in order, before the answer
// goes back to the server.
func (x *rawExchange) releaseLogs() {
	x.logMu.Lock()
	defer x.logMu.Unlock()
	x.qmu.Lock()
	x.waiting--
	held := x.held
	x.held = nil
	x.qmu.Unlock()
	for _, p := range held {
		x.s.relayLog(x.caller(), p)
	}
}

// withdraw ends the question the server asked with id, if it is still
// being relayed.
func (x *rawExchange) withdraw(id json.RawMessage) {
	x.qmu.Lock()
	q := x.questions[compactID(id)]
	if q != nil {
		q.withdrawn = true
	}
	x.qmu.Unlock()
	if q != nil {
		q.cancel()
	}
}

// endQuestions ends the questions still relayed when the exchange returns
// (their call is over) and waits for their goroutines, at most relayDrain
// for a client that does not let go, as a flight's end does (inFlight).
func (x *rawExchange) endQuestions() {
	x.qmu.Lock()
	for _, q := range x.questions {
		q.cancel()
	}
	if x.asking == 0 {
		x.qmu.Unlock()
		return
	}
	x.idle = make(chan struct{})
	idle := x.idle
	x.qmu.Unlock()
	t := time.NewTimer(relayDrain)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
}

// compactID is a JSON-RPC id as a map key: its JSON without whitespace,
// so that the id a notifications/cancelled names matches the request's
// however the server spaced either.
func compactID(id json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, id) != nil {
		return string(id)
	}
	return b.String()
}

// relayAnswer is the response to a server's request: the client's answer
// as JSON, or the error.
func relayAnswer(id json.RawMessage, res json.RawMessage, err error) []byte {
	var body []byte
	if err == nil {
		body, err = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Result  json.RawMessage `json:"result"`
		}{"2.0", id, res})
	}
	if err != nil {
		var je *jsonrpc.Error
		if !errors.As(err, &je) {
			je = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: err.Error()}
		}
		body, _ = json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Error   *jsonrpc.Error  `json:"error"`
		}{"2.0", id, je})
	}
	return body
}

// clientAnswer is what tether's go-sdk client (no roots, sampling or
// elicitation) answers a server's request.
func clientAnswer(id json.RawMessage, method string) []byte {
	var tail string
	switch method {
	case "ping":
		tail = `"result":{}`
	case "roots/list":
		tail = `"result":{"roots":[]}`
	case "elicitation/create":
		tail = `"error":{"code":-32602,"message":"client does not support elicitation"}`
	case "sampling/createMessage":
		tail = `"error":{"code":-31001,"message":"client does not support CreateMessage"}`
	default:
		tail = `"error":{"code":-32601,"message":"method not found"}`
	}
	return []byte(`{"jsonrpc":"2.0","id":` + string(id) + `,` + tail + `}`)
}

// sendRaw posts one message (a notification or a response) on the session,
// bounded by rawSideTimeout, whatever became of ctx or of the session.
func (s *Session) sendRaw(ctx context.Context, msg []byte) {
	version, sessionID, ok := s.rawTarget()
	if !ok {
		return
	}
	// Bounded by rawSideTimeout alone, not by the session's life: see
	// rawTarget.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rawSideTimeout)
	defer cancel()
	req, err := mcpRequest(sctx, http.MethodPost, s.httpURL, msg, version, sessionID)
	if err != nil {
		return
	}
	resp, err := s.httpClient.Do(req)
	if err != nil {
		s.log.Debug("raw message not delivered", "error", err)
		return
	}
	drain(resp)
}

// rawList sends one page of a list request (tools/list and the catalog's
// lists) beside the go-sdk, on a streamable session, and returns the result
// as the server sent it. Cancelling ctx before the answer tells the server.
// A session that cannot carry raw requests (any more: it may have ended
// since the caller looked) is an error.
func (s *Session) rawList(ctx context.Context, method, cursor string) (json.RawMessage, error) {
	version, ok := s.RawProtocolVersion()
	if !ok {
		return nil, fmt.Errorf("%s: the session cannot carry raw requests", method)
	}
	id := "tether-list-" + strconv.FormatUint(rawSeq.Add(1), 10)
	body := `{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `"}`
	if cursor != "" {
		c, err := json.Marshal(cursor)
		if err != nil {
			return nil, err
		}
		body = `{"jsonrpc":"2.0","id":"` + id + `","method":"` + method + `","params":{"cursor":` + string(c) + `}}`
	}
	x := &rawExchange{s: s, method: method, version: version, sessionID: s.cs.ID(), id: id}
	result, err := x.call(ctx, []byte(body))
	if err != nil && ctx.Err() != nil && !x.answered {
		s.sendRaw(ctx, cancelledMessage(id))
	}
	return result, err
}

// pingRaw pings the server beside the go-sdk, on a streamable session: the
// health probe of 1,000 idle connections, one every 30 s each, was most of
// tether's idle CPU through the go-sdk (each message it decodes allocates a
// fresh 32 KiB buffer, and the garbage drives the GC). ok is false when the
// session cannot carry raw requests; the caller pings through the go-sdk.
func (s *Session) pingRaw(ctx context.Context) (ok bool, err error) {
	version, ok := s.RawProtocolVersion()
	if !ok {
		return false, nil
	}
	id := "tether-ping-" + strconv.FormatUint(rawSeq.Add(1), 10)
	x := &rawExchange{s: s, method: "ping", version: version, sessionID: s.cs.ID(), id: id}
	_, err = x.call(ctx, []byte(`{"jsonrpc":"2.0","id":"`+id+`","method":"ping"}`))
	return true, err
}
