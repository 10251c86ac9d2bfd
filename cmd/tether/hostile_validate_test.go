package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileValidatePortOutOfRange: `tether validate` refuses a URL whose
// port is outside 1–65535 (docs/reliability.md, row HP3), naming the file,
// the document and the field, without echoing the URL (its query may hold a
// token). Port 99999 passed validate before.
func TestHostileValidatePortOutOfRange(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "remote.yaml")
	writeFile(t, m, httpManifest("remote", "http://127.0.0.1:99999/mcp?token=hunter2", "streamable", ""))
	code, stdout, stderr := runValidate(t, m)
	want := m + ":7: document 1 (line 1): spec.http.url: invalid URL: the port must be a number from 1 to 65535"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
	if strings.Contains(stdout+stderr, "hunter2") {
		t.Errorf("validate echoes the URL's query:\n%s%s", stdout, stderr)
	}
}
