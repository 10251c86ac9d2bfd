package supervisor

import (
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// TestWantKeyIsSessionKey: tether diff predicts a reconnect with
// spec.SessionKey; the supervisor must replace a session on exactly that
// key, or the two could disagree (docs/contract.md §2).
func TestWantKeyIsSessionKey(t *testing.T) {
	a := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "a"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "x"}}}
	b := &spec.McpConnection{Metadata: spec.ObjectMeta{Name: "a"}, Spec: spec.Spec{Stdio: &spec.StdioSpec{Command: "x", Args: []string{"1"}}}}
	keys := map[string]bool{}
	for _, c := range []*spec.McpConnection{a, b} {
		for _, dir := range []string{"d1", "d2"} {
			w := Want{Conn: c, Dir: dir, SecretsVersion: "v"}
			if got, want := w.specHash(), spec.SessionKey(&c.Spec, dir); got != want {
				t.Errorf("specHash %q, SessionKey %q", got, want)
			}
			keys[w.specHash()] = true
		}
	}
	if len(keys) != 4 {
		t.Errorf("%d distinct keys for 2 specs × 2 directories", len(keys))
	}
}
