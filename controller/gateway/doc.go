// Package gateway is tether's aggregated MCP server: one shared go-sdk
// server that offers a client everything the Connected connections offer,
// and serves it over streamable HTTP (/mcp: the classic protocol's sessions
// and the 2026-07-28 protocol's stateless requests, era.go), the legacy
// HTTP+SSE transport when asked (/sse, sse.go) or stdin/stdout. A client's
// first lists wait for every connection's first outcome (firstanswer.go).
// The rule is
// that a client connected to tether can do everything it could do connected
// to each backend directly.
//
// It owns what is exposed, the routing tables and the collision report. It
// does not connect, health-check or reconnect backends: the reconciler tells
// it what is connected (Set, SetUnavailable, Remove) and hands it live
// sessions as Backend, through which the gateway sees a backend: the union
// of five small interfaces (Offer, ToolCalls, Requests, Subscriptions,
// Relays: its catalog, its calls, its requests); Set reads the catalog, and
// a routing entry keeps only the parts routed requests call; the
// gateway never looks behind it and does not import controller/connection.
// The few types both sides need are in the wire subpackage. It creates no
// Prometheus metrics itself: call outcomes go to Options.ObserveCall.
//
// # What passes through
//
//   - Tools: <toolPrefix>_<tool> after the allow/deny filter, definitions
//     unchanged; tools/call routed to the owner, bounded by callTimeout,
//     cancellation and progress passed both ways. A call takes one road
//     (sendCall, then roundTrip records its outcome, call.go) whichever way
//     its bytes are framed: through the go-sdk, or as bytes where protocol
//     versions match (fastpath.go), and however many rounds it takes a
//     2026-07-28 client (rounds.go).
//   - Prompts: <toolPrefix>_<prompt>; prompts/get routed to the owner.
//   - Resources and templates: URIs unchanged (clients build them from
//     templates); resources/read routed by the exact URI's owner, else the
//     owner of the most specific template that matches it (catalog.go,
//     docs/contract.md §5); a catch-all template is reported;
//     resources/subscribe reaches the owner once per URI (renewed when it
//     reconnects, dropped upstream when the last client unsubscribes) and its
//     notifications/resources/updated reach the subscribed clients; the URIs
//     of one session and the distinct URIs upstream are bounded
//     (subscriptions.go).
//   - completion/complete: routed by the owner of the prompt or template.
//   - Logging: logging/setLevel (or, from a 2026-07-28 client, the level its
//     requests carry) applies to that client's session; every backend is asked
//     for the most verbose level any client wants. A backend's
//     notifications/message reaches the client of the request it was sent
//     during, else every client whose level admits it; its logger is the
//     connection's name when the backend gave none.
//   - list_changed for tools, prompts and resources whenever the exposed set
//     changes; the server declares listChanged for all three, and logging,
//     completions and subscriptions, from the start, also while empty.
//   - Collisions: a tool or prompt name, resource URI or template offered by
//     several connections goes to the one that offered it first (before the
//     first client request, the first by connection name); the others
//     report it through Collisions (prompts as "prompt:<name>", resources as
//     "resource:<uri>", templates as "resourceTemplate:<template>"), and the
//     owner reports it as kept, so status and the collision metric see them.
//     The owner keeps it while it is not available too (SetUnavailable):
//     until Remove, a prefix or filter that no longer exposes it, or its own
//     list without it (docs/contract.md §5).
//   - Names that must not reach agents (control or bidi characters, longer
//     than Options.MaxNameLength) are not exposed, and titles and
//     descriptions lose such characters (names.go).
//
// # Requests a backend sends a client
//
// While it serves a request of the gateway's (tools/call, prompts/get,
// resources/read), a backend may ask its client for sampling/createMessage,
// elicitation/create or roots/list. The gateway puts the client that made the
// request in the request's context (wire.Caller: one implementation for
// both paths, relay.go's caller, which writes through the client's go-sdk
// session or on the fast call's own stream); the backend session relays
// what its server asks to that client and the answer back. The session can
// tell which request a server's message belongs to when it comes on that
// request's own HTTP stream; otherwise, when every request in flight on the
// session comes from one client, it is that client's. With requests of
// several clients in flight, or none, the backend gets an MCP error instead
// of a guess (so does a backend of a client that never answers, once the
// call's callTimeout expires). A client of the 2026-07-28 protocol takes no
// requests from its server: for it, a backend's question ends the client's
// tools/call with an input-required result, and the client's retry with the
// gateway's requestState hands the answer to the backend call, which waits
// meanwhile (rounds.go).
//
// Capabilities. A backend session is shared by every client, and the
// classic protocol fixes a client's capabilities at initialize, so tether
// cannot advertise to a backend exactly what each client declared. It
// advertises what it can relay (roots, sampling, elicitation in form and
// url modes) once, and relays a request only to a client that declared the
// capability it needs; for a client that did not, the backend gets an MCP
// error naming the missing capability, never a made-up answer. A backend
// of the 2026-07-28 protocol takes the calling client's logging level with
// each request.
package gateway
