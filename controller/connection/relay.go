package connection

//lint:file-ignore SA1019 relaying sampling, roots and logging (deprecated as of 2026-07-28, live on every earlier protocol) is what the gateway promises

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/controller/gateway/wire"
)

// This file is what a session offers the gateway beyond tools: the
// server's prompts, resources and resource templates (listed at connect and
// again after the server's list_changed), the requests that reach them, and
// the relay of what the server sends while it serves a request of the
// gateway's: log messages, and sampling, elicitation and roots requests,
// which go to the downstream client that made the request (wire.Caller).
//
// A server's message names no request it belongs to. The session relates
// it to a request in flight where it can tell which: a message on a raw
// call's own response stream belongs to that call (raw.go); otherwise, when
// every request in flight that carries a Caller comes from one downstream
// client, the message is that client's. With requests of several clients in
// flight, a log message goes to the Listener (to every client) and a
// request is refused with an MCP error rather than guessed.

// maxCatalogItems bounds one list of tools, prompts, resources or
// templates: a server whose pages never end, or hold ever more entries,
// must not hold a refresh forever nor fill tether's memory.
const maxCatalogItems = 100_000

// catalog is what the server offers besides tools; replaced, never modified.
type catalog struct {
	prompts   []*mcp.Prompt
	resources []*mcp.Resource
	templates []*mcp.ResourceTemplate
	sum       [sha256.Size]byte
}

// Prompts returns the server's prompts (shared: read them, never modify).
func (s *Session) Prompts() []*mcp.Prompt { return s.catalogOf().prompts }

// Resources returns the server's resources (shared: read them, never modify).
func (s *Session) Resources() []*mcp.Resource { return s.catalogOf().resources }

// ResourceTemplates returns the server's resource templates (shared: read
// them, never modify).
func (s *Session) ResourceTemplates() []*mcp.ResourceTemplate { return s.catalogOf().templates }

func (s *Session) catalogOf() *catalog {
	if c := s.catalog.Load(); c != nil {
		return c
	}
	return &catalog{}
}

// refreshCatalog lists the prompts, resources and templates the server
// declared, and reports whether any changed. A list the server refuses
// (method not found) counts as empty (and is logged): prompts and
// resources are extras, the session does not fail over them.
func (s *Session) refreshCatalog(ctx context.Context) (changed bool, err error) {
	res := s.cs.InitializeResult()
	if res == nil || res.Capabilities == nil {
		return false, nil
	}
	caps := res.Capabilities
	old := s.catalogOf()
	next := &catalog{prompts: old.prompts, resources: old.resources, templates: old.templates}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	// A server that declared a list and refuses to give it (method not
	// found) offers none: logged, not fatal.
	refused := func(op string, err error) error {
		if serverRefused(err) != nil {
			s.log.Debug("server refused a list it declared", "list", op, "error", s.red.Err(err))
			return nil
		}
		return s.callErr(op, ctx, err)
	}
	// The lists go out together, each following its own cursors; each
	// goroutine writes only its own field of next.
	var lists []func(context.Context) error
	if caps.Prompts != nil {
		lists = append(lists, func(ctx context.Context) (err error) {
			if next.prompts, err = catalogList(ctx, s, "prompts/list", "prompts", func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, int, error) {
				r, err := beneathCache(ctx, s, "prompts/list", func(meta mcp.Meta) *mcp.ListPromptsParams {
					return &mcp.ListPromptsParams{Meta: meta, Cursor: cursor}
				}, s.cs.ListPrompts)
				if err != nil {
					return nil, "", 0, err
				}
				return r.Prompts, r.NextCursor, sizeUnread, nil
			}); err != nil {
				return refused("prompts/list", err)
			}
			return nil
		})
	}
	if caps.Resources != nil {
		lists = append(lists, func(ctx context.Context) (err error) {
			if next.resources, err = catalogList(ctx, s, "resources/list", "resources", func(ctx context.Context, cursor string) ([]*mcp.Resource, string, int, error) {
				r, err := beneathCache(ctx, s, "resources/list", func(meta mcp.Meta) *mcp.ListResourcesParams {
					return &mcp.ListResourcesParams{Meta: meta, Cursor: cursor}
				}, s.cs.ListResources)
				if err != nil {
					return nil, "", 0, err
				}
				return r.Resources, r.NextCursor, sizeUnread, nil
			}); err != nil {
				return refused("resources/list", err)
			}
			return nil
		}, func(ctx context.Context) (err error) {
			if next.templates, err = catalogList(ctx, s, "resources/templates/list", "resourceTemplates", func(ctx context.Context, cursor string) ([]*mcp.ResourceTemplate, string, int, error) {
				r, err := beneathCache(ctx, s, "resources/templates/list", func(meta mcp.Meta) *mcp.ListResourceTemplatesParams {
					return &mcp.ListResourceTemplatesParams{Meta: meta, Cursor: cursor}
				}, s.cs.ListResourceTemplates)
				if err != nil {
					return nil, "", 0, err
				}
				return r.ResourceTemplates, r.NextCursor, sizeUnread, nil
			}); err != nil {
				return refused("resources/templates/list", err)
			}
			return nil
		})
	}
	if err := together(callCtx, lists...); err != nil {
		return false, err
	}
	b, err := json.Marshal([]any{next.prompts, next.resources, next.templates})
	if err != nil {
		return false, s.red.Err(fmt.Errorf("prompts and resources: %w", err))
	}
	next.sum = sha256.Sum256(b)
	if next.sum == old.sum && s.catalog.Load() != nil {
		return false, nil
	}
	s.catalog.Store(next)
	return true, nil
}

