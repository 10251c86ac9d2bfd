package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestClientConfigPath: where each client keeps its MCP configuration,
// per OS.
func TestClientConfigPath(t *testing.T) {
	env := map[string]string{"HOME": "/home/ada", "USERPROFILE": `C:\Users\ada`, "APPDATA": `C:\Users\ada\AppData\Roaming`}
	getenv := func(k string) string { return env[k] }
	for _, tt := range []struct{ client, goos, want string }{
		{"claude-desktop", "darwin", filepath.Join("/home/ada", "Library", "Application Support", "Claude", "claude_desktop_config.json")},
		{"claude-desktop", "windows", filepath.Join(`C:\Users\ada\AppData\Roaming`, "Claude", "claude_desktop_config.json")},
		{"claude-desktop", "linux", filepath.Join("/home/ada", ".config", "Claude", "claude_desktop_config.json")},
		{"vscode", "darwin", filepath.Join("/home/ada", "Library", "Application Support", "Code", "User", "mcp.json")},
		{"vscode", "windows", filepath.Join(`C:\Users\ada\AppData\Roaming`, "Code", "User", "mcp.json")},
		{"vscode", "linux", filepath.Join("/home/ada", ".config", "Code", "User", "mcp.json")},
		{"cursor", "linux", filepath.Join("/home/ada", ".cursor", "mcp.json")},
		{"cursor", "windows", filepath.Join(`C:\Users\ada`, ".cursor", "mcp.json")},
		{"claude-code", "darwin", filepath.Join("/home/ada", ".claude.json")},
	} {
		got, err := clientConfigPath(tt.client, tt.goos, getenv)
		if err != nil || got != tt.want {
			t.Errorf("%s on %s: %q, %v; want %q", tt.client, tt.goos, got, err, tt.want)
		}
	}
	if _, err := clientConfigPath("vscode", "windows", func(string) string { return "" }); err == nil || !strings.Contains(err.Error(), "--config") {
		t.Errorf("no APPDATA: %v, want an error pointing at --config", err)
	}
}

// TestImportEndsWithSetup: tether import ends by saying how to point the
// client it read back at tether.
func TestImportEndsWithSetup(t *testing.T) {
	for _, tt := range []struct{ config, want string }{
		{"/Users/ada/Library/Application Support/Claude/claude_desktop_config.json", "--config '/Users/ada/Library/Application Support/Claude/claude_desktop_config.json' --dry-run"},
		{"/home/ada/.cursor/mcp.json", "tether setup cursor --dir "},
		{"/src/app/.vscode/mcp.json", "tether setup vscode --dir "},
		{"/src/app/.mcp.json", "tether setup claude-code --dir "},
		{"servers.json", "tether setup --print --dir "},
	} {
		var b bytes.Buffer
		printSetupHint(&b, tt.config, "manifests")
		if !strings.Contains(b.String(), tt.want) || !strings.Contains(b.String(), "runs twice") {
			t.Errorf("after importing %s:\n%s\nwant %q", tt.config, b.String(), tt.want)
		}
	}
}

// TestSetupBackupIsNeverReplaced: a second run within the same second
// keeps the first backup (the file as it was before tether setup) and
// takes another name.
func TestSetupBackupIsNeverReplaced(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mcp.json")
	at := time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)
	first := backupPath(cfg, at)
	if err := os.WriteFile(first, []byte("original"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := backupPath(cfg, at)
	if second == first {
		t.Fatalf("the second backup within a second is named %s too: it would replace the first", second)
	}
	if !strings.HasPrefix(filepath.Base(second), "mcp.json.tether-backup-20260728T090000Z") {
		t.Errorf("second backup %s", second)
	}
}

// TestSetupRefusesAConfigChangedMeanwhile: a configuration its client
// rewrote between tether setup's read and its write is left as the client
// wrote it.
func TestSetupRefusesAConfigChangedMeanwhile(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "claude.json")
	read := []byte(`{"mcpServers": {}}`)
	rewritten := []byte(`{"mcpServers": {}, "projects": {"/src": {}}}`)
	if err := os.WriteFile(cfg, rewritten, 0o600); err != nil {
		t.Fatal(err)
	}
	err := writeClientConfig(cfg, read, []byte(`{"mcpServers": {"tether": {}}}`), 0o600)
	if err == nil || !strings.Contains(err.Error(), "changed while tether setup ran") {
		t.Fatalf("writing over a file changed meanwhile: %v", err)
	}
	if now, _ := os.ReadFile(cfg); !bytes.Equal(now, rewritten) {
		t.Fatalf("the client's rewrite was lost: %s", now)
	}
	if err := writeClientConfig(cfg, rewritten, []byte(`{}`), 0o600); err != nil {
		t.Fatalf("an unchanged file: %v", err)
	}
	created := filepath.Join(t.TempDir(), "new.json")
	if err := writeClientConfig(created, nil, []byte(`{}`), 0o600); err != nil {
		t.Fatalf("a new file: %v", err)
	}
	if err := writeClientConfig(created, nil, []byte(`{"x": 1}`), 0o600); err == nil {
		t.Fatal("a file created meanwhile was written over")
	}
}
