package gateway

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
)

// postListen sends body, a subscriptions/listen however spelled, with
// header, on a connection of its own, and reports whether it streams (is
// open); an answer that does not stream is read and closed.
func postListen(t *testing.T, ctx context.Context, url, body string, header map[string]string) (open *http.Response, answer string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range header {
		req.Header.Set(k, v)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return nil, err.Error() // its connection closed at the bound
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Cleanup(func() { resp.Body.Close() })
		return resp, ""
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return nil, fmt.Sprintf("%d %s", resp.StatusCode, raw)
}

// TestListensCountedHoweverSent: the share of --max-connections that
// listens hold counts every subscriptions/listen the go-sdk serves as one:
// a body whose keys the gateway read without regard to case ("Method"
// beside "method", which the go-sdk's decoder does not match) and a
// listen on a classic session's POST both held a connection for the
// client's life outside the count.
func TestListensCountedHoweverSent(t *testing.T) {
	const maxConn = 4
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modernProtocol + `","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}`
	cases := []struct {
		name   string
		body   func(id int) string
		header func(t *testing.T, url string) map[string]string
	}{{
		name: "a key the go-sdk does not match",
		body: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","Method":"ping","params":{"notifications":{"toolsListChanged":true},%s}}`, id, meta)
		},
		header: func(*testing.T, string) map[string]string {
			return map[string]string{protocolVersionHeader: modernProtocol, methodHeader: "subscriptions/listen"}
		},
	}, {
		name: "a classic session",
		body: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}`, id)
		},
		header: func(t *testing.T, url string) map[string]string {
			sid := initSession(t, url, nil)
			return map[string]string{sessionIDHeader: sid, protocolVersionHeader: "2025-06-18"}
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := New(Options{Logger: slog.New(slog.DiscardHandler), MaxConnections: maxConn})
			url, _ := serveOn(t, g, "127.0.0.1:0", "")
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			header := tc.header(t, url)
			open := 0
			var answers []string
			for id := range maxConn + 2 {
				resp, answer := postListen(t, ctx, url, tc.body(id), header)
				if resp != nil {
					open++
				} else {
					answers = append(answers, answer)
				}
			}
			if open > maxConn/2 {
				t.Fatalf("%d listens open at --max-connections %d, want %d at most; refused: %q", open, maxConn, maxConn/2, answers)
			}
		})
	}
}
