package gateway

import (
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestResultJSONAsEraResult: the fast path's result for a 2026-07-28
// caller (resultJSON) says what the go-sdk path's says (dropHopMeta,
// eraResult, the gateway's name in _meta), whatever the backend sent of
// _meta and resultType; decoded as a client decodes it, duplicate keys
// and all.
func TestResultJSONAsEraResult(t *testing.T) {
	info := json.RawMessage(`{"name":"tether","version":"v"}`)
	for _, backend := range []string{
		`{"content":[{"type":"text","text":"x"}]}`,
		`{"content":[{"type":"text","text":"x"}],"resultType":null}`,
		`{"content":[{"type":"text","text":"x"}],"resultType":"complete"}`,
		`{"content":[{"type":"text","text":"x"}],"_meta":null}`,
		`{"content":[{"type":"text","text":"x"}],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"forged"},"k":1}}`,
		`{"content":null}`,
		`{}`,
	} {
		got, err := resultJSON(json.RawMessage(backend), info)
		if err != nil {
			t.Errorf("%s: %v", backend, err)
			continue
		}
		var res mcp.CallToolResult
		if err := json.Unmarshal([]byte(backend), &res); err != nil {
			t.Fatal(err)
		}
		dropHopMeta(res.Meta)
		want, err := eraResult(&res)
		if err != nil {
			t.Fatal(err)
		}
		if want.Meta == nil {
			want.Meta = mcp.Meta{}
		}
		want.Meta[mcp.MetaKeyServerInfo] = map[string]any{"name": "tether", "version": "v"}
		// A map takes the last of duplicate keys, as JSON.parse does.
		var head map[string]json.RawMessage
		if err := json.Unmarshal(got, &head); err != nil || string(head["resultType"]) != `"complete"` {
			t.Errorf("%s: resultJSON gave %s: resultType %s, want \"complete\"", backend, got, head["resultType"])
		}
		var gotRes mcp.CallToolResult
		if err := json.Unmarshal(got, &gotRes); err != nil {
			t.Fatal(err)
		}
		a, _ := json.Marshal(&gotRes)
		b, _ := json.Marshal(want)
		if string(a) != string(b) {
			t.Errorf("%s:\n fast path: %s\n   go-sdk: %s", backend, a, b)
		}
	}
}