// catalogList lists every entry of method: as bytes beside the go-sdk
// where the session can carry raw lists (rawPage), else through the
// go-sdk, one page at a time (page), so that both ways keep the same
// bounds and drop null entries alike (listPages).
func catalogList[E any](ctx context.Context, s *Session, method, key string, page func(ctx context.Context, cursor string) ([]*E, string, int, error)) ([]*E, error) {
	if _, raw := s.RawProtocolVersion(); raw {
		page = rawPage[E](s, method, key)
	}
	return listPages(ctx, maxCatalogItems, s.limit.max, page)
}

// beneathCache sends a request through the go-sdk: on a 2026-07-28
// session beneath its client's caches (rawSend, with the request _meta the
// go-sdk would add), else through send. Those caches keep what they are
// handed for the session's life, keyed by the request, and drop an entry
// only on a notification that names it: a list's pages by cursor, until
// that very list's list_changed (any list_changed refreshes every list, so
// pages a server gave fresh cursors would pile up there, a list's bytes
// each refresh, past the bound on one list, docs/contract.md §5a); a read
// resource by URI, until notifications/resources/updated for that URI (a
// gateway client reading many URIs would grow tether's memory by one
// result each, up to --max-message-bytes, for the session's life). params
// builds the request's params with meta (nil on the go-sdk's road, which
// adds its own).
func beneathCache[P mcp.Params, R mcp.Result](ctx context.Context, s *Session, method string, params func(meta mcp.Meta) P, send func(context.Context, P) (R, error)) (R, error) {
	meta, ok := s.requestMeta()
	if !s.newProtocol() || !ok || s.rawSend == nil {
		return send(ctx, params(nil))
	}
	return sendBeneath[P, R](ctx, s, method, params(meta))
}

// sendBeneath sends a request through the go-sdk's sending handlers
// beneath its client (rawSend, which the caller checked is set), and
// returns the result as R.
func sendBeneath[P mcp.Params, R mcp.Result](ctx context.Context, s *Session, method string, params P) (R, error) {
	var zero R
	res, err := s.rawSend(ctx, method, &mcp.ClientRequest[P]{Session: s.cs, Params: params})
	if err != nil {
		return zero, err
	}
	r, ok := res.(R)
	if !ok {
		return zero, fmt.Errorf("unexpected result %T", res)
	}
	return r, nil
}

// GetPrompt gets a prompt upstream: p is forwarded as it is (the caller
// builds it: name, arguments), its result as the server sent it. ctx may
// carry the downstream client (wire.WithCaller) for what the server sends
// meanwhile. Errors are redacted.
func (s *Session) GetPrompt(ctx context.Context, p *mcp.GetPromptParams) (res *mcp.GetPromptResult, err error) {
	if m := s.levelMeta(ctx, p.Meta); m != nil {
		cp := *p
		cp.Meta = m
		p = &cp
	}
	err = s.request(ctx, fmt.Sprintf("prompts/get %q", p.Name), func(ctx context.Context) error {
		res, err = s.cs.GetPrompt(ctx, p)
		return err
	})
	return res, err
}

