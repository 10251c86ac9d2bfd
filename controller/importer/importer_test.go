package importer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

func TestManifestName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"github", "github"},
		{"GitHub", "github"},
		{"Brave Search", "brave-search"},
		{"my_server.v2", "my-server-v2"},
		{"--edge--", "edge"},
		{"a  /  b", "a-b"},
		{"ünïcödé", "unicode"},
		{"Ωmega Straße", "mega-strasse"},
		{"日本語", "server"},
		{"", "server"},
		{strings.Repeat("a", 70), strings.Repeat("a", 63)},
		{strings.Repeat("a", 62) + "-b", strings.Repeat("a", 62)},
	}
	for _, tt := range tests {
		got := ManifestName(tt.in)
		if got != tt.want {
			t.Errorf("ManifestName(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestUniqueNames(t *testing.T) {
	long := strings.Repeat("x", 63)
	got := uniqueNames([]RawServer{{Key: "My Server"}, {Key: "my-server"}, {Key: "MY SERVER"}, {Key: long}, {Key: long + "y"}})
	want := []string{"my-server", "my-server-2", "my-server-3", long, strings.Repeat("x", 61) + "-2"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("uniqueNames = %v, want %v", got, want)
	}
}

func TestStripJSONC(t *testing.T) {
	tests := []struct{ in, want string }{
		{"{\"a\": 1, // c\n}", "{\"a\": 1      \n}"},
		{`{"a": "x // not a comment", /* b */ "c": [1,2,],}`, `{"a": "x // not a comment",         "c": [1,2 ] }`},
		{`{"a": "q\"//", "b": 1}`, `{"a": "q\"//", "b": 1}`},
		{"{/* multi\nline */}", "{        \n       }"},
	}
	for _, tt := range tests {
		if got := string(stripJSONC([]byte(tt.in))); got != tt.want {
			t.Errorf("stripJSONC(%q)\n got %q\nwant %q", tt.in, got, tt.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"syntax", "{\n  \"mcpServers\": {\n    \"a\": {}\n    \"b\": {}\n  }\n}", "line 4, column 5"},
		{"no servers", `{"other": 1}`, "no MCP servers found"},
		{"both formats", `{"mcpServers": {}, "servers": {}}`, "both"},
		{"servers not an object", `{"mcpServers": []}`, "want an object"},
		{"duplicate server", `{"mcpServers": {"a": {}, "a": {}}}`, `duplicate key "a"`},
		{"not an object", `[1]`, "not an object"},
		{"trailing garbage", `{"mcpServers": {}} x`, "after top-level value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.in))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestValues is docs/contract.md §6 on values, case by case: what each
// kind of env or header value becomes.
func TestValues(t *testing.T) {
	const dir = "/out/secrets"
	tests := []struct {
		name, entry, val string
		kind             string // env or header
		wantValue        string // plain value kept
		wantEnv          string // valueFrom.env
		wantFile         bool   // valueFrom.file with the value written
		wantNeeds        bool   // valueFrom.file, a person must write it
		wantNote         string
	}{
		{name: "plain", kind: "env", entry: "LOG_LEVEL", val: "debug", wantValue: "debug"},
		{name: "empty credential stays", kind: "env", entry: "API_TOKEN", val: "", wantValue: ""},
		{name: "token name", kind: "env", entry: "GITHUB_TOKEN", val: "abc", wantFile: true},
		{name: "lower-case key name", kind: "env", entry: "openai_api_key", val: "abc", wantFile: true},
		{name: "secret name", kind: "env", entry: "CLIENT_SECRET", val: "abc", wantFile: true},
		{name: "password name", kind: "env", entry: "DB_PASSWORD", val: "abc", wantFile: true},
		{name: "credential name", kind: "env", entry: "GOOGLE_APPLICATION_CREDENTIALS", val: "/x.json", wantFile: true},
		{name: "auth name", kind: "env", entry: "AUTH_HEADER", val: "abc", wantFile: true},
		{name: "authorization header", kind: "header", entry: "Authorization", val: "Bearer abc", wantFile: true},
		{name: "api key header", kind: "header", entry: "X-Api-Key", val: "abc", wantFile: true},
		{name: "token-shaped value", kind: "env", entry: "GH", val: "ghp_abcdef", wantFile: true},
		{name: "bearer inside a value", kind: "env", entry: "HEADERS", val: `{"Authorization": "Bearer x"}`, wantFile: true},
		{name: "password in a URL", kind: "env", entry: "DATABASE_URL", val: "postgres://u:p@h/db", wantFile: true},
		{name: "pass name", kind: "env", entry: "DB_PASS", val: "abc", wantFile: true},
		{name: "passwd name", kind: "env", entry: "MYSQL_PASSWD", val: "abc", wantFile: true},
		{name: "pat name", kind: "env", entry: "GITHUB_PAT", val: "abc", wantFile: true},
		{name: "PATH is no PAT", kind: "env", entry: "PATH", val: "/usr/bin", wantValue: "/usr/bin"},
		{name: "BYPASS is no PASS", kind: "env", entry: "PROXY_BYPASS", val: "localhost", wantValue: "localhost"},
		{name: "cookie header", kind: "header", entry: "Cookie", val: "sid=abc", wantFile: true},
		{name: "session name", kind: "env", entry: "SESSION_ID", val: "abc", wantFile: true},
		{name: "google key value", kind: "env", entry: "G", val: "AIzaSyFAKE", wantFile: true},
		{name: "jwt value", kind: "header", entry: "X-Id", val: "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln", wantFile: true},
		{name: "plain header", kind: "header", entry: "X-Team", val: "infra", wantValue: "infra"},
		{name: "${VAR}", kind: "env", entry: "GITHUB_TOKEN", val: "${GITHUB_TOKEN}", wantEnv: "GITHUB_TOKEN"},
		{name: "${env:VAR}", kind: "header", entry: "X-Api-Key", val: "${env:API_KEY}", wantEnv: "API_KEY"},
		{name: "${env:lower}", kind: "env", entry: "X", val: "${env:http_proxy}", wantEnv: "http_proxy"},
		{name: "${userHome} is no env var", kind: "env", entry: "HOME_DIR", val: "${userHome}", wantValue: "${userHome}", wantNote: "does not expand ${userHome}"},
		{name: "${VAR:-default}", kind: "env", entry: "URL", val: "${DB_URL:-postgres://x}", wantEnv: "DB_URL", wantNote: "default"},
		{name: "input", kind: "env", entry: "TOKEN", val: "${input:pat}", wantNeeds: true},
		{name: "input, not a credential name", kind: "env", entry: "REGION", val: "${input:region}", wantNeeds: true},
		{name: "input inside a value", kind: "header", entry: "Authorization", val: "Bearer ${input:pat}", wantNeeds: true},
		{name: "env inside a credential", kind: "header", entry: "Authorization", val: "Bearer ${env:T}", wantNeeds: true},
		{name: "workspaceFolder", kind: "env", entry: "DATA", val: "${workspaceFolder}/data", wantValue: "${workspaceFolder}/data", wantNote: "does not expand ${workspaceFolder}"},
		{name: "env inside a plain value", kind: "env", entry: "PATHS", val: "${env:HOME}/x", wantValue: "${env:HOME}/x", wantNote: "does not expand ${env:HOME}"},
		{name: "not a reference", kind: "env", entry: "PRICE", val: "$5 {x}", wantValue: "$5 {x}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cv := &converter{cfg: &Config{Inputs: map[string]Input{"pat": {ID: "pat", Description: "a PAT"}}}, secretsDir: dir}
			s := &Server{Name: "srv"}
			ev := cv.value(s, tt.kind, tt.entry, tt.val)
			if ev.Name != tt.entry {
				t.Errorf("name = %q", ev.Name)
			}
			switch {
			case tt.wantEnv != "":
				if ev.ValueFrom == nil || ev.ValueFrom.Env != tt.wantEnv || ev.Value != nil {
					t.Errorf("got %+v %+v, want valueFrom.env %s", ev.Value, ev.ValueFrom, tt.wantEnv)
				}
			case tt.wantFile || tt.wantNeeds:
				want := filepath.Join(SecretsDir, "srv."+tt.entry)
				if ev.ValueFrom == nil || ev.ValueFrom.File != want || ev.Value != nil {
					t.Fatalf("got %+v %+v, want valueFrom.file %s", ev.Value, ev.ValueFrom, want)
				}
				if len(s.Secrets) != 1 || s.Secrets[0].NeedsValue != tt.wantNeeds {
					t.Fatalf("secrets = %+v, want one with NeedsValue %v", s.Secrets, tt.wantNeeds)
				}
				sec := s.Secrets[0]
				if tt.wantFile && sec.value != tt.val {
					t.Errorf("secret file would hold %q, want the value", sec.value)
				}
				if tt.wantNeeds {
					// The hint names every reference and repeats no literal
					// text of the value: that may be half a credential.
					if sec.value != "" {
						t.Errorf("needs-value secret holds %q", sec.value)
					}
					for _, ref := range refPattern.FindAllString(tt.val, -1) {
						if !strings.Contains(sec.Hint, ref) {
							t.Errorf("hint %q does not name %s", sec.Hint, ref)
						}
					}
					if lit := strings.TrimSpace(refPattern.ReplaceAllString(tt.val, "")); lit != "" && strings.Contains(sec.Hint, lit) {
						t.Errorf("hint %q repeats the literal text %q", sec.Hint, lit)
					}
				}
			default:
				if ev.Value == nil || *ev.Value != tt.wantValue || ev.ValueFrom != nil {
					t.Errorf("got %+v %+v, want value %q", ev.Value, ev.ValueFrom, tt.wantValue)
				}
				if len(s.Secrets) != 0 {
					t.Errorf("secrets = %+v, want none", s.Secrets)
				}
			}
			notes := strings.Join(s.Notes, "\n")
			if (tt.wantNote == "") != (notes == "") || !strings.Contains(notes, tt.wantNote) {
				t.Errorf("notes = %q, want %q", notes, tt.wantNote)
			}
			if tt.val != "" && (tt.wantFile) && strings.Contains(notes+sec(s), tt.val) {
				t.Errorf("a secret value appears in notes or hints")
			}
		})
	}
}

func sec(s *Server) string {
	var b strings.Builder
	for _, x := range s.Secrets {
		b.WriteString(x.Hint + x.Field + x.Path)
	}
	return b.String()
}

func TestTransportOf(t *testing.T) {
	tests := []struct {
		typ, command, url string
		want, err         string
	}{
		{"", "npx", "", spec.TransportStdio, ""},
		{"", "", "https://h/mcp", spec.TransportStreamable, ""},
		{"", "", "https://h/sse", spec.TransportSSE, ""},
		{"", "", "https://h/sse/", spec.TransportSSE, ""},
		{"", "", "https://h/sse?x=1", spec.TransportSSE, ""},
		{"", "", "https://h/assets", spec.TransportStreamable, ""},
		{"http", "", "https://h/sse", spec.TransportStreamable, ""},
		{"streamable-http", "", "https://h/x", spec.TransportStreamable, ""},
		{"sse", "", "https://h/events", spec.TransportSSE, ""},
		{"stdio", "srv", "https://h/x", spec.TransportStdio, ""},
		{"", "srv", "https://h/x", "", "both command and url"},
		{"", "", "", "", "neither command nor url"},
		{"stdio", "", "https://h/x", "", "command is not set"},
		{"http", "srv", "", "", "url is not set"},
		{"sse", "", "", "", "url is not set"},
		{"websocket", "", "ws://h", "", `unsupported type "websocket"`},
	}
	for _, tt := range tests {
		got, err := transportOf(tt.typ, tt.command, tt.url)
		if got != tt.want || (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("transportOf(%q, %q, %q) = %q, %v; want %q, %q", tt.typ, tt.command, tt.url, got, err, tt.want, tt.err)
		}
	}
}

func TestCredentialArgs(t *testing.T) {
	tests := []struct {
		args []string
		want string // indexes noted
	}{
		{[]string{"-y", "pkg", "--tools=all"}, ""},
		{[]string{"--api-key=sk_x"}, "0"},
		{[]string{"--token", "abc", "--verbose"}, "1"},
		{[]string{"--token", "${env:T}"}, ""},
		{[]string{"--api-key=${API_KEY}"}, ""},
		{[]string{"--auth"}, ""},
		{[]string{"run", "ghp_abcdef"}, "1"},
		{[]string{"postgresql://u:pw@h/db"}, "0"},
		{[]string{"postgresql://h/db"}, ""},
		{[]string{"--pass", "hunter2"}, "1"},
		{[]string{"--jwt=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2ln"}, "0"},
	}
	for _, tt := range tests {
		s := &Server{}
		s.credentialArgs(tt.args)
		var got []string
		for _, n := range s.Notes {
			got = append(got, strings.TrimSuffix(strings.TrimPrefix(strings.Fields(n)[0], "args["), "]"))
			for _, a := range tt.args {
				if strings.Contains(n, a) {
					t.Errorf("note %q repeats the argument %q", n, a)
				}
			}
		}
		if strings.Join(got, ",") != tt.want {
			t.Errorf("credentialArgs(%q) noted %v, want %q", tt.args, got, tt.want)
		}
	}
}

// TestExamplesImport keeps the sample configurations of examples/import
// importable: every server converts and every manifest validates.
func TestExamplesImport(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "examples", "import", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("found %d sample configurations in examples/import, want one per format", len(files))
	}
	formats := map[Format]bool{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p, err := NewPlan(data, Options{Source: filepath.Base(f), OutDir: t.TempDir()})
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		formats[p.Format] = true
		for _, s := range p.Servers {
			if s.Err != nil {
				t.Errorf("%s: server %s: %v", f, s.Key, s.Err)
			}
		}
		if err := p.Write(false); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	for _, want := range []Format{FormatMCPServers, FormatVSCode} {
		if !formats[want] {
			t.Errorf("no sample configuration of the %q format", want)
		}
	}
}

// TestSecretFilesNeverShared: server names may hold '-', so "<server>-<entry>"
// once gave "svc"+"x-api-key" and "svc-x"+"api-key" one file, and one
// server's credential went to the other. Entry names differing only in case
// must not share a file on a case-insensitive file system either.
func TestSecretFilesNeverShared(t *testing.T) {
	cfg := `{"mcpServers": {
		"svc":   {"url": "https://a.example.com/mcp", "headers": {"x-api-key": "key-of-svc"}},
		"svc-x": {"url": "https://b.example.com/mcp", "headers": {"api-key": "key-of-svc-x"}},
		"case":  {"command": "srv", "env": {"API_KEY": "upper-key", "api_key": "lower-key"}}
	}}`
	p, err := NewPlan([]byte(cfg), Options{Source: "test.json", OutDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, s := range p.Servers {
		for _, sec := range s.Secrets {
			key := strings.ToLower(sec.Path)
			if other, ok := seen[key]; ok {
				t.Errorf("%s and %s share the secret file %s", other, s.Name+"/"+sec.Field, sec.Path)
			}
			seen[key] = s.Name + "/" + sec.Field
		}
	}
	if len(seen) != 4 {
		t.Errorf("secret files = %v, want 4", seen)
	}
}

// TestInlineCredentials: a server whose credential sits in a field that
// cannot read a file (url, command, an argument) is marked Inline, so its
// manifest is written 0600, with a note naming the field; the others are
// not, and Write sets the modes accordingly.
func TestInlineCredentials(t *testing.T) {
	cfg := `{"mcpServers": {
		"query":   {"url": "https://a.example.com/mcp?access_token=x"},
		"command": {"command": "ghp_abcdef"},
		"args":    {"command": "srv", "args": ["--token", "abc"]},
		"plain":   {"url": "https://b.example.com/mcp?page=2", "headers": {"Authorization": "Bearer x"}}
	}}`
	out := t.TempDir()
	p, err := NewPlan([]byte(cfg), Options{Source: "test.json", OutDir: out})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"query": "url", "command": "command", "args": "args[1]", "plain": ""}
	for _, s := range p.Servers {
		got := strings.Join(s.Inline, ",")
		if got != want[s.Name] {
			t.Errorf("%s: Inline = %q, want %q", s.Name, got, want[s.Name])
		}
		if got != "" && !strings.Contains(strings.Join(s.Notes, "\n"), got+" looks like it carries a credential; it stays in the manifest, which is written mode 0600") {
			t.Errorf("%s: no note says the manifest keeps %s and is written 0600: %q", s.Name, got, s.Notes)
		}
	}
	if err := p.Write(false); err != nil {
		t.Fatal(err)
	}
	for name, field := range want {
		fi, err := os.Stat(filepath.Join(out, name+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		wantMode := os.FileMode(0o644)
		if field != "" {
			wantMode = 0o600
		}
		if fi.Mode().Perm() != wantMode {
			t.Errorf("%s.yaml: mode %04o, want %04o", name, fi.Mode().Perm(), wantMode)
		}
	}
}
