package connection

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// Tools returns the server's full tool list. The slice and the tools are
// shared: read them, never modify them.
func (s *Session) Tools() []*mcp.Tool {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	return s.tools
}

// RefreshTools lists the server's tools again (following cursors) and
// replaces the snapshot. It does not call OnToolsChanged. On 2026-07-28
// sessions the go-sdk may answer from its TTL cache, which a list_changed
// notification invalidates.
func (s *Session) RefreshTools(ctx context.Context) error {
	_, err := s.refreshTools(ctx)
	return err
}

func (s *Session) refreshTools(ctx context.Context) (changed bool, err error) {
	if err := s.Err(); err != nil {
		return false, err
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	tools, err := s.listToolsRaw(callCtx)
	if err != nil {
		return false, s.callErr("tools/list", ctx, err)
	}
	sum, bindsHeaders, err := s.conn.tools.digest(tools)
	if err != nil {
		return false, s.red.Err(fmt.Errorf("tools/list: %w", err))
	}
	if tools == nil || bindsHeaders {
		// Parameters bound to HTTP headers (2026-07-28): the go-sdk
		// validates them and keeps the list for CallTool, which sets the
		// headers from it. So list through the go-sdk, when what it holds
		// is not this very list (sdkTools).
		gen := s.sdkToolsCleared.Load()
		rawSum, rawListed := sum, tools != nil
		s.toolsMu.Lock()
		held := s.sdkTools
		s.toolsMu.Unlock()
		fresh := !rawListed || !s.newProtocol() || !held.listed || held.gen != gen
		switch {
		case !fresh && rawSum == held.rawSum:
			return false, nil // the go-sdk holds these tools, as the session does
		case !fresh && held.piled >= s.limit.max:
			// Kept, not failed: the refresh goes on to the catalog. One
			// WARN until the go-sdk clears its pages.
			level := slog.LevelDebug
			s.toolsMu.Lock()
			if !s.sdkTools.warned {
				s.sdkTools.warned, level = true, slog.LevelWarn
			}
			s.toolsMu.Unlock()
			s.log.Log(ctx, level, "tools not refreshed", "error", s.red.Err(&toolsChangedSilentlyError{Held: held.piled, Limit: s.limit.max}))
			return false, nil
		}
		sent := s.sdkToolsSent.Load()
		var fetched int64 // of the pages the go-sdk asked the server for, and keeps (listPages sized them)
		tools, err = listPages(callCtx, maxCatalogItems, s.limit.max, func(ctx context.Context, cursor string) ([]*mcp.Tool, string, int, error) {
			before := s.sdkToolsSent.Load()
			r, err := s.cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
			if err != nil {
				return nil, "", 0, err
			}
			size := listBytes(r.Tools, r.NextCursor, s.limit.max)
			if s.sdkToolsSent.Load() != before {
				fetched += size
			}
			return r.Tools, r.NextCursor, int(size), nil
		})
		if err != nil {
			// The go-sdk's client keeps the pages it was handed before the
			// list failed (past the bound, say), under cursors a server may
			// make fresh each time: they count toward what it holds, and
			// the next refresh lists through it again only while that
			// stays under the bound (rawSum, none, is no list's).
			failed := sdkTools{listed: true, gen: gen, piled: fetched}
			if !fresh {
				failed.piled, failed.warned = held.piled+fetched, held.warned
			}
			s.toolsMu.Lock()
			s.sdkTools = failed
			s.toolsMu.Unlock()
			return false, s.callErr("tools/list", ctx, err)
		}
		if sum, _, err = s.conn.tools.digest(tools); err != nil {
			return false, s.red.Err(fmt.Errorf("tools/list: %w", err))
		}
		if !rawListed {
			rawSum = sum // listed through the go-sdk only: its list stands for the raw one
		}
		next := sdkTools{listed: true, gen: gen, rawSum: rawSum, piled: fetched}
		switch {
		case fresh:
		case s.sdkToolsSent.Load() == sent:
			// The go-sdk answered from its store (a list the server
			// marked cacheable, ttlMs), which holds nothing more. Unless
			// that is the list the server sends now, it is not held: the
			// next refresh lists through it again, until it asks the
			// server.
			next = held
			if sum == rawSum {
				next.rawSum = rawSum
			}
		default:
			next.piled += held.piled
		}
		s.toolsMu.Lock()
		s.sdkTools = next
		// The go-sdk holds the tools again: the calls that wait for them
		// go now, not once the refresh has listed the catalog too.
		s.wakeHeaderCallsLocked()
		s.toolsMu.Unlock()
	}
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	changed = sum != s.toolsSum
	s.tools, s.toolsSum = tools, sum
	return changed, nil
}

// headerToolsWait bounds how long a call of a tool bound to headers waits
// for the tools to be listed again after tools/list_changed
// (awaitToolHeaders), as levelWait bounds the wait for a logging level.
const headerToolsWait = time.Second

// awaitToolHeaders holds a call of the tool name while the go-sdk's client
// holds no tools because the server sent tools/list_changed and the
// refresh has not listed them through it yet, when the tool binds
// parameters to headers (x-mcp-header) in the list the session had. The
// go-sdk sets a call's Mcp-Param-* headers from the tools it holds (it
// takes no definition from its caller), so in that moment the call went
// without them and the server refused it. The protocol has a client send
// headers from a schema it holds and, when its schema is stale, obtain the
// current one first (docs/contract.md §5a): after list_changed the session's
// is stale, so the call waits for the refresh, at most headerToolsWait
// (and its own deadline); past that it goes as the go-sdk sends it. It
// reports false when the bound or ctx ended the wait, true when nothing
// was (or is any more) to wait for.
func (s *Session) awaitToolHeaders(ctx context.Context, name string) bool {
	if !s.newProtocol() {
		return true // the go-sdk sets such headers on 2026-07-28 sessions only
	}
	var bound <-chan time.Time
	for {
		// The wake is taken before the refresh is looked at: a refresh
		// that ends after the look closes it (wakeHeaderCalls), one that
		// ended before is seen not due. Looked at first, a refresh that
		// ended between the look and the wait woke nobody, and the call
		// waited its whole bound.
		s.toolsMu.Lock()
		if !s.headersStaleLocked(name, true) {
			s.toolsMu.Unlock()
			return true
		}
		if s.sdkToolsWake == nil {
			s.sdkToolsWake = make(chan struct{})
		}
		wake := s.sdkToolsWake
		s.toolsMu.Unlock()
		due := s.refreshDue()
		s.toolsMu.Lock()
		stale := s.headersStaleLocked(name, due)
		s.toolsMu.Unlock()
		if !stale {
			return true
		}
		if bound == nil {
			t := time.NewTimer(headerToolsWait)
			defer t.Stop()
			bound = t.C
		}
		select {
		case <-wake:
		case <-bound:
			return false
		case <-ctx.Done():
			return false
		}
	}
}

// headersStaleLocked reports whether a call of the tool name would go
// without its headers now, and a listing that ends that is to come: the
// tool binds parameters to headers, and the go-sdk is clearing the tools it
// held, or has cleared them since they were last listed through it while a
// refresh is due or running (due). Once a refresh failed, none is to come
// until the next notification, and calls do not wait for one. The caller
// holds toolsMu.
func (s *Session) headersStaleLocked(name string, due bool) bool {
	held := s.sdkTools
	if !held.listed || !s.newProtocol() {
		return false
	}
	cleared := s.sdkToolsCleared.Load()
	clearing := s.sdkToolsClearing.Load() != cleared
	if !clearing && (held.gen == cleared || !due) {
		return false
	}
	return bindsHeaders(s.tools, name)
}

// refreshDue reports whether a refresh of the lists is due or running.
func (s *Session) refreshDue() bool {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	return s.refreshing
}

// wakeHeaderCalls wakes the calls awaitToolHeaders holds, to look again:
// the refreshes due ended.
func (s *Session) wakeHeaderCalls() {
	s.toolsMu.Lock()
	defer s.toolsMu.Unlock()
	s.wakeHeaderCallsLocked()
}

// wakeHeaderCallsLocked is wakeHeaderCalls with toolsMu held.
func (s *Session) wakeHeaderCallsLocked() {
	if s.sdkToolsWake != nil {
		close(s.sdkToolsWake)
		s.sdkToolsWake = nil
	}
}

// bindsHeaders reports whether the tool name of tools binds parameters to
// headers.
func bindsHeaders(tools []*mcp.Tool, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			b, err := json.Marshal(t.InputSchema)
			return err == nil && bytes.Contains(b, []byte(`"x-mcp-header"`))
		}
	}
	return false
}