// ReadResource reads a resource upstream, as GetPrompt gets a prompt, on
// a 2026-07-28 session beneath the go-sdk's store of read results
// (beneathCache): tether keeps no result past its answer.
func (s *Session) ReadResource(ctx context.Context, p *mcp.ReadResourceParams) (res *mcp.ReadResourceResult, err error) {
	own := p.Meta
	if m := s.levelMeta(ctx, p.Meta); m != nil {
		own = m
	}
	err = s.request(ctx, fmt.Sprintf("resources/read %q", p.URI), func(ctx context.Context) error {
		res, err = beneathCache(ctx, s, "resources/read", func(meta mcp.Meta) *mcp.ReadResourceParams {
			cp := *p
			cp.Meta = own
			if meta != nil {
				// The go-sdk's keys where the params lack them, as it
				// adds them (injectRequestMeta).
				maps.Copy(meta, own)
				cp.Meta = meta
			}
			return &cp
		}, s.cs.ReadResource)
		return err
	})
	return res, err
}

// Complete asks the server for completion/complete.
func (s *Session) Complete(ctx context.Context, p *mcp.CompleteParams) (res *mcp.CompleteResult, err error) {
	err = s.request(ctx, "completion/complete", func(ctx context.Context) error {
		res, err = s.cs.Complete(ctx, p)
		return err
	})
	return res, err
}

// Subscribe subscribes the session to updates of a resource; they reach
// the Listener.
func (s *Session) Subscribe(ctx context.Context, uri string) error {
	return s.request(ctx, fmt.Sprintf("resources/subscribe %q", uri), func(ctx context.Context) error {
		return s.cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	})
}

// Unsubscribe ends a subscription.
func (s *Session) Unsubscribe(ctx context.Context, uri string) error {
	return s.request(ctx, fmt.Sprintf("resources/unsubscribe %q", uri), func(ctx context.Context) error {
		return s.cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri})
	})
}

// SetLogLevel sends logging/setLevel, when the server declared logging
// (else it does nothing): the level below which the server sends no
// notifications/message. A 2026-07-28 session has no such method (SEP-2575
// replaced it with the level in each request's _meta, levelMeta): nothing
// is sent there, and its server, which would refuse the request, is not
// asked.
func (s *Session) SetLogLevel(ctx context.Context, level mcp.LoggingLevel) error {
	if res := s.cs.InitializeResult(); res == nil || res.Capabilities == nil || res.Capabilities.Logging == nil || s.newProtocol() {
		return nil
	}
	return s.request(ctx, "logging/setLevel", func(ctx context.Context) error {
		return s.cs.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: level})
	})
}

// Listen sets where what the server sends outside any request in flight
// goes (resource updates, log messages); nil drops it.
func (s *Session) Listen(l wire.Listener) {
	if l == nil {
		s.listener.Store(nil)
		return
	}
	s.listener.Store(&l)
}

func (s *Session) listenerOf() wire.Listener {
	if l := s.listener.Load(); l != nil {
		return *l
	}
	return nil
}

// levelMeta returns meta with the logging level of the client that ctx
// carries, on a 2026-07-28 session (SEP-2575: the level travels with each
// request there, there is no logging/setLevel); nil when nothing is to add.
func (s *Session) levelMeta(ctx context.Context, meta mcp.Meta) mcp.Meta {
	c := wire.CallerFrom(ctx)
	if c == nil || !s.newProtocol() {
		return nil
	}
	level := c.LogLevel()
	if level == "" {
		return nil
	}
	out := mcp.Meta{}
	maps.Copy(out, meta)
	out[mcp.MetaKeyLogLevel] = level
	return out
}

