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
// beside "method", which the go-sdk's decoder does not match), a listen on
// a classic session's POST, and one in a batch (which the go-sdk serves
// on a session of 2025-03-26) each held a connection for the client's life
// outside the count. One past the share is answered with the error, as a
// batch is answered: an array.
func TestListensCountedHoweverSent(t *testing.T) {
	const maxConn = 4
	meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"` + modernProtocol + `","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"0"},"io.modelcontextprotocol/clientCapabilities":{}}`
	cases := []struct {
		name   string
		batch  bool
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
		name: "bytes past the request, which the go-sdk's decoder leaves unread",
		body: func(id int) string {
			return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},%s}} x`, id, meta)
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
	}, {
		name:  "a batch on a classic session of 2025-03-26",
		batch: true,
		body: func(id int) string {
			return fmt.Sprintf(`[{"jsonrpc":"2.0","id":%d,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true}}}]`, id)
		},
		header: func(t *testing.T, url string) map[string]string {
			resp, body := do(t, http.MethodPost, url, strings.Replace(initializeBody, "2025-06-18", "2025-03-26", 1), nil)
			sid := resp.Header.Get(sessionIDHeader)
			if resp.StatusCode != http.StatusOK || sid == "" {
				t.Fatalf("initialize: %d %q %s", resp.StatusCode, sid, body)
			}
			h := map[string]string{sessionIDHeader: sid, protocolVersionHeader: "2025-03-26"}
			if resp, body := do(t, http.MethodPost, url, initializedBody, h); resp.StatusCode != http.StatusAccepted {
				t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
			}
			return h
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
			want := `200 {"jsonrpc":"2.0","id":`
			if tc.batch {
				want = `200 [{"jsonrpc":"2.0","id":`
			}
			for _, a := range answers {
				if !strings.HasPrefix(a, want) || !strings.Contains(a, `"error":{"code":-32000,`) || !strings.Contains(a, "--max-connections") {
					t.Errorf("a listen past the share got %s, want %s… with the error naming --max-connections", a, want)
				}
			}
		})
	}
}