// countToolsClearing is a receiving middleware of the session's client: it
// counts a tools/list_changed before the go-sdk clears the tools it holds
// (sdkToolsCleared counts it after, in the handler the go-sdk calls then),
// so that a call never finds the tools cleared and not yet counted.
func (s *Session) countToolsClearing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == "notifications/tools/list_changed" {
			s.sdkToolsClearing.Add(1)
		}
		return next(ctx, method, req)
	}
}

// sdkTools is what the go-sdk's client holds of the tools refreshTools
// listed through it (guarded by toolsMu). On a 2026-07-28 session that
// client keeps every page of tools/list it is handed, keyed by cursor,
// until notifications/tools/list_changed clears them all (and CallTool
// looks tools up among them all). Any list_changed refreshes the tools, so
// listing them through the go-sdk every time would pile up a list's pages
// each refresh (those of a server that gives fresh cursors) for the
// session's life. The tools are listed through it again only after a
// tools/list_changed (the go-sdk cleared its pages: gen moved) or when the
// list changed without one, and the latter only while what piled up since
// the last clear stays under the bound on one list (docs/contract.md §5a).
type sdkTools struct {
	listed bool
	gen    uint64            // sdkToolsCleared when listed
	rawSum [sha256.Size]byte // the list as listed beneath the go-sdk then
	piled  int64             // bytes listed through the go-sdk since it last cleared them
	warned bool              // that piled passed the bound
}