// request runs one upstream request bounded by ctx and the session's life,
// with the caller that ctx carries registered as in flight meanwhile.
func (s *Session) request(ctx context.Context, op string, do func(context.Context) error) error {
	if err := s.Err(); err != nil {
		return err
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	defer s.inFlight(callCtx)()
	callCtx, mark := s.withOrder(callCtx)
	defer mark.done()
	err := do(callCtx)
	if answeredByServer(err) {
		mark.await(callCtx) // its log messages first (order.go)
	}
	if err != nil {
		return s.callErr(op, ctx, err)
	}
	return nil
}

// flight is one request in flight whose downstream client is known.
type flight struct {
	caller wire.Caller
	ctx    context.Context // the request's: bounds what is relayed for it

	mu     sync.Mutex
	ended  bool
	relays int           // server requests being relayed for it
	idle   chan struct{} // closed when relays drops to 0 after the end
}

// relayDrain bounds how long the end of a request waits for the relays it
// cancelled (see inFlight).
const relayDrain = time.Second

// relaysPerRequest bounds the server requests relayed at once for one
// request in flight (docs/contract.md): a server asks its client one thing
// at a time, or a few; one that sent thousands on a call's stream had as
// many questions put to the client at once, each with a goroutine and its
// params (up to a message each) held until the client answered.
const relaysPerRequest = 16

// errTooManyRelays is why a server request past relaysPerRequest is not
// relayed.
var errTooManyRelays = fmt.Errorf("%d requests of the server's are being relayed for this request already (the bound)", relaysPerRequest)

// beginRelay counts a relay for f: errNoCall once f has ended,
// errTooManyRelays past relaysPerRequest.
func (f *flight) beginRelay() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ended {
		return errNoCall
	}
	if f.relays >= relaysPerRequest {
		return errTooManyRelays
	}
	f.relays++
	return nil
}

func (f *flight) endRelay() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.relays--
	if f.relays == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
}

// end marks f over and returns a channel closed once no relay runs.
func (f *flight) end() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ended = true
	ch := make(chan struct{})
	if f.relays == 0 {
		close(ch)
	} else {
		f.idle = ch
	}
	return ch
}

// flights are the session's requests in flight that carry a Caller.
type flights struct {
	mu  sync.Mutex
	seq uint64
	m   map[uint64]*flight
}

// inFlight registers the Caller that ctx carries, if any, until the
// returned function is called. That call ends what is still relayed for
// the request (a sampling request its client has not answered, say) and
// waits, at most relayDrain, for those relays to return: the go-sdk tells
// the client that such a request is cancelled on the request's own stream,
// which closes once the request's answer is written.
func (s *Session) inFlight(ctx context.Context) func() {
	c := wire.CallerFrom(ctx)
	if c == nil {
		return func() {}
	}
	fctx, cancel := context.WithCancel(ctx)
	fl := &flight{caller: c, ctx: fctx}
	f := &s.flights
	f.mu.Lock()
	f.seq++
	id := f.seq
	if f.m == nil {
		f.m = make(map[uint64]*flight)
	}
	f.m[id] = fl
	f.mu.Unlock()
	return func() {
		f.mu.Lock()
		delete(f.m, id)
		f.mu.Unlock()
		cancel()
		s.logs.forget(fl)
		idle := fl.end()
		select {
		case <-idle:
		default:
			t := time.NewTimer(relayDrain)
			defer t.Stop()
			select {
			case <-idle:
			case <-t.C:
			}
		}
	}
}

// errNoCall and errManyClients say why a server's request was not relayed.
var (
	errNoCall      = errors.New("no request of a client is in flight on this connection to relate it to")
	errManyClients = errors.New("requests of several clients are in flight on this connection: tether cannot tell which one it belongs to")
)

// relatedFlight returns the request in flight a server's message belongs
// to: the most recent one, when all of them come from one downstream
// client.
func (s *Session) relatedFlight() (*flight, error) {
	f := &s.flights
	f.mu.Lock()
	defer f.mu.Unlock()
	var last *flight
	var lastID uint64
	for id, fl := range f.m {
		if last != nil && fl.caller.Client() != last.caller.Client() {
			return nil, errManyClients
		}
		if last == nil || id > lastID {
			last, lastID = fl, id
		}
	}
	if last == nil {
		return nil, errNoCall
	}
	return last, nil
}

// relayLog hands a server's log message to the client it belongs to: to
// (a raw call's own stream, read for that call alone), or the client of the
// only one in flight, through that client's queue (logqueue.go: the go-sdk
// hands every notification of the session over on one goroutine, which a
// client that does not read must not hold), else the Listener. The message
// is redacted, and its logger is the connection's name when the server gave
// none.
func (s *Session) relayLog(to wire.Caller, p *mcp.LoggingMessageParams) {
	if p == nil {
		return
	}
	out := *p
	out.Meta = nil
	if out.Logger == "" {
		out.Logger = s.name
	}
	size := int64(len(out.Logger))
	if out.Data != nil {
		if b, err := json.Marshal(out.Data); err == nil {
			size += int64(len(b))
			if red := s.red.String(string(b)); red != string(b) {
				var v any
				if json.Unmarshal([]byte(red), &v) == nil {
					out.Data = v
				} else {
					out.Data = Redacted
				}
			}
		}
	}
	if to != nil {
		to.Log(&out)
		return
	}
	if f, err := s.relatedFlight(); err == nil {
		s.logs.send(f, &out, size)
		return
	}
	if l := s.listenerOf(); l != nil {
		l.Log(&out)
	}
}

