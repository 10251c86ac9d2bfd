package importer

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tether-mcp/tether/spec"
)

// Server is one server of a configuration, converted.
type Server struct {
	// Key is the server's name in the configuration.
	Key string
	// Name is its manifest name: Key as a DNS-1123 label.
	Name string
	// Conn is the manifest; nil when Err is set.
	Conn *spec.McpConnection
	// Secrets are the files the manifest reads with valueFrom.file.
	Secrets []Secret
	// Notes are what a person should know or do: renames, ignored fields,
	// variables tether does not expand, credentials left in arguments.
	Notes []string
	// Err says why the server could not be converted.
	Err error
	// Inline names the fields that keep a credential in the manifest (a
	// URL's query or user info, an argument): no field of those reads a
	// file, so the manifest is written mode 0600 instead of 0644.
	Inline []string
}

// Secret is one value moved out of a manifest into a file.
type Secret struct {
	// Field names what the value is for: "env GITHUB_TOKEN", "header Authorization".
	Field string
	// Path is the file, absolute (valueFrom.file is read from tether's
	// working directory).
	Path string
	// NeedsValue is set when the configuration holds no value to write
	// (a VS Code ${input:…} prompt, a variable inside a longer value): the
	// file is not created, and Hint says what a person must put there.
	NeedsValue bool
	Hint       string

	value string // what the file holds; never shown
}

// maxNameLen is the length limit of a DNS-1123 label.
const maxNameLen = 63

// converter carries what the conversion of one configuration shares.
type converter struct {
	cfg        *Config
	secretsDir string
	// usedSecrets holds the secret file names handed out, lower-cased.
	usedSecrets map[string]bool
}