// toolsChangedSilentlyError says why a refresh did not list tools bound to
// headers through the go-sdk once more: its client already holds Held
// bytes of them since the server's last tools/list_changed.
type toolsChangedSilentlyError struct {
	Held, Limit int64
}

func (e *toolsChangedSilentlyError) Error() string {
	return fmt.Sprintf("tools that bind parameters to headers changed again without notifications/tools/list_changed, and the go-sdk client already holds %d bytes of their lists (at most %d, the bound set by %s): the session keeps the tools it had until the server sends tools/list_changed", e.Held, e.Limit, MaxMessageFlag)
}

// digest replaces each tool by the definition already held for its
// JSON (see internTable), and returns the SHA-256 of the list (a real change
// or a repeated notification) and whether a tool binds parameters to headers.
func (it *internTable) digest(tools []*mcp.Tool) (sum [sha256.Size]byte, bindsHeaders bool, err error) {
	h := sha256.New()
	for i, t := range tools {
		b, err := json.Marshal(t)
		if err != nil {
			return sum, false, err
		}
		ts := sha256.Sum256(b)
		h.Write(ts[:])
		tools[i] = it.intern(ts, t)
		bindsHeaders = bindsHeaders || bytes.Contains(b, []byte(`"x-mcp-header"`))
	}
	h.Sum(sum[:0])
	return sum, bindsHeaders, nil
}

// maxListPages bounds the pages of one list: a server whose cursors never
// end must not hold a connect or refresh forever.
const maxListPages = 1000

