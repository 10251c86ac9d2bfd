// Package bridge carries one MCP client's stdio session to the owner of a
// directory over its control socket (docs/contract.md, "Bridges"): bytes
// unchanged, one JSON-RPC message a line, so the client negotiates with the
// owner's gateway exactly as with a tether of its own. When the owner goes,
// the bridge answers the client's requests in flight with an error, holds
// what the client sends meanwhile, connects again (to the bridge that took
// over, or to the restarted daemon), replays the client's initialize and
// tells the client that its lists changed.
//
// It reads only each message's envelope (id, method); it links no MCP SDK.
package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"time"
)

// MaxLine bounds one message from either side, as the gateway's own stdio
// framing does (the go-sdk's DefaultMaxLineLength).
const MaxLine = 16 << 20

// MaxHeld and MaxHeldBytes bound what the client may send while no owner
// answers (messages, and their bytes: 256 messages of MaxLine would be
// 4 GiB): past either a request is answered with an error at once.
const (
	MaxHeld      = 256
	MaxHeldBytes = 2 * MaxLine
)

// LostCode is the JSON-RPC error code of a request that was in flight when
// the owner went, or that found no owner within the wait.
const LostCode = -32603

// Options configure a bridge.
type Options struct {
	// Dial opens a session with the directory's owner.
	Dial func(ctx context.Context) (io.ReadWriteCloser, error)
	// In and Out are the client's side (stdin and stdout).
	In  io.Reader
	Out io.Writer
	// Wait bounds how long the bridge looks for an owner, at start and
	// after losing one; past it, Run answers what it holds with an error
	// and returns ErrNoOwner.
	Wait time.Duration
	// Lost, when set, is called each time the session with the owner ends
	// while the client is still there.
	Lost func()
	Log  *slog.Logger
}

// ErrNoOwner is Run's error when no owner answered within Options.Wait.
var ErrNoOwner = errors.New("no owner answered")

// envelope is what the bridge reads of a message.
type envelope struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		RequestID json.RawMessage `json:"requestId"` // notifications/cancelled
		URI       string          `json:"uri"`       // resources/(un)subscribe
	} `json:"params"`
}

func (e envelope) isRequest() bool  { return e.Method != "" && len(e.ID) > 0 && string(e.ID) != "null" }
func (e envelope) isResponse() bool { return e.Method == "" && len(e.ID) > 0 }

// replayID marks the bridge's own replayed initialize: its answer is the
// bridge's, not the client's.
const replayID = `"tether-bridge-replay"`

type bridge struct {
	opts Options
	log  *slog.Logger

	initialize  []byte // the client's initialize request, as sent
	initialized []byte // its notifications/initialized
	// inFlight are the client's requests the owner has not answered: each
	// id as the client wrote it, by idKey (only the id is kept).
	inFlight map[string]json.RawMessage
	// listens are the client's subscriptions/listen requests (2026-07-28),
	// by idKey: the stream a modern client's notifications come on. Open
	// until the server ends them, they are sent again to the next owner
	// rather than answered with an error.
	listens map[string][]byte
	// setLevel and subscribes are a 2025 client's session state the owner
	// keeps: its last logging/setLevel and its resources/subscribe by URI,
	// replayed after initialize; replays are the ids of those replays,
	// whose answers are the bridge's.
	setLevel   []byte
	subscribes map[string][]byte
	replays    map[string]bool
	held       [][]byte // what the client sent while no owner answered
	heldBytes  int      // their bytes
}

// listenMethod is the 2026-07-28 request that carries a client's
// notifications; subscriptionIDKey ties a notification to it.
const (
	listenMethod      = "subscriptions/listen"
	subscriptionIDKey = "io.modelcontextprotocol/subscriptionId"
)

// Run bridges until the client closes In (nil), ctx ends, or no owner
// answers within Options.Wait (ErrNoOwner).
func Run(ctx context.Context, opts Options) error {
	b := &bridge{opts: opts, log: opts.Log, inFlight: map[string]json.RawMessage{}, listens: map[string][]byte{},
		subscribes: map[string][]byte{}, replays: map[string]bool{}}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	fromClient := make(chan []byte)
	clientErr := make(chan error, 1)
	go func() { clientErr <- readLines(ctx, opts.In, fromClient) }()
	return b.loop(ctx, fromClient, clientErr)
}

