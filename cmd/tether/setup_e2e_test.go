//go:build unix

package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// runSetup runs the real `tether setup` with args and returns its output
// and exit error.
func runSetup(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(builtBinaries(t), "tether"), append([]string{"setup"}, args...)...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// oneRegionChanged reports whether updated is old with one contiguous
// region replaced (an insert is an empty region replaced): every other
// byte in place, in order.
func oneRegionChanged(old, updated []byte) (changedOld, changedNew []byte) {
	p := 0
	for p < len(old) && p < len(updated) && old[p] == updated[p] {
		p++
	}
	s := 0
	for s < len(old)-p && s < len(updated)-p && old[len(old)-1-s] == updated[len(updated)-1-s] {
		s++
	}
	return old[p : len(old)-s], updated[p : len(updated)-s]
}

// TestSetupRoundTrip: tether setup on a copy of each client's real
// configuration format adds its one entry, keeps a backup that is the
// file as it was, and changes no other byte; a second run changes
// nothing; --dry-run writes nothing.
func TestSetupRoundTrip(t *testing.T) {
	manifests := t.TempDir()
	tetherBin := filepath.Join(builtBinaries(t), "tether")
	for _, tt := range []struct {
		client, file, serversKey string
		url                      bool
	}{
		{"claude-desktop", "claude_desktop_config.json", "mcpServers", false},
		{"claude-code", "claude.json", "mcpServers", true},
		{"cursor", "cursor-mcp.json", "mcpServers", false},
		{"vscode", "vscode-mcp.json", "servers", true},
	} {
		t.Run(tt.client, func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join("testdata", "setup", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			cfg := filepath.Join(dir, tt.file)
			must(t, os.WriteFile(cfg, orig, 0o640))

			out, err := runSetup(t, tt.client, "--config", cfg, "--dir", manifests, "--dry-run")
			if err != nil || !strings.Contains(out, "+    \"tether\": {") {
				t.Fatalf("--dry-run: %v\n%s", err, out)
			}
			if now, _ := os.ReadFile(cfg); !bytes.Equal(now, orig) {
				t.Fatal("--dry-run changed the file")
			}

			args := []string{tt.client, "--config", cfg, "--dir", manifests}
			if tt.url {
				args = append(args, "--url", "http://127.0.0.1:8808/mcp")
			}
			if out, err := runSetup(t, args...); err != nil {
				t.Fatalf("setup: %v\n%s", err, out)
			}
			updated, err := os.ReadFile(cfg)
			if err != nil {
				t.Fatal(err)
			}
			removed, added := oneRegionChanged(orig, updated)
			if len(removed) != 0 {
				t.Fatalf("setup changed bytes of the file other than its entry: %q became %q", removed, added)
			}
			if !strings.Contains(string(added), `"tether": {`) {
				t.Fatalf("the one region added is not the tether entry: %q", added)
			}
			if fi, _ := os.Stat(cfg); fi.Mode().Perm() != 0o640 {
				t.Errorf("mode %v, want the file's own 0640", fi.Mode().Perm())
			}
			backups, _ := filepath.Glob(cfg + ".tether-backup-*")
			if len(backups) != 1 {
				t.Fatalf("backups: %v", backups)
			}
			if b, _ := os.ReadFile(backups[0]); !bytes.Equal(b, orig) {
				t.Fatal("the backup is not the file as it was")
			}

			// What the client reads: the entry launches this tether's
			// connect on the directory, or uses the URL.
			var doc map[string]json.RawMessage
			must(t, json.Unmarshal(stripJSONCComments(updated), &doc))
			var servers map[string]struct {
				Type    string   `json:"type"`
				Command string   `json:"command"`
				Args    []string `json:"args"`
				URL     string   `json:"url"`
			}
			must(t, json.Unmarshal(doc[tt.serversKey], &servers))
			e := servers["tether"]
			if tt.url {
				if e.URL != "http://127.0.0.1:8808/mcp" || e.Type != "http" {
					t.Errorf("entry %+v", e)
				}
			} else if e.Command != tetherBin || strings.Join(e.Args, " ") != "run --stdio --dir "+manifests {
				t.Errorf("entry %+v, want %s run --stdio --dir %s", e, tetherBin, manifests)
			}

			out, err = runSetup(t, args...)
			if err != nil || !strings.Contains(out, "nothing to change") {
				t.Fatalf("second setup: %v\n%s", err, out)
			}
			if again, _ := os.ReadFile(cfg); !bytes.Equal(again, updated) {
				t.Fatal("a second setup changed the file")
			}
		})
	}
}

// stripJSONCComments drops // and /* */ comments and trailing commas of
// VS Code's JSONC, as a client reading it does (strings contain none of
// them in the fixtures).
func stripJSONCComments(b []byte) []byte {
	var out []string
	for line := range strings.SplitSeq(string(b), "\n") {
		if i := strings.Index(line, "//"); i >= 0 && !strings.Contains(line[:i], `"`) {
			line = line[:i]
		}
		out = append(out, line)
	}
	s := strings.Join(out, "\n")
	for _, close := range []string{"}", "]"} {
		s = trailingComma(s, close)
	}
	return []byte(s)
}

func trailingComma(s, close string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			j := i + 1
			for j < len(s) && (s[j] == ' ' || s[j] == '\n' || s[j] == '\t') {
				j++
			}
			if j < len(s) && string(s[j]) == close {
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// TestSetupRefusesOddFiles: a configuration that is a symlink, not a
// regular file, too large or not JSON is refused with the reason, and
// nothing is written.
func TestSetupRefusesOddFiles(t *testing.T) {
	manifests := t.TempDir()
	dir := t.TempDir()
	real := filepath.Join(dir, "real.json")
	must(t, os.WriteFile(real, []byte(`{"mcpServers": {}}`), 0o600))
	link := filepath.Join(dir, "link.json")
	must(t, os.Symlink(real, link))
	fifo := filepath.Join(dir, "fifo.json")
	must(t, syscall.Mkfifo(fifo, 0o600))
	huge := filepath.Join(dir, "huge.json")
	f, err := os.Create(huge)
	must(t, err)
	must(t, f.Truncate(17<<20))
	f.Close()
	bad := filepath.Join(dir, "bad.json")
	must(t, os.WriteFile(bad, []byte("{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  \n"), 0o600))
	notObject := filepath.Join(dir, "list.json")
	must(t, os.WriteFile(notObject, []byte(`{"mcpServers": ["a"]}`), 0o600))
	for _, tt := range []struct{ path, want string }{
		{link, "is a symlink"},
		{fifo, "not a regular file"},
		{dir, "not a regular file"},
		{huge, "over the limit"},
		{bad, "line"},
		{notObject, "not a JSON object"},
	} {
		var before []byte
		if tt.path != fifo { // reading a FIFO would wait for a writer
			before, _ = os.ReadFile(tt.path)
		}
		out, err := runSetup(t, "cursor", "--config", tt.path, "--dir", manifests)
		if err == nil || !strings.Contains(out, tt.want) || !strings.Contains(out, tt.path) {
			t.Errorf("setup --config %s: %v\n%s\nwant an error naming the file and %q", filepath.Base(tt.path), err, out, tt.want)
		}
		if tt.path != fifo && tt.path != dir {
			if after, _ := os.ReadFile(tt.path); !bytes.Equal(before, after) {
				t.Errorf("%s changed", tt.path)
			}
		}
		if b, _ := filepath.Glob(tt.path + ".tether-backup-*"); len(b) > 0 {
			t.Errorf("a backup of a refused file: %v", b)
		}
	}
	if b, _ := os.ReadFile(real); string(b) != `{"mcpServers": {}}` {
		t.Errorf("the symlink's target changed: %s", b)
	}
}

// TestSetupEntryLaunches: the entry tether setup writes is one a client can
// launch as it stands: the MCP Inspector, a real client, runs its command
// and arguments over stdio and lists the servers' tools. The only argument
// added is --metrics-addr "", so that the test does not contend for the
// default metrics port with others running beside it.
func TestSetupEntryLaunches(t *testing.T) {
	bin := builtBinaries(t)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "demo.yaml"), stdioManifest("demo", filepath.Join(bin, "tether-example-server"), nil, ""))
	out, err := runSetup(t, "--print", "--dir", dir)
	if err != nil {
		t.Fatalf("setup --print: %v\n%s", err, out)
	}
	var snippet struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(out), &snippet); err != nil {
		t.Fatalf("the snippet is not the mcpServers JSON a client reads: %v\n%s", err, out)
	}
	e, ok := snippet.MCPServers["tether"]
	if !ok || e.Command == "" {
		t.Fatalf("no tether entry with a command: %s", out)
	}
	args := append([]string{e.Command}, e.Args...)
	args = append(args, "--metrics-addr", "", "--method", "tools/list")
	listed, err := inspector(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	if names := inspectorTools(t, listed); !slices.Contains(names, "demo_add") {
		t.Fatalf("the launched entry listed %v, want demo_add among them", names)
	}
}