// listToolsRaw lists every tool beneath the go-sdk's client: as bytes
// beside it where the session can carry raw lists (rawPage), else through
// its sending handler beneath its list cache. The go-sdk's ListTools
// re-decodes each tool's schema to validate x-mcp-header annotations (a
// fresh 32 KiB decode buffer per tool), which at 1,000 connections was a
// sixth of everything tether allocated while starting; refreshTools lists
// through the go-sdk when a tool has such annotations. It returns nil, nil
// when it cannot list this way (no request _meta captured yet on a
// 2026-07-28 session).
func (s *Session) listToolsRaw(ctx context.Context) ([]*mcp.Tool, error) {
	page := rawPage[mcp.Tool](s, "tools/list", "tools")
	if _, raw := s.RawProtocolVersion(); !raw {
		meta, ok := s.requestMeta()
		if !ok || s.rawSend == nil {
			return nil, nil
		}
		page = func(ctx context.Context, cursor string) ([]*mcp.Tool, string, int, error) {
			p := &mcp.ListToolsParams{Cursor: cursor}
			if meta != nil {
				p.Meta = maps.Clone(meta)
			}
			lr, err := sendBeneath[*mcp.ListToolsParams, *mcp.ListToolsResult](ctx, s, "tools/list", p)
			if err != nil {
				return nil, "", 0, err
			}
			if lr == nil {
				return nil, "", 0, fmt.Errorf("unexpected result %T", lr)
			}
			return lr.Tools, lr.NextCursor, sizeUnread, nil
		}
	}
	tools, err := listPages(ctx, maxCatalogItems, s.limit.max, page)
	if tools == nil && err == nil {
		tools = []*mcp.Tool{}
	}
	return tools, err
}

// listPages lists every entry of a list, one page a request (page),
// following cursors: at most maxListPages pages, maxItems entries (0: no
// bound) and maxBytes bytes, the pages together (0: no bound). A null entry
// is no entry, as the go-sdk's ListTools has it, for every list and
// whichever way it is sent.
//
// page returns the entries, the next cursor and the page's size as read
// (rawPage: the result's bytes), or sizeUnread where the go-sdk read and
// decoded the page and tether never saw its bytes: that page is sized as its
// entries and cursor encode (listBytes). The byte bound is the message
// bound (docs/contract.md §5a): a server that pages its list holds tether
// to no more than one that sends it whole in one message, where 1,000 pages
// of a message each would be 16 GiB.
func listPages[E any](ctx context.Context, maxItems int, maxBytes int64, page func(ctx context.Context, cursor string) (items []*E, next string, size int, err error)) ([]*E, error) {
	var out []*E
	var total int64
	cursor := ""
	for range maxListPages {
		items, next, size, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if it == nil {
				continue
			}
			if maxItems > 0 && len(out) >= maxItems {
				return nil, fmt.Errorf("more than %d entries", maxItems)
			}
			out = append(out, it)
		}
		if maxBytes > 0 {
			if size == sizeUnread {
				total += listBytes(items, next, maxBytes-total)
			} else {
				total += int64(size)
			}
			if total > maxBytes {
				return nil, &listTooLargeError{Limit: maxBytes}
			}
		}
		if next == "" {
			return out, nil
		}
		cursor = next
	}
	return nil, fmt.Errorf("more than %d pages", maxListPages)
}

// sizeUnread is the size a page function returns for a page the go-sdk
// read and decoded (listPages sizes it).
const sizeUnread = -1

// listTooLargeError is the error of a list whose pages together passed the
// bound on one list (docs/contract.md §5a, "One list from a server").
type listTooLargeError struct {
	Limit int64
}

func (e *listTooLargeError) Error() string {
	return fmt.Sprintf("more than %d bytes in one list, its pages together (the bound set by %s)", e.Limit, MaxMessageFlag)
}

// listBytes is the size of a page the go-sdk decoded: its entries as JSON
// (without HTML escaping, which would make a '<' six bytes; a null entry
// five bytes) and its cursor. It stops counting once the page passes
// budget, so a page that alone passes the bound costs no more encoding
// than the bound. Re-encoding
// rather than reading: the go-sdk reads each message inside its transport
// (stdio, SSE, containers, its streamable client), where tether sees no
// message's bytes. What it counts is what tether holds: the entries as the
// go-sdk decoded them, less what it dropped (unknown fields, whitespace).
func listBytes[E any](items []*E, next string, budget int64) int64 {
	c := &byteCounter{n: int64(len(next))}
	enc := json.NewEncoder(c)
	enc.SetEscapeHTML(false)
	for _, it := range items {
		if c.n > budget {
			break
		}
		if it == nil {
			// As read ("null,"): no entry, but bytes the server sent and
			// the go-sdk kept a slot for.
			c.n += int64(len("null,"))
			continue
		}
		// The go-sdk decoded it from JSON, so it encodes; an entry that
		// did not would write nothing and count as nothing.
		_ = enc.Encode(it)
	}
	return c.n
}

