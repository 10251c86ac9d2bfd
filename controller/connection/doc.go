// Package connection is the client side of one MCP connection: it opens a
// go-sdk session over stdio, streamable HTTP or SSE, probes it, calls tools
// through it and closes it gracefully. The reconciler (package controller)
// decides when to connect, probe, reconnect and close; the gateway calls tools
// through a Session. This package keeps no table of sessions and never
// retries: one Connect is one attempt.
//
// # What sessions share
//
// Sessions share only what a [Connector] holds: per HTTP endpoint, the gate
// of handshakes in flight and the memory of the protocol version it agreed
// to; the HTTP transport (one connection pool); the table of tool
// definitions; the ledger of process groups. The daemon makes one Connector
// and opens every session through it; the package-level [Connect] gives the
// session a Connector of its own. There is no other process-wide state but
// the id counter of raw requests (rawSeq: ids only need to be unique) and a
// sync.Pool of event-stream readers and their buffers (streamPool: a cache,
// not state).
//
// # Secrets
//
// Every env value and header value of the manifest (plain value,
// valueFrom.file, valueFrom.env) is resolved at each Connect, so a rotated
// secret file is used on the next connect. A file's trailing newline is
// dropped; an unset or empty valueFrom.env is an error (Request.Environ
// cannot tell the two apart). Every resolved value of at least [MinRedactLen] bytes is replaced by
// [Redacted] in everything this package shows: error messages (including the
// errors a server sends back and the text of tool results marked isError),
// progress messages, the child's stderr tail and the session's logs. For
// header values of the form "<scheme> <token>" (Authorization) the token
// alone is redacted too, and so is every value's JSON-escaped, base64
// (standard and URL, padded and raw) and URL-escaped (query, path) form.
// Each line of a multi-line value (a key file) of at least
// [MinLineRedactLen] bytes is redacted on its own as well, in the same
// forms: stderr reaches the tail line by line.
// Errors keep their cause for errors.Is/As (do not print an unwrapped cause
// yourself). To forward a server's JSON-RPC error, use [ServerError]: it
// returns a redacted copy, and nil for the go-sdk's local failures, which
// errors.As(err, **jsonrpc.Error) would also find (a refused connection is
// a *jsonrpc.Error with code -32005).
//
// # What a session offers the gateway
//
// Besides tools, a session lists the server's prompts, resources and
// resource templates at connect and again after any of its list_changed
// notifications (Request.OnToolsChanged then means "the catalog changed"),
// and sends prompts/get, resources/read, completion/complete,
// subscriptions and logging/setLevel upstream. Every session advertises
// roots, sampling and elicitation: the gateway may relay them. A server's
// sampling, elicitation or roots request is relayed to the downstream
// client of the request in flight it belongs to (wire.Caller, carried in the
// request's context): exactly when it came on a raw call's own stream, else
// when all requests in flight carry callers of one client; otherwise the
// server gets an MCP error that says why. When the request ends, what is
// still relayed for it is cancelled, and the request returns once those
// relays have (at most 1 s: see Session.inFlight), so that the client hears
// of the cancellation before the request's answer closes its stream. Log
// messages follow the same rule as relays, and go to the session's
// wire.Listener when no client can be told; so do resource updates.
//
// # Stdio children
//
// A relative command without a slash is looked up in the PATH the child will
// get; one with a slash is resolved against the manifest file's directory;
// both are checked at connect time. A relative workingDir is resolved against
// the manifest's directory; an empty one means tether's own working directory.
//
// The child's environment is exactly the base variables PATH, HOME, USER,
// LOGNAME, LANG, LC_ALL, LC_CTYPE, TZ and TMPDIR (those that are set in
// tether's environment), then the manifest's env entries, which override the
// base. Nothing else of tether's environment leaks to a server.
//
// Each child runs in its own process group. On Linux it also gets
// PR_SET_PDEATHSIG=SIGKILL, so it dies with tether even when tether is killed
// with SIGKILL. The kernel sends that signal when the OS *thread* that forked
// the child exits, and Go may retire threads (a goroutine that exits while
// locked to its thread takes the thread with it), so each child is started
// from a goroutine locked to its thread that stays locked until it has reaped
// the child (see golang/go#27505). The death signal reaches the direct child
// only: a wrapper that forks (rather than execs) its server leaves a
// grandchild that only a process-group kill by a living tether reaches.
//
// stderr is always drained into a bounded tail (the last [TailLines] lines of
// at most [MaxLineBytes] bytes each), so a child that floods stderr never
// blocks. A graceful stop closes stdin, waits, sends SIGTERM to the whole
// process group, waits, then SIGKILL (bounded by [StopTimeout] in total); it
// also kills whatever is left of the group when the direct child already
// exited, e.g. a grandchild of a wrapper that still holds the pipes.
//
// # HTTP
//
// Streamable HTTP and SSE sessions share one http.Transport (one connection
// pool for all sessions); each adds its manifest headers through its own
// RoundTripper. An event stream asked for with a plain-HTTP GET (a
// session's standalone or SSE stream, a call's stream resumed with
// Last-Event-ID) rides a TCP connection of its own instead, closed with its
// body (eventStreams, streams.go). A streamable session of a classic
// protocol runs on tether's own mcp.Transport (streamable.go), which frames
// the go-sdk session as the go-sdk's does without its per-message decoding,
// and whose Close ends the session: from the first connect to an endpoint
// on, whose server/discover a classic server refuses before the go-sdk
// falls back to initialize on the same connection. A server that accepts
// discover (2026-07-28) is connected again at once on the go-sdk's
// transport (one more round trip, for the first connect to such an
// endpoint in versionMemoTTL; the memory sends the next ones there
// directly). OAuth sessions keep the go-sdk's transport (it runs the
// authorization flow on a 401 or 403 and puts the token on each request),
// SSE ones too (another protocol), and container servers reached by port
// (a few per host, watched with their runtime's process by watch). The go-sdk notices a dead HTTP server late or never (a
// measured ~22 s for a stateful session, never for a stateless one): Done closes only when the transport reports the session gone
// (an SSE stream that ended, a server that forgot the session after a
// restart) or on Close; the reconciler's probes find the rest. A request
// the server answers as a session it does not know (404, also with the
// TypeScript SDK's JSON-RPC body, or a 400 about the session, as that SDK's
// example and the Python SDK answer) ends the session at once: see
// forgottenSession. A call that may have reached the server (its request
// was written in full and not refused as of the lost session) then fails
// with an error that is not mcp.ErrSessionMissing (reachedError): the
// gateway sends again only calls that never reached it.
// Close sends
// the session DELETE, which the go-sdk bounds at 5 s against a hung server.
//
// # What a server sends is bounded
//
// One message a server sends is bounded by Request.MaxMessageBytes
// ([DefaultMaxMessageBytes]; tether run --max-message-bytes): a stdio frame
// (the go-sdk's MaxLineLength), an HTTP response body, one server-sent
// event (the session's RoundTripper wraps every body: the go-sdk's clients
// and the raw path read through it). Over it, the read fails with a
// [MessageTooLargeError] (naming the connection, the bound and the flag),
// and so does every later read of that body; the call fails with it and the
// session ends with it (limit.go). One list a server pages (tools, prompts,
// resources, templates) is held to the same number of bytes, its pages
// together, and to 1,000 pages and 100,000 entries (listPages,
// docs/contract.md §5a): past one, the connect or the refresh fails.
//
// # Health probe
//
// The go-sdk v1.8.0 first offers protocol 2026-07-28 (server/discover) and
// falls back to initialize at 2025-11-25. The classic protocol has ping; the
// 2026-07-28 protocol removed it (a go-sdk stateless HTTP server answers
// 400), so [Session.Probe] pings on classic sessions and sends tools/list on
// 2026-07-28 ones, bypassing the go-sdk's client-side TTL cache of list
// results so that every probe reaches the server. A server that answers
// "method not found" (or invalid params/request) is alive: that counts as
// success. A probe that times out counts as success only when the server
// answered another request meanwhile (liveness.go): notifications, the
// server's own requests and bytes prove nothing. Beware that the go-sdk reports local transport failures as
// *jsonrpc.Error as well (-32005 "rejected by transport" for connection
// refused), so the error type alone proves nothing.
package connection