// convert turns one raw server into a Server; name is already unique.
func (cv *converter) convert(raw RawServer, name string) *Server {
	s := &Server{Key: raw.Key, Name: name}
	switch {
	case ManifestName(raw.Key) != raw.Key:
		s.note("renamed from %q: manifest names are DNS-1123 labels (lower-case letters, digits, '-')", raw.Key)
	case name != raw.Key:
		s.note("renamed from %q: another server of the file takes that name", raw.Key)
	}
	if raw.Err != nil {
		s.Err = raw.Err
		return s
	}
	f := map[string]json.RawMessage{}
	for _, m := range raw.Fields {
		f[m.Key] = m.Value
	}
	str := func(key string) (string, error) {
		v, ok := f[key]
		if !ok {
			return "", nil
		}
		var out string
		if err := json.Unmarshal(v, &out); err != nil {
			return "", fmt.Errorf("%s: want a string", key)
		}
		return out, nil
	}
	var errs []error
	get := func(key string) string {
		v, err := str(key)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	command, cwd := get("command"), get("cwd")
	endpoint := get("url")
	if endpoint == "" {
		endpoint = get("serverUrl") // Windsurf
	}
	typ := strings.ToLower(get("type"))
	if typ == "" {
		typ = strings.ToLower(get("transportType")) // Cline
	}
	var args []string
	if v, ok := f["args"]; ok {
		if err := json.Unmarshal(v, &args); err != nil {
			errs = append(errs, errors.New("args: want an array of strings"))
		}
	}
	env, err := pairs(f["env"], "env")
	if err != nil {
		errs = append(errs, err)
	}
	headers, err := pairs(f["headers"], "headers")
	if err != nil {
		errs = append(errs, err)
	}
	var disabled bool
	if v, ok := f["disabled"]; ok {
		if err := json.Unmarshal(v, &disabled); err != nil {
			errs = append(errs, errors.New("disabled: want true or false"))
		}
	}
	if len(errs) > 0 {
		s.Err = errors.Join(errs...)
		return s
	}
	for _, m := range raw.Fields {
		switch m.Key {
		case "command", "args", "env", "cwd", "url", "serverUrl", "type", "transportType", "headers", "disabled":
		case "envFile":
			s.note("envFile ignored: tether reads no env files; copy its variables into spec.stdio.env (secrets with valueFrom.file)")
		default:
			s.note("%s ignored: tether has no equivalent", m.Key)
		}
	}

	conn := &spec.McpConnection{
		APIVersion: spec.APIVersion,
		Kind:       spec.Kind,
		Metadata:   spec.ObjectMeta{Name: name},
		Spec:       spec.Spec{Suspend: disabled},
	}
	if disabled {
		s.note("disabled in the configuration: the manifest has suspend: true")
	}
	switch transport, err := transportOf(typ, command, endpoint); {
	case err != nil:
		s.Err = err
		return s
	case transport == spec.TransportStdio:
		if endpoint != "" {
			s.note("url ignored: the server is started with its command")
		}
		if len(headers) > 0 {
			s.note("headers ignored: they apply to HTTP servers only")
		}
		st := &spec.StdioSpec{Command: command, Args: args, WorkingDir: cwd}
		if looksLikeCredential("", command) {
			s.keepsCredential("command")
		}
		s.unexpanded("command", command)
		for i, a := range args {
			s.unexpanded(fmt.Sprintf("args[%d]", i), a)
		}
		s.unexpanded("cwd", cwd)
		s.credentialArgs(args)
		for _, p := range env {
			st.Env = append(st.Env, cv.value(s, "env", p.name, p.value))
		}
		conn.Spec.Stdio = st
	default:
		if command != "" {
			s.note("command ignored: the server is reached at its url")
		}
		if len(env) > 0 {
			s.note("env ignored: it applies to servers tether starts (stdio) only")
		}
		if cwd != "" {
			s.note("cwd ignored: it applies to servers tether starts (stdio) only")
		}
		h := &spec.HTTPSpec{URL: endpoint}
		if transport == spec.TransportSSE {
			h.Transport = spec.TransportSSE
		}
		s.unexpanded("url", endpoint)
		if looksLikeCredential("", endpoint) {
			s.keepsCredential("url")
		}
		for _, p := range headers {
			h.Headers = append(h.Headers, cv.value(s, "header", p.name, p.value))
		}
		conn.Spec.HTTP = h
	}
	s.Conn = conn
	return s
}

func (s *Server) note(format string, args ...any) {
	s.Notes = append(s.Notes, fmt.Sprintf(format, args...))
}

type pair struct{ name, value string }

// pairs reads an env or headers object in file order.
func pairs(raw json.RawMessage, what string) ([]pair, error) {
	if raw == nil || string(raw) == "null" {
		return nil, nil
	}
	ms, err := members(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: want an object of names to values", what)
	}
	out := make([]pair, 0, len(ms))
	for _, m := range ms {
		v, ok := scalarString(m.Value)
		if !ok {
			return nil, fmt.Errorf("%s.%s: want a string", what, m.Key)
		}
		out = append(out, pair{m.Key, v})
	}
	return out, nil
}

// transportOf decides how a server is reached. Without a type, a command
// means stdio and a URL streamable HTTP, unless its path ends in /sse (the
// legacy transport's usual endpoint).
func transportOf(typ, command, endpoint string) (string, error) {
	switch typ {
	case "":
		switch {
		case command != "" && endpoint != "":
			return "", errors.New(`both command and url are set: add "type" to say which one to use`)
		case command != "":
			return spec.TransportStdio, nil
		case endpoint != "":
			if u, err := url.Parse(endpoint); err == nil && strings.HasSuffix(strings.TrimSuffix(u.Path, "/"), "/sse") {
				return spec.TransportSSE, nil
			}
			return spec.TransportStreamable, nil
		}
		return "", errors.New("neither command nor url is set")
	case "stdio":
		if command == "" {
			return "", errors.New(`type is "stdio" but command is not set`)
		}
		return spec.TransportStdio, nil
	case "http", "streamable", "streamable-http", "streamablehttp", "streamable_http":
		if endpoint == "" {
			return "", fmt.Errorf("type is %q but url is not set", typ)
		}
		return spec.TransportStreamable, nil
	case "sse":
		if endpoint == "" {
			return "", errors.New(`type is "sse" but url is not set`)
		}
		return spec.TransportSSE, nil
	}
	return "", fmt.Errorf("unsupported type %q (want stdio, http or sse)", typ)
}

// refPattern matches a variable reference: ${NAME}, ${env:NAME},
// ${input:id}, ${workspaceFolder}, ${NAME:-default}.
var refPattern = regexp.MustCompile(`\$\{([^{}]*)\}`)

// envRef matches the references that name an environment variable:
// ${env:Name} (VS Code, Cursor), or a bare upper-case ${NAME} with Claude
// Code's optional default. A bare lower- or camel-case name is an editor
// variable (${userHome}, ${workspaceFolder}), not the environment's.
var envRef = regexp.MustCompile(`^(?:env:([A-Za-z_][A-Za-z0-9_]*)|([A-Z_][A-Z0-9_]*)(:-.*)?)$`)

// value converts one env or header value (docs/contract.md §6).
func (cv *converter) value(s *Server, kind, name, val string) spec.EnvVar {
	field := kind + " " + name
	ev := spec.EnvVar{Name: name}
	refs := refPattern.FindAllStringSubmatchIndex(val, -1)
	whole := len(refs) == 1 && refs[0][0] == 0 && refs[0][1] == len(val)
	if whole {
		if m := envRef.FindStringSubmatch(val[2 : len(val)-1]); m != nil {
			env := m[1] + m[2]
			ev.ValueFrom = &spec.ValueFrom{Env: env}
			if m[3] != "" {
				s.note("%s: the default of ${%s:-…} is dropped: tether reads %s from its environment, which must set it", field, env, env)
			}
			return ev
		}
	}
	var inputs []string
	for _, r := range refs {
		ref := val[r[2]:r[3]]
		if id, ok := strings.CutPrefix(ref, "input:"); ok {
			inputs = append(inputs, id)
		}
	}
	credential := looksLikeCredential(name, val)
	if len(inputs) > 0 || (len(refs) > 0 && credential) {
		// Nothing to write: a person must supply the value.
		sec := Secret{Field: field, Path: cv.secretPath(s.Name, name), NeedsValue: true, Hint: cv.hint(val, inputs)}
		s.Secrets = append(s.Secrets, sec)
		ev.ValueFrom = &spec.ValueFrom{File: relSecret(sec.Path)}
		return ev
	}
	if len(refs) > 0 {
		s.unexpanded(field, val)
	}
	if credential && val != "" {
		sec := Secret{Field: field, Path: cv.secretPath(s.Name, name), value: val}
		s.Secrets = append(s.Secrets, sec)
		ev.ValueFrom = &spec.ValueFrom{File: relSecret(sec.Path)}
		return ev
	}
	ev.Value = &val
	return ev
}

// hint says what a value that needs a person is made of. A reference is
// no secret, so the template can be shown.
func (cv *converter) hint(template string, inputs []string) string {
	var b strings.Builder
	if refs := refPattern.FindAllStringIndex(template, -1); len(refs) == 1 && refs[0][0] == 0 && refs[0][1] == len(template) {
		fmt.Fprintf(&b, "the value of %s", template)
	} else {
		// The literal part may be half a credential: name the references
		// only, never the text around them.
		var names []string
		for _, r := range refs {
			names = append(names, template[r[0]:r[1]])
		}
		fmt.Fprintf(&b, "the config's value for this entry with %s filled in (its literal text is not repeated here)", strings.Join(names, ", "))
	}
	for _, id := range inputs {
		in, ok := cv.cfg.Inputs[id]
		switch {
		case !ok:
			fmt.Fprintf(&b, " (input %q is not declared in the file)", id)
		case in.Description != "":
			fmt.Fprintf(&b, " (input %q: %s)", id, in.Description)
		}
	}
	return b.String()
}

// unexpanded notes the references tether does not expand in a value kept
// as written.
func (s *Server) unexpanded(field, val string) {
	for _, r := range refPattern.FindAllStringSubmatch(val, -1) {
		if strings.HasPrefix(r[1], "input:") {
			s.note("%s: needs a value: tether cannot prompt for %s; edit the manifest", field, r[0])
		} else {
			s.note("%s: tether does not expand %s; edit the manifest", field, r[0])
		}
	}
}

// credentialWords are the name parts docs/contract.md §6 calls credential-looking.
var credentialWords = []string{"TOKEN", "SECRET", "KEY", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "AUTH", "COOKIE", "SESSION", "SIGNATURE", "PRIVATE"}

// credentialParts are credential-looking name parts that are too short to
// look for inside longer words (PAT in PATH, PASS in BYPASS): they count
// only as a whole part of a name cut on '_', '-' and '.'.
var credentialParts = []string{"PAT", "PASS", "PWD", "PW", "SIG", "APIKEY"}

// credentialPrefixes start values that are credentials whatever their
// name: bearer tokens and the token formats of well-known services.
var credentialPrefixes = []string{"Bearer ", "Basic ", "Token ", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxr-", "xapp-", "sk-", "sk_live_", "rk_live_", "AKIA", "ASIA", "AIza", "ya29.", "hf_", "npm_", "pypi-", "shpat_", "dop_v1_"}

func credentialName(name string) bool {
	n := strings.ToUpper(name)
	for _, w := range credentialWords {
		if strings.Contains(n, w) {
			return true
		}
	}
	for _, part := range strings.FieldsFunc(n, func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		for _, w := range credentialParts {
			if part == w {
				return true
			}
		}
	}
	return false
}

// looksLikeJWT reports a JSON Web Token: three base64url parts, the first
// a JSON object ("eyJ" is the base64 of `{"`).
func looksLikeJWT(val string) bool {
	return strings.HasPrefix(val, "eyJ") && strings.Count(val, ".") == 2 && !strings.ContainsAny(val, " /")
}

func looksLikeCredential(name, val string) bool {
	if credentialName(name) {
		return true
	}
	for _, p := range credentialPrefixes {
		if strings.HasPrefix(val, p) && len(val) > len(p) {
			return true
		}
	}
	if looksLikeJWT(val) {
		return true
	}
	// A credential inside a larger value: a JSON blob of headers
	// ({"Authorization": "Bearer …"}), a connection string with a password.
	return strings.Contains(val, "Bearer ") || strings.Contains(val, "Basic ") || urlHoldsCredential(val)
}

// credentialArgs notes arguments that look like credentials
// (--api-key=…, --token …, a token-shaped value). They stay as written:
// tether passes args verbatim and cannot read them from a file.
func (s *Server) credentialArgs(args []string) {
	for i, a := range args {
		flag, val, hasVal := strings.Cut(a, "=")
		switch {
		case strings.HasPrefix(a, "-") && hasVal && val != "" && !refPattern.MatchString(val) && looksLikeCredential(flag, val):
		case i > 0 && strings.HasPrefix(args[i-1], "-") && !strings.Contains(args[i-1], "=") && credentialName(args[i-1]) && !strings.HasPrefix(a, "-") && !refPattern.MatchString(a):
		case looksLikeCredential("", a):
		default:
			continue
		}
		s.keepsCredential(fmt.Sprintf("args[%d]", i))
	}
}

// keepsCredential records a field that holds a credential and cannot read
// it from a file: it stays in the manifest, which is then written mode
// 0600, and the note says what to do (docs/contract.md §6).
func (s *Server) keepsCredential(field string) {
	s.Inline = append(s.Inline, field)
	how := "pass it in env instead if the server reads it there"
	if field == "url" {
		how = "move it into a header if the server accepts one"
	}
	s.note("%s looks like it carries a credential; it stays in the manifest, which is written mode 0600 (only you can read it): do not commit it, or %s", field, how)
}

// urlHoldsCredential reports a password in the user info or a query
// parameter with a credential-looking name.
func urlHoldsCredential(raw string) bool {
	if !strings.Contains(raw, "://") {
		return false
	}
	u, err := url.Parse(raw)
	if err != nil {
		return false
	}
	if _, ok := u.User.Password(); ok {
		return true
	}
	for k := range u.Query() {
		if credentialName(k) {
			return true
		}
	}
	return false
}

// relSecret is how a manifest refers to a secret file: relative to the
// manifest's directory (tether resolves it there), so the imported tree can
// be moved or committed, secrets left out.
func relSecret(path string) string {
	return filepath.Join(SecretsDir, filepath.Base(path))
}

// secretPath is where the value of one env entry or header goes:
// <secrets>/<manifest name>.<entry name>. A manifest name has no '.', so
// two servers never share a file ("svc" + "x-key" and "svc-x" + "key" used
// to); names that differ only in case (API_KEY, api_key) get a suffix, for
// case-insensitive file systems.
func (cv *converter) secretPath(server, entry string) string {
	safe := strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 || r < ' ' {
			return '_'
		}
		return r
	}, entry)
	if safe == "." || safe == ".." {
		safe = "_"
	}
	name := server + "." + safe
	if cv.usedSecrets == nil {
		cv.usedSecrets = map[string]bool{}
	}
	for i := 2; cv.usedSecrets[strings.ToLower(name)]; i++ {
		name = fmt.Sprintf("%s.%s-%d", server, safe, i)
	}
	cv.usedSecrets[strings.ToLower(name)] = true
	return filepath.Join(cv.secretsDir, name)
}