// byteCounter counts what is written to it.
type byteCounter struct{ n int64 }

func (c *byteCounter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// rawPage is the page of a list method sent as bytes beside the go-sdk
// (rawList), decoded with encoding/json: through the go-sdk, each of the
// connect's four lists decoded three messages with a fresh 32 KiB buffer
// each, most of what tether allocated while 1,000 connections started. key
// is the result's field that holds the entries. Use it where
// RawProtocolVersion is ok.
func rawPage[E any](s *Session, method, key string) func(ctx context.Context, cursor string) ([]*E, string, int, error) {
	return func(ctx context.Context, cursor string) ([]*E, string, int, error) {
		res, err := s.rawList(ctx, method, cursor)
		if err != nil {
			return nil, "", 0, err
		}
		var page map[string]json.RawMessage
		var items []*E
		if err := json.Unmarshal(res, &page); err != nil {
			return nil, "", 0, fmt.Errorf("invalid result: %w", err)
		}
		if raw := page[key]; raw != nil {
			if err := json.Unmarshal(raw, &items); err != nil {
				return nil, "", 0, fmt.Errorf("invalid result: %s: %w", key, err)
			}
		}
		next := ""
		if raw := page["nextCursor"]; raw != nil {
			if err := json.Unmarshal(raw, &next); err != nil {
				return nil, "", 0, fmt.Errorf("invalid result: nextCursor: %w", err)
			}
		}
		return items, next, len(res), nil
	}
}

// requestMeta is the _meta of a request sent beneath the go-sdk's client:
// none on classic sessions; on 2026-07-28 ones the per-request triple
// (SEP-2575) the go-sdk put on its own first request, with the negotiated
// version. ok is false when no such request was seen yet.
func (s *Session) requestMeta() (meta mcp.Meta, ok bool) {
	if !s.newProtocol() {
		return nil, true
	}
	m := s.listMeta.Load()
	if m == nil {
		return nil, false
	}
	meta = maps.Clone(*m)
	meta[mcp.MetaKeyProtocolVersion] = s.cs.InitializeResult().ProtocolVersion
	return meta, true
}

// Probe sends one health probe: ping on classic sessions, tools/list on
// 2026-07-28 ones (no ping there), past the go-sdk's list cache. The caller
// bounds it with ctx; without a deadline, spec.DefaultHealthTimeout applies.
// An answer that refuses the request (method not found, invalid params or
// request) proves the server alive too and counts as success, and so does
// a timeout while the server answered other requests of tether's or sent
// progress for one that waits (liveness.go).
func (s *Session) Probe(ctx context.Context) error {
	if err := s.Err(); err != nil {
		return err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, spec.DefaultHealthTimeout)
		defer cancel()
	}
	callCtx, cancel := s.callContext(ctx)
	defer cancel()
	start := time.Now()
	method := "ping"
	var err error
	if s.newProtocol() {
		method = "tools/list"
		err = s.listToolsUncached(callCtx)
	} else if raw, rerr := s.pingRaw(callCtx); raw {
		err = rerr
	} else {
		err = s.cs.Ping(callCtx, nil)
	}
	if wire := serverRefused(err); wire != nil {
		s.log.Debug("probe answered with an error: server alive", "method", method, "code", wire.Code, "error", wire.Message)
		return nil
	}
	if err != nil && ctx.Err() != nil && s.Err() == nil && s.seen.since(start) {
		// Timed out, but the server sent other answers, or progress for a
		// call that waits (while its last answer is within callTimeout),
		// meanwhile: the probe waited in line behind work, the server is
		// alive.
		s.log.Debug("probe timed out behind other traffic: server alive", "method", method)
		return nil
	}
	if err != nil {
		return s.callErr("probe ("+method+")", ctx, err)
	}
	return nil
}