// upstream is one session with an owner.
type upstream struct {
	rwc    io.ReadWriteCloser
	lines  chan []byte // closed when the session ends; then ended holds why
	ended  chan error
	cancel context.CancelFunc
}

func (b *bridge) connect(ctx context.Context) (*upstream, error) {
	ctx, cancel := context.WithTimeout(ctx, b.opts.Wait)
	defer cancel()
	delay := 5 * time.Millisecond
	for {
		rwc, err := b.opts.Dial(ctx)
		if err == nil {
			up := &upstream{rwc: rwc, lines: make(chan []byte), ended: make(chan error, 1)}
			return up, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w within %s: %v", ErrNoOwner, b.opts.Wait, err)
		case <-time.After(delay):
		}
		delay = min(delay*2, 250*time.Millisecond)
	}
}

func (b *bridge) loop(ctx context.Context, fromClient chan []byte, clientErr chan error) error {
	var (
		up *upstream
		// Unbuffered: a session dialed after the loop returned is closed
		// by its dialer, not left open in a buffer nobody reads.
		dialed    = make(chan *upstream)
		dialErr   = make(chan error)
		dialing   bool
		replaying bool // the replayed initialize waits for its answer
		attached  bool // a session was established before: later ones replay
	)
	defer func() {
		if up != nil {
			up.cancel()
		}
	}()
	startDial := func() {
		dialing = true
		go func() {
			u, err := b.connect(ctx)
			if err != nil {
				select {
				case dialErr <- err:
				case <-ctx.Done():
				}
				return
			}
			select {
			case dialed <- u:
			case <-ctx.Done():
				u.rwc.Close()
			}
		}()
	}
	startDial()
	for {
		var lines chan []byte
		if up != nil {
			lines = up.lines
		}
		select {
		case <-ctx.Done():
			if up != nil {
				up.rwc.Close()
			}
			return ctx.Err()

		case err := <-dialErr:
			dialing = false
			b.failHeld(err)
			return err

		case u := <-dialed:
			dialing = false
			up = u
			var upCtx context.Context
			upCtx, up.cancel = context.WithCancel(ctx)
			go func(u *upstream, ctx context.Context) { u.ended <- readLines(ctx, u.rwc, u.lines) }(u, upCtx)
			if attached && b.initialize != nil {
				// Replay the client's handshake; what the client sent
				// meanwhile waits for its answer.
				if err := b.write(up, withID(b.initialize, replayID)); err != nil {
					b.lost(&up, err)
					startDial()
					continue
				}
				replaying = true
				continue
			}
			if !b.resume(up, attached) {
				b.lost(&up, errors.New("write failed"))
				startDial()
			}
			attached = true

		case line, ok := <-fromClient:
			if !ok {
				fromClient = nil
				if up != nil {
					up.rwc.Close()
				}
				return <-clientErr
			}
			b.fromClient(line)
			if up == nil || replaying {
				b.hold(line)
				continue
			}
			if err := b.write(up, line); err != nil {
				b.hold(line)
				b.lost(&up, err)
				startDial()
			}

		case line, ok := <-lines:
			if !ok {
				b.lost(&up, <-up.ended)
				replaying = false
				if !dialing {
					startDial()
				}
				continue
			}
			env := parse(line)
			if env.isResponse() && string(env.ID) == replayID {
				replaying = false
				if bytes.Contains(line, []byte(`"error"`)) {
					b.log.Warn("the owner refused the client's replayed initialize", "answer", truncate(line))
				}
				if b.initialized != nil {
					if err := b.write(up, b.initialized); err != nil {
						b.lost(&up, err)
						startDial()
						continue
					}
				}
				if !b.replayState(up) || !b.resume(up, true) {
					b.lost(&up, errors.New("write failed"))
					startDial()
				}
				continue
			}
			if env.isResponse() && b.replays[string(env.ID)] {
				delete(b.replays, string(env.ID))
				if bytes.Contains(line, []byte(`"error"`)) {
					b.log.Warn("the owner refused a replayed request of the client's session", "answer", truncate(line))
				}
				continue
			}
			if env.isResponse() {
				delete(b.inFlight, idKey(env.ID))
				delete(b.listens, idKey(env.ID))
			}
			b.toClient(line)
		}
	}
}

