//go:build unix

package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestHostileImportKeepsSecretsOutOfCommittableFiles: `tether import` of
// servers whose credentials sit where heuristics used to miss them or where
// no field reads a file (docs/reliability.md, row HP4). No file others may
// read (mode 0644) holds a credential: values go to 0600 files under
// secrets/, and a manifest that must keep one (a URL's query or user info,
// an argument) is written 0600 with a note saying so. Before, each of these
// credentials was written into a 0644 manifest.
func TestHostileImportKeepsSecretsOutOfCommittableFiles(t *testing.T) {
	secrets := []string{"FAKE1url", "FAKE2userinfo", "FAKE3arg", "FAKE4pass", "FAKE5pat", "FAKE6cookie", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.FAKE7jwt"}
	config := filepath.Join(t.TempDir(), "mcp.json")
	writeFile(t, config, `{"mcpServers": {
  "query": {"url": "https://mcp.example.com/mcp?api_key=FAKE1url"},
  "userinfo": {"url": "https://alice:FAKE2userinfo@mcp.example.com/mcp"},
  "args": {"command": "srv", "args": ["--token", "FAKE3arg"]},
  "env": {"command": "srv", "env": {"DB_PASS": "FAKE4pass", "GITHUB_PAT": "FAKE5pat", "PATH": "/usr/bin"}},
  "headers": {"url": "https://h.example.com/mcp", "headers": {"Cookie": "FAKE6cookie", "X-Id": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.FAKE7jwt"}}
}}`)
	out := t.TempDir()
	stdout, stderr, errText := runImport(t, "", config, "--out", out)
	if errText != "" {
		t.Fatalf("import: %s\n%s", errText, stderr)
	}
	for _, s := range secrets {
		if strings.Contains(stdout+stderr, s) {
			t.Errorf("import's report shows a credential:\n%s%s", stdout, stderr)
		}
	}
	// query, userinfo and args keep theirs in the manifest, and say so.
	if n := strings.Count(stdout, "written mode 0600"); n != 3 {
		t.Errorf("the report says %d times that a manifest keeps a credential and is written 0600, want 3:\n%s", n, stdout)
	}
	private := map[string]bool{}
	err := filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, s := range secrets {
			if strings.Contains(string(data), s) {
				private[s] = true
				if fi.Mode().Perm()&0o077 != 0 {
					t.Errorf("%s (mode %04o) holds the credential %s", p, fi.Mode().Perm(), s)
				}
			}
		}
		return nil
	})
	must(t, err)
	for _, s := range secrets {
		if !private[s] {
			t.Errorf("the credential %s was written nowhere: the import lost it", s)
		}
	}
	if data, err := os.ReadFile(filepath.Join(out, "env.yaml")); err != nil || !strings.Contains(string(data), "/usr/bin") {
		t.Errorf("PATH is no credential, it stays in the manifest: %v\n%s", err, data)
	}
}
