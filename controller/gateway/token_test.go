package gateway

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestBearerTokenRotates: a new token written to the auth token file takes
// over at once and the old one stops working; a file that goes away keeps
// the last token in force.
func TestBearerTokenRotates(t *testing.T) {
	file := writeToken(t, "first-token-1")
	g := New(Options{Logger: testLogger(t)})
	g.Set(Connection{Name: "f", Prefix: "f", Tools: []*mcp.Tool{{Name: "t", InputSchema: map[string]any{"type": "object"}}}, Backend: &fakeBackend{}})
	url, _ := serveOn(t, g, "0.0.0.0:0", file)
	status := func(token string) int {
		return post(t, url, "", "Bearer "+token, strings.NewReader(initializeBody))
	}
	waitUntil := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if got := status("first-token-1"); got != http.StatusOK {
		t.Fatalf("the first token: status %d", got)
	}

	// Rotated by rename, as an editor or a Secret update does.
	tmp := filepath.Join(filepath.Dir(file), ".token.new")
	if err := os.WriteFile(tmp, []byte("second-token-2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	waitUntil("the second token to be in force", func() bool { return status("second-token-2") == http.StatusOK })
	if got := status("first-token-1"); got != http.StatusUnauthorized {
		t.Errorf("the old token after the rotation: status %d, want 401", got)
	}

	// Gone: the last token stays in force rather than locking everyone out.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(file), "unrelated"), nil, 0o600); err != nil {
		t.Fatal(err) // an event in the directory, so the removal is surely read
	}
	if got := status("second-token-2"); got != http.StatusOK {
		t.Errorf("after the file went away: status %d, want the last token in force", got)
	}

	// Written in place this time.
	if err := os.WriteFile(file, []byte("third-token-3"), 0o600); err != nil {
		t.Fatal(err)
	}
	waitUntil("the third token to be in force", func() bool { return status("third-token-3") == http.StatusOK })
	if got := status("second-token-2"); got != http.StatusUnauthorized {
		t.Errorf("the second token after the third: status %d, want 401", got)
	}
}