// lost ends the session with the owner and answers every request the
// client sent through it with an error: whether it ran is unknown, and an
// answer that never comes would hang the client.
func (b *bridge) lost(up **upstream, err error) {
	if *up == nil {
		return
	}
	(*up).rwc.Close()
	(*up).cancel()
	*up = nil
	b.log.Info("the session with the directory's owner ended; looking for the owner again", "err", err, "in_flight", len(b.inFlight))
	for id := range b.listens {
		delete(b.inFlight, id)
	}
	for _, id := range b.inFlight {
		b.toClient(errorAnswer(string(id), "tether: the directory's owner went away before answering this request (it may or may not have run); the bridge is connecting to the next owner: send it again"))
	}
	clear(b.inFlight)
	if b.opts.Lost != nil {
		b.opts.Lost()
	}
}

// resume sends the next owner what the client has open (its
// subscriptions/listen streams) and what it sent meanwhile; after a first
// session (again), it tells the client that its lists may have changed,
// on each listen stream for a 2026-07-28 client. False when a write
// failed.
func (b *bridge) resume(up *upstream, again bool) bool {
	for _, line := range b.listens {
		if err := b.write(up, line); err != nil {
			return false
		}
	}
	if !b.flushHeld(up) {
		return false
	}
	if !again {
		return true
	}
	for _, m := range []string{"tools", "prompts", "resources"} {
		if b.initialize != nil {
			b.toClient([]byte(`{"jsonrpc":"2.0","method":"notifications/` + m + `/list_changed"}`))
		}
		for _, line := range b.listens {
			b.toClient([]byte(`{"jsonrpc":"2.0","method":"notifications/` + m + `/list_changed","params":{"_meta":{"` + subscriptionIDKey + `":` + string(parse(line).ID) + `}}}`))
		}
	}
	return true
}

// replayState sends the next owner the 2025 session state the client set
// (its logging level, its resource subscriptions), each under an id of the
// bridge's own; false when a write failed.
func (b *bridge) replayState(up *upstream) bool {
	lines := make([][]byte, 0, 1+len(b.subscribes))
	if b.setLevel != nil {
		lines = append(lines, b.setLevel)
	}
	for _, l := range b.subscribes {
		lines = append(lines, l)
	}
	for _, l := range lines {
		id := fmt.Sprintf(`"tether-bridge-replay-%d"`, len(b.replays))
		for b.replays[id] {
			id = id[:len(id)-1] + `x"`
		}
		b.replays[id] = true
		if _, err := up.rwc.Write(append(withID(l, id), '\n')); err != nil {
			return false
		}
	}
	return true
}

// fromClient notes what the bridge must remember of a client's message.
func (b *bridge) fromClient(line []byte) {
	env := parse(line)
	switch {
	case env.Method == "initialize" && env.isRequest():
		b.initialize = line
	case env.Method == "notifications/initialized":
		b.initialized = line
	case env.Method == "logging/setLevel" && env.isRequest():
		b.setLevel = line
	case env.Method == "resources/subscribe" && env.isRequest():
		b.subscribes[env.Params.URI] = line
	case env.Method == "resources/unsubscribe" && env.isRequest():
		delete(b.subscribes, env.Params.URI)
	case env.Method == "notifications/cancelled":
		// A cancelled request may never be answered: it is not in flight
		// any more, and a cancelled listen stream is not opened again.
		delete(b.inFlight, idKey(env.Params.RequestID))
		delete(b.listens, idKey(env.Params.RequestID))
	}
}