// ManifestName turns a server's name into a DNS-1123 label: lower case,
// accented Latin letters without their accents, every run of other
// characters one '-', no '-' at either end, at most 63 characters. An
// empty result is "server".
func ManifestName(key string) string {
	var b strings.Builder
	dash := false
	for _, r := range latin(strings.ToLower(key)) {
		if ('a' <= r && r <= 'z') || ('0' <= r && r <= '9') {
			if dash && b.Len() > 0 {
				b.WriteByte('-')
			}
			dash = false
			b.WriteRune(r)
			continue
		}
		dash = true
	}
	name := b.String()
	if len(name) > maxNameLen {
		name = strings.TrimRight(name[:maxNameLen], "-")
	}
	if name == "" {
		name = "server"
	}
	return name
}

// uniqueNames gives every server a manifest name no other one has, adding
// -2, -3 … in file order.
func uniqueNames(servers []RawServer) []string {
	used := map[string]bool{}
	out := make([]string, len(servers))
	for i, s := range servers {
		base := ManifestName(s.Key)
		name := base
		for n := 2; used[name]; n++ {
			suffix := fmt.Sprintf("-%d", n)
			name = strings.TrimRight(base[:min(len(base), maxNameLen-len(suffix))], "-") + suffix
		}
		used[name] = true
		out[i] = name
	}
	return out
}

// latinFold maps the accented lower-case letters of Latin-1 and Latin
// Extended-A that names commonly hold to plain ASCII.
var latinFold = strings.NewReplacer(
	"à", "a", "á", "a", "â", "a", "ã", "a", "ä", "a", "å", "a", "ā", "a", "ą", "a", "æ", "ae",
	"ç", "c", "ć", "c", "č", "c", "ď", "d", "đ", "d",
	"è", "e", "é", "e", "ê", "e", "ë", "e", "ē", "e", "ę", "e", "ě", "e",
	"ì", "i", "í", "i", "î", "i", "ï", "i", "ī", "i", "ł", "l", "ľ", "l",
	"ñ", "n", "ń", "n", "ň", "n",
	"ò", "o", "ó", "o", "ô", "o", "õ", "o", "ö", "o", "ø", "o", "ō", "o", "ő", "o", "œ", "oe",
	"ř", "r", "ś", "s", "š", "s", "ß", "ss", "ť", "t",
	"ù", "u", "ú", "u", "û", "u", "ü", "u", "ū", "u", "ů", "u", "ű", "u",
	"ý", "y", "ÿ", "y", "ź", "z", "ż", "z", "ž", "z",
)

func latin(s string) string { return latinFold.Replace(s) }