// resourceUpdated hands a server's notifications/resources/updated to the
// Listener.
func (s *Session) resourceUpdated(p *mcp.ResourceUpdatedNotificationParams) {
	if p == nil {
		return
	}
	if l := s.listenerOf(); l != nil {
		out := *p
		out.Meta = nil
		l.ResourceUpdated(&out)
	}
}

// Methods of the requests a server sends a client.
const (
	methodCreateMessage = "sampling/createMessage"
	methodElicit        = "elicitation/create"
	methodListRoots     = "roots/list"
)

// relayError is the MCP error a server gets for a request tether does not
// relay: method is the server's request, why the reason.
func (s *Session) relayError(method string, why error) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest,
		Message: fmt.Sprintf("tether (connection %s) cannot relay %s to a client: %v", s.name, method, why)}
}

// declared reports whether the client declared what method needs.
func declared(c wire.Caller, method string) bool {
	caps := c.Capabilities()
	if caps == nil {
		return false
	}
	switch method {
	case methodCreateMessage:
		return caps.Sampling != nil
	case methodElicit:
		return caps.Elicitation != nil
	case methodListRoots:
		return caps.RootsV2 != nil || caps.Roots.ListChanged
	}
	return false
}

// relayTo returns the caller a server's request goes to and the context
// that bounds the wait for its answer: the flight's (its callTimeout, its
// caller's cancellation), also ended by the server's own cancellation (ctx).
// to is the caller when the request arrived on that call's own stream.
func (s *Session) relayTo(ctx context.Context, to *flight, method string) (*flight, context.Context, context.CancelFunc, error) {
	if to == nil {
		var err error
		if to, err = s.relatedFlight(); err != nil {
			s.log.Debug("server request not relayed", "method", method, "reason", err)
			return nil, nil, nil, s.relayError(method, err)
		}
	}
	if !declared(to.caller, method) {
		return nil, nil, nil, s.relayError(method, errors.New("the client that made the request did not declare the capability"))
	}
	if err := to.beginRelay(); err != nil {
		return nil, nil, nil, s.relayError(method, err)
	}
	rctx, cancel := context.WithCancel(to.ctx)
	stop := context.AfterFunc(ctx, cancel)
	// The log messages the server sent its client before the question
	// reach the client first (logqueue.go, flush).
	s.logs.flush(rctx, to)
	if r := progressFrom(to.ctx); r != nil {
		// A server that reports progress and then asks its client
		// something has that progress reach the client first, as it sent
		// them, whichever way the question came (the go-sdk's handlers,
		// a raw call's stream): for a 2026-07-28 client the question is
		// its round's answer, after which that round takes nothing.
		r.flush(rctx)
	}
	return to, rctx, func() { stop(); cancel(); to.endRelay() }, nil
}

// relayRequest relays one server request (method, params as JSON) that
// came on a raw call's stream to the client of to (nil: the related flight)
// and returns the client's answer as JSON. Its errors are what the server
// gets back.
func (s *Session) relayRequest(ctx context.Context, to *flight, method string, params json.RawMessage) (json.RawMessage, error) {
	var res any
	var err error
	switch method {
	case methodCreateMessage:
		res, err = relayDecoded(s, ctx, to, method, params, wire.Caller.CreateMessage)
	case methodElicit:
		res, err = relayDecoded(s, ctx, to, method, params, wire.Caller.Elicit)
	case methodListRoots:
		res, err = relayDecoded(s, ctx, to, method, params, wire.Caller.ListRoots)
	default:
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeMethodNotFound, Message: "method not found"}
	}
	if err != nil {
		return nil, err
	}
	return json.Marshal(res)
}

// relayDecoded is relay for params still as JSON, decoded once the request
// is known to have a client to go to.
func relayDecoded[P, R any](s *Session, ctx context.Context, to *flight, method string, raw json.RawMessage,
	ask func(wire.Caller, context.Context, *P) (R, error)) (R, error) {
	return relay(s, ctx, to, method, raw, func(c wire.Caller, ctx context.Context, raw json.RawMessage) (R, error) {
		var p P
		if err := unmarshalParams(raw, &p); err != nil {
			var zero R
			return zero, err // an InvalidParams error: relayFailed passes it on
		}
		return ask(c, ctx, &p)
	})
}