func (b *bridge) hold(line []byte) {
	env := parse(line)
	if len(b.held) >= MaxHeld || b.heldBytes+len(line) > MaxHeldBytes {
		if env.isRequest() {
			b.toClient(errorAnswer(string(env.ID), fmt.Sprintf("tether: no owner of the directory answers, and %d messages (%d bytes) already wait for one, at most %d messages and %d bytes", len(b.held), b.heldBytes, MaxHeld, MaxHeldBytes)))
		}
		return
	}
	b.held = append(b.held, line)
	b.heldBytes += len(line)
}

// flushHeld sends what waited, in order; false when a write failed (the
// rest stays held).
func (b *bridge) flushHeld(up *upstream) bool {
	for len(b.held) > 0 {
		if err := b.write(up, b.held[0]); err != nil {
			return false
		}
		b.heldBytes -= len(b.held[0])
		b.held = b.held[1:]
	}
	return true
}

func (b *bridge) failHeld(err error) {
	for _, line := range b.held {
		if env := parse(line); env.isRequest() {
			b.toClient(errorAnswer(string(env.ID), "tether: "+err.Error()))
		}
	}
	b.held, b.heldBytes = nil, 0
	for key, line := range b.listens {
		b.inFlight[key] = parse(line).ID
	}
	clear(b.listens)
	for _, id := range b.inFlight {
		b.toClient(errorAnswer(string(id), "tether: "+err.Error()))
	}
	clear(b.inFlight)
}

// write sends one message to the owner and, for a request, remembers it
// as in flight.
func (b *bridge) write(up *upstream, line []byte) error {
	env := parse(line)
	if env.isRequest() && string(env.ID) != replayID {
		b.inFlight[idKey(env.ID)] = env.ID
		if env.Method == listenMethod {
			b.listens[idKey(env.ID)] = line
		}
	}
	_, err := up.rwc.Write(append(line, '\n'))
	if err != nil {
		delete(b.inFlight, idKey(env.ID))
	}
	return err
}

func (b *bridge) toClient(line []byte) {
	if _, err := b.opts.Out.Write(append(line, '\n')); err != nil {
		b.log.Debug("writing to the client", "err", err)
	}
}

func parse(line []byte) envelope {
	var env envelope
	if len(line) > 0 && line[0] == '{' {
		_ = json.Unmarshal(line, &env)
	}
	return env
}

// withID is line with its id replaced.
func withID(line []byte, id string) []byte {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(line, &m); err != nil {
		return line
	}
	m["id"] = json.RawMessage(id)
	out, err := json.Marshal(m)
	if err != nil {
		return line
	}
	return out
}

// idKey is a JSON-RPC id as a value, the same however it is spelled: the
// owner's go-sdk answers a number as the integer it reads (2.0 and 2e0 are
// 2) and a string in its own escaping, so an answer is matched to its
// request by this key, not by bytes.
func idKey(id json.RawMessage) string {
	var v any
	if err := json.Unmarshal(id, &v); err != nil {
		return string(id)
	}
	switch v := v.(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10)
	case string:
		b, _ := json.Marshal(v)
		return string(b)
	}
	return string(id)
}

func errorAnswer(id, msg string) []byte {
	m, _ := json.Marshal(msg)
	return []byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32603,"message":` + string(m) + `}}`)
}

func truncate(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}

// readLines sends each line of r (without its newline; blank lines
// skipped) on out until r ends (nil at EOF) or ctx is done. A line over
// MaxLine ends it with an error.
func readLines(ctx context.Context, r io.Reader, out chan<- []byte) error {
	br := bufio.NewReaderSize(r, 64<<10)
	defer close(out)
	for {
		line, err := readLine(br)
		if len(bytes.TrimSpace(line)) > 0 {
			select {
			case out <- bytes.TrimRight(line, "\r\n"):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func readLine(br *bufio.Reader) ([]byte, error) {
	var buf []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(buf)+len(chunk) > MaxLine {
			return nil, fmt.Errorf("a message longer than %d bytes", MaxLine)
		}
		buf = append(buf, chunk...)
		if err != bufio.ErrBufferFull {
			return buf, err
		}
	}
}
