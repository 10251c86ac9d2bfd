package importer

import (
	"encoding/json"
	"strings"
	"testing"
)

var tetherLaunch = Launch{Command: "/opt/tether/bin/tether", Args: []string{"connect", "--dir", "/home/ada/mcp"}}

// TestSetKeepsEveryOtherByte: tether setup's edit of a client
// configuration adds or replaces its one entry, and what is left when that
// entry is cut out is the file as it was, byte for byte: other servers,
// other keys, order, indentation, comments, trailing commas.
func TestSetKeepsEveryOtherByte(t *testing.T) {
	tests := []struct {
		name, client, in, want string
	}{
		{"claude desktop, other servers and keys", "claude-desktop", `{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_TOKEN": "ghp_x"}
    }
  },
  "globalShortcut": "Ctrl+Space"
}
`, `{
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {"GITHUB_TOKEN": "ghp_x"}
    },
    "tether": {
      "command": "/opt/tether/bin/tether",
      "args": [
        "connect",
        "--dir",
        "/home/ada/mcp"
      ]
    }
  },
  "globalShortcut": "Ctrl+Space"
}
`},
		{"no servers key yet, tabs", "cursor", "{\n\t\"theme\": \"dark\"\n}\n",
			"{\n\t\"theme\": \"dark\",\n\t\"mcpServers\": {\n\t\t\"tether\": {\n\t\t\t\"command\": \"/opt/tether/bin/tether\",\n\t\t\t\"args\": [\n\t\t\t\t\"connect\",\n\t\t\t\t\"--dir\",\n\t\t\t\t\"/home/ada/mcp\"\n\t\t\t]\n\t\t}\n\t}\n}\n"},
		{"empty servers", "claude-desktop", `{"mcpServers": {}}`, `{"mcpServers": {
  "tether": {
    "command": "/opt/tether/bin/tether",
    "args": [
      "connect",
      "--dir",
      "/home/ada/mcp"
    ]
  }
}}`},
		{"replaced, vscode JSONC comments and trailing commas kept", "vscode", `// my servers
{
  "servers": {
    /* old tether */
    "tether": {"command": "tether", "args": ["run", "--stdio"]},
    "mem": {"type": "stdio", "command": "npx", "args": ["@modelcontextprotocol/server-memory"],},
  },
  "inputs": [],
}
`, `// my servers
{
  "servers": {
    /* old tether */
    "tether": {
      "type": "stdio",
      "command": "/opt/tether/bin/tether",
      "args": [
        "connect",
        "--dir",
        "/home/ada/mcp"
      ]
    },
    "mem": {"type": "stdio", "command": "npx", "args": ["@modelcontextprotocol/server-memory"],},
  },
  "inputs": [],
}
`},
		{"new file", "claude-code", "", `{
  "mcpServers": {
    "tether": {
      "type": "stdio",
      "command": "/opt/tether/bin/tether",
      "args": [
        "connect",
        "--dir",
        "/home/ada/mcp"
      ]
    }
  }
}
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Clients[tt.client].Set([]byte(tt.in), "tether", tetherLaunch)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tt.want)
			}
			again, err := Clients[tt.client].Set(got, "tether", tetherLaunch)
			if err != nil || string(again) != string(got) {
				t.Fatalf("a second setup changed the file: %v\n%s", err, again)
			}
			if !json.Valid(stripJSONC(got)) {
				t.Fatalf("not JSON(C): %s", got)
			}
		})
	}
}

// TestSetKeepsByteOrderMark: a file a Windows editor saved with a UTF-8
// byte order mark keeps it, and is edited as any other.
func TestSetKeepsByteOrderMark(t *testing.T) {
	in := "\xEF\xBB\xBF{\"mcpServers\": {}}\n"
	got, err := Clients["claude-desktop"].Set([]byte(in), "tether", tetherLaunch)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "\xEF\xBB\xBF{\"mcpServers\": {\n  \"tether\": {") {
		t.Fatalf("got %q", got)
	}
}

// TestSetKeepsCRLF: in a file whose lines end in CRLF (Windows), the
// entry's lines do too, and every other byte stays.
func TestSetKeepsCRLF(t *testing.T) {
	in := "{\r\n  \"theme\": \"dark\",\r\n  \"mcpServers\": {\r\n    \"a\": {\"command\": \"x\"}\r\n  }\r\n}\r\n"
	got, err := Clients["claude-desktop"].Set([]byte(in), "tether", tetherLaunch)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "\n"); n != strings.Count(string(got), "\r\n") || n < 10 {
		t.Fatalf("lines of both kinds: %q", got)
	}
	want := strings.Replace(in, `{"command": "x"}`, `{"command": "x"},`+"\r\n    \"tether\": {", 1)
	if !strings.HasPrefix(string(got), want[:strings.Index(want, "tether")]) || !strings.HasSuffix(string(got), "}\r\n  }\r\n}\r\n") {
		t.Fatalf("got %q", got)
	}
}

// TestSetURL: clients that take streamable HTTP get the URL; Claude
// Desktop, which launches its servers, is refused one.
func TestSetURL(t *testing.T) {
	got, err := Clients["vscode"].Set(nil, "tether", Launch{URL: "http://127.0.0.1:8808/mcp"})
	if err != nil || !strings.Contains(string(got), `"type": "http"`) || !strings.Contains(string(got), `"url": "http://127.0.0.1:8808/mcp"`) {
		t.Fatalf("vscode with a URL: %v\n%s", err, got)
	}
	if _, err := Clients["claude-desktop"].Set(nil, "tether", Launch{URL: "http://127.0.0.1:8808/mcp"}); err == nil || !strings.Contains(err.Error(), "not a URL") {
		t.Fatalf("claude-desktop with a URL: %v", err)
	}
}

// TestSetRefusesOddFiles: what is not a configuration is refused with a
// reason, and nothing is produced.
func TestSetRefusesOddFiles(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"{\"mcpServers\": {", "line 1"},
		{"[1, 2]", "not a JSON object"},
		{"{\"mcpServers\": []}", `"mcpServers": not a JSON object`},
		{"{\"mcpServers\": {\"a\": 1, \"a\": 2}}", `"a" appears twice`},
	} {
		if _, err := Clients["cursor"].Set([]byte(tt.in), "tether", tetherLaunch); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Set(%q) = %v, want an error with %q", tt.in, err, tt.want)
		}
	}
}

// TestUnifiedDiff: --dry-run's diff shows the changed lines with three
// lines of context on each side, as diff -u does.
func TestUnifiedDiff(t *testing.T) {
	old := "1\n2\n3\n4\n5\n6\n7\n8\n9\n"
	updated := "1\n2\n3\n4\n5\nfive and a half\n6\n7\n8\n9\n"
	var b strings.Builder
	if err := UnifiedDiff(&b, "c.json", []byte(old), []byte(updated)); err != nil {
		t.Fatal(err)
	}
	want := "--- c.json\n+++ c.json (tether setup)\n@@ -3,6 +3,7 @@\n 3\n 4\n 5\n+five and a half\n 6\n 7\n 8\n"
	if b.String() != want {
		t.Fatalf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := UnifiedDiff(&b, "new.json", nil, []byte("{\n}\n")); err != nil {
		t.Fatal(err)
	}
	if want := "--- new.json\n+++ new.json (tether setup)\n@@ -0,0 +1,2 @@\n+{\n+}\n"; b.String() != want {
		t.Fatalf("a new file:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	if err := UnifiedDiff(&b, "c.json", []byte("a\nb\n"), []byte("a\nc\n")); err != nil {
		t.Fatal(err)
	}
	if want := "--- c.json\n+++ c.json (tether setup)\n@@ -1,2 +1,2 @@\n a\n-b\n+c\n"; b.String() != want {
		t.Fatalf("a replaced line:\n%s\nwant:\n%s", b.String(), want)
	}
}