// relay is the one relay of a server's request to a client, whether it
// came through the go-sdk client's handlers or on a raw call's stream: to
// the client of to (nil: the related flight), bounded as relayTo says,
// with ask the Caller's method for it. Its errors are what the server gets
// back.
func relay[P, R any](s *Session, ctx context.Context, to *flight, method string, p P,
	ask func(wire.Caller, context.Context, P) (R, error)) (R, error) {
	var zero R
	f, rctx, done, err := s.relayTo(ctx, to, method)
	if err != nil {
		return zero, err
	}
	defer done()
	res, err := ask(f.caller, rctx, p)
	if err != nil {
		return zero, s.relayFailed(rctx, method, err)
	}
	return res, nil
}

// relayFailed is the error a server gets when the client did not answer
// its request: the client's own JSON-RPC error as it is, else why.
func (s *Session) relayFailed(rctx context.Context, method string, err error) error {
	var je *jsonrpc.Error
	if errors.As(err, &je) && je.Code != 0 {
		return je
	}
	if rctx.Err() != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInternalError,
			Message: fmt.Sprintf("the client did not answer %s in time (the request it was made for ended)", method)}
	}
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: fmt.Sprintf("relaying %s to the client: %v", method, err)}
}

func unmarshalParams(raw json.RawMessage, v any) error {
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: fmt.Sprintf("invalid params: %v", err)}
	}
	return nil
}

// relayRoots is a receiving middleware of the session's client: the go-sdk
// client answers roots/list from its own (empty) list; tether relays it to
// the client of the request in flight instead.
func (s *Session) relayRoots(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != methodListRoots {
			return next(ctx, method, req)
		}
		var p *mcp.ListRootsParams
		if r, ok := req.(*mcp.ListRootsRequest); ok {
			p = r.Params
		}
		res, err := relay(s, ctx, nil, method, p, wire.Caller.ListRoots)
		if err != nil {
			return nil, err // not a typed nil in the Result
		}
		return res, nil
	}
}

// clientHandlers are the session's go-sdk client handlers for what a server
// sends a client, set in Connect.
func (s *Session) clientHandlers(opts *mcp.ClientOptions) {
	opts.CreateMessageWithToolsHandler = func(ctx context.Context, req *mcp.CreateMessageWithToolsRequest) (*mcp.CreateMessageWithToolsResult, error) {
		return relay(s, ctx, callerFlight(ctx), methodCreateMessage, req.Params, wire.Caller.CreateMessage)
	}
	opts.ElicitationHandler = func(ctx context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		return relay(s, ctx, callerFlight(ctx), methodElicit, req.Params, wire.Caller.Elicit)
	}
	opts.LoggingMessageHandler = func(_ context.Context, req *mcp.LoggingMessageRequest) {
		s.relayLog(nil, req.Params)
	}
	opts.ResourceUpdatedHandler = func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		s.resourceUpdated(req.Params)
	}
	opts.PromptListChangedHandler = func(context.Context, *mcp.PromptListChangedRequest) { s.toolsChangedUpstream() }
	opts.ResourceListChangedHandler = func(context.Context, *mcp.ResourceListChangedRequest) { s.toolsChangedUpstream() }
	// What tether may relay, advertised once for every downstream client:
	// the session is shared, capabilities are fixed at initialize. A
	// request of a capability the calling client did not declare is
	// refused (relayTo).
	opts.Capabilities = &mcp.ClientCapabilities{
		RootsV2:     &mcp.RootCapabilities{},
		Sampling:    &mcp.SamplingCapabilities{},
		Elicitation: &mcp.ElicitationCapabilities{Form: &mcp.FormElicitationCapabilities{}, URL: &mcp.URLElicitationCapabilities{}},
	}
}

// callerFlight is the flight of a request a handler runs for when its ctx
// carries the Caller: on 2026-07-28 sessions the go-sdk fulfils a server's
// input requests inside the call (multi round-trip), with the call's ctx.
func callerFlight(ctx context.Context) *flight {
	if c := wire.CallerFrom(ctx); c != nil {
		return &flight{caller: c, ctx: ctx}
	}
	return nil
}

// listenerBox holds a wire.Listener for atomic replacement.
type listenerBox = atomic.Pointer[wire.Listener]
