package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
)

// Headers of the streamable HTTP transport that a synthetic request repeats.
const (
	sessionIDHeader       = "Mcp-Session-Id"
	protocolVersionHeader = "Mcp-Protocol-Version"
)

// cancelOnDisconnect cancels the tools/call requests of a POST whose client
// went away before their answers were written.
//
// The gateway's HTTP sessions are stateful and keep no event store: an
// answer whose POST stream is gone can never be delivered (there is nothing
// to resume from). The go-sdk still runs the handler on, for older protocol
// versions, until the call ends or its callTimeout expires, holding a backend
// call nobody waits for. So when a POST that carried tools/call ends because
// its request context did (the client disconnected), the gateway sends the
// session the notifications/cancelled the client did not get to send: the
// handler's context ends and the cancellation reaches the backend as if the
// client had cancelled. For a call that had already been answered the
// notification names no request in flight and is ignored.
func (g *Gateway) cancelOnDisconnect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del(noticesHeader) // the gateway's own (notices.go)
		session := r.Header.Get(sessionIDHeader)
		if r.Method != http.MethodPost || session == "" || r.Body == nil {
			next.ServeHTTP(w, r)
			return
		}
		// Read what the SDK would accept, and no more: a larger body is
		// passed on whole for the SDK to refuse.
		body, err := io.ReadAll(io.LimitReader(r.Body, g.opts.MaxRequestBodyBytes+1))
		if err != nil || int64(len(body)) > g.opts.MaxRequestBodyBytes {
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			next.ServeHTTP(w, r)
			return
		}
		r.Body = readCloser{bytes.NewReader(body), r.Body}
		ids := toolCallIDs(body)
		// Every request's stream, not only tools/call's: prompts/get and
		// resources/read relay the backend's requests too.
		w, forget := g.notices.watch(w, r)
		defer forget()
		next.ServeHTTP(w, r)
		if len(ids) == 0 || r.Context().Err() == nil {
			return
		}
		for _, id := range ids {
			g.sendCancelled(r, id)
		}
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// toolCallIDs returns the JSON-RPC ids of the tools/call requests in a POST
// body (one message or a batch), verbatim.
func toolCallIDs(body []byte) []json.RawMessage {
	// The common case costs a scan or two; "tools\/call" and \u escapes
	// spell the method too.
	if !bytes.Contains(body, []byte("call")) && !bytes.Contains(body, []byte(`\u`)) {
		return nil
	}
	type message struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	var batch []message
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '[' {
		if json.Unmarshal(trimmed, &batch) != nil {
			return nil
		}
	} else {
		var m message
		if json.Unmarshal(body, &m) != nil {
			return nil
		}
		batch = []message{m}
	}
	var ids []json.RawMessage
	for _, m := range batch {
		if m.Method == methodCallTool && len(m.ID) > 0 && !bytes.Equal(m.ID, []byte("null")) {
			ids = append(ids, m.ID)
		}
	}
	return ids
}

// sendCancelled delivers notifications/cancelled for request id to the
// session of r, through the SDK's own handler.
func (g *Gateway) sendCancelled(r *http.Request, id json.RawMessage) {
	msg, err := json.Marshal(map[string]any{
		"jsonrpc": "2.0",
		"method":  "notifications/cancelled",
		"params":  map[string]any{"requestId": id, "reason": "the client disconnected"},
	})
	if err != nil {
		return
	}
	req, err := http.NewRequestWithContext(context.WithoutCancel(r.Context()), http.MethodPost, r.URL.String(), bytes.NewReader(msg))
	if err != nil {
		return
	}
	req.Host = r.Host
	req.RemoteAddr = r.RemoteAddr
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(sessionIDHeader, r.Header.Get(sessionIDHeader))
	if v := r.Header.Get(protocolVersionHeader); v != "" {
		req.Header.Set(protocolVersionHeader, v)
	}
	g.handler.ServeHTTP(discardResponse{header: http.Header{}}, req)
	g.log.Debug("gateway cancelled a call whose client disconnected", "session", r.Header.Get(sessionIDHeader), "id", string(id))
}

// discardResponse is a ResponseWriter that keeps nothing.
type discardResponse struct{ header http.Header }

func (d discardResponse) Header() http.Header         { return d.header }
func (d discardResponse) Write(b []byte) (int, error) { return len(b), nil }
func (d discardResponse) WriteHeader(int)             {}