// serverRefused returns the server's JSON-RPC error if err is one that only
// a live server sends back (it read the request and refused it), else nil.
// Only the standard codes of a request the server read and refused count:
// an HTTP server that answers 400 with a JSON-RPC body is alive, but so is
// one whose proxy says 400, and a -32000 may be the server's own "I am
// broken".
func serverRefused(err error) *jsonrpc.Error {
	wire := findServerError(err)
	if wire == nil {
		return nil
	}
	switch wire.Code {
	case jsonrpc.CodeMethodNotFound, jsonrpc.CodeInvalidParams, jsonrpc.CodeInvalidRequest:
		return wire
	}
	return nil
}

// listToolsUncached sends tools/list through the go-sdk's own handler,
// beneath its TTL cache, so that the request reaches the server.
func (s *Session) listToolsUncached(ctx context.Context) error {
	meta, ok := s.requestMeta()
	if !ok || s.rawSend == nil {
		_, err := s.cs.ListTools(ctx, nil)
		return err
	}
	params := &mcp.ListToolsParams{Meta: meta}
	_, err := s.rawSend(ctx, "tools/list", &mcp.ClientRequest[*mcp.ListToolsParams]{Session: s.cs, Params: params})
	return err
}

// toolsChangedUpstream is the list_changed handler. It runs on the
// session's reader, so it only starts (or marks for another round) the
// goroutine that refreshes the list.
func (s *Session) toolsChangedUpstream() {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	if s.refreshing {
		s.refreshMore = true
		return
	}
	s.refreshing = true
	s.startRefreshLocked()
}

// goLive lets refreshes start, one at once if a list_changed came in while
// Connect listed the tools itself.
func (s *Session) goLive() {
	s.refreshMu.Lock()
	s.live = true
	s.startRefreshLocked()
	if s.connGone {
		// Tether's own transport closed before the session was live.
		s.endSoonLocked(s.connEnded())
	}
	s.refreshMu.Unlock()
	// A message over the limit that limitHit saw before the session was
	// live (on the standalone stream, which no request waits on).
	if err := s.limit.err(); err != nil {
		s.transportDied(err)
	}
}

// startRefreshLocked starts the refresh goroutine when one is due and the
// session is live and not ended. The wait group is added to under
// refreshMu, which end takes before Close waits: no Add races that Wait.
func (s *Session) startRefreshLocked() {
	if !s.refreshing || !s.live || s.ended {
		return
	}
	s.wg.Add(1)
	go s.refreshAfterListChanged()
}

// refreshAfterListChanged refreshes the tool list after list_changed, coalescing
// bursts, and tells OnToolsChanged when the list really changed. It runs
// again while notifications keep coming, then exits.
func (s *Session) refreshAfterListChanged() {
	defer s.wg.Done()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(refreshCoalesce):
		}
		s.refreshMu.Lock()
		s.refreshMore = false
		s.refreshMu.Unlock()

		ctx, cancel := context.WithTimeout(s.ctx, refreshTimeout)
		changed, err := s.refreshTools(ctx)
		if err == nil {
			var more bool
			more, err = s.refreshCatalog(ctx)
			changed = changed || more
		}
		cancel()
		// The tools, listed before the catalog, are replaced even when a
		// catalog list then fails (that one keeps what the session had):
		// a change is news either way, or the gateway would serve the old
		// tools until something else moved. Told before the log line, which
		// tests wait for.
		if changed && s.onToolsChanged != nil {
			s.onToolsChanged()
		}
		switch {
		case err != nil:
			if s.ctx.Err() == nil {
				s.log.Warn("refreshing tools after list_changed", "error", err)
			}
		default:
			s.log.Debug("tools refreshed after list_changed", "tools", len(s.Tools()), "changed", changed)
		}

		s.refreshMu.Lock()
		if !s.refreshMore || s.ended {
			s.refreshing = false
			s.refreshMu.Unlock()
			s.wakeHeaderCalls() // no refresh to wait for any more
			return
		}
		s.refreshMu.Unlock()
	}
}

// together runs fs at once and waits for them all. It returns the first
// error in time; once one fails, the ctx the others run with is cancelled,
// so that they end soon and their echoes of that cancellation are not the
// error reported.
func together(ctx context.Context, fs ...func(context.Context) error) error {
	if len(fs) == 1 {
		return fs[0](ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, f := range fs {
		wg.Go(func() {
			if err := f(ctx); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		})
	}
	wg.Wait()
	return first
}
