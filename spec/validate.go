package spec

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// validate checks every rule of docs/contract.md §1 that needs no I/O and records each
// problem on d. Fields whose value already failed to decode are skipped: the
// decoder has said what is wrong with them.
func validate(c *McpConnection, d *docDecoder) {
	v := validator{d: d}
	switch {
	case c.APIVersion == "":
		v.errorf("apiVersion", "required (want %q)", APIVersion)
	case c.APIVersion != APIVersion:
		// The value is not quoted, here or for kind and metadata.name: a
		// "manifest" that is a symlink to a credential file would have
		// its secret printed in validate's output, the log and status.
		v.errorf("apiVersion", "unsupported apiVersion (want %q)", APIVersion)
	}
	switch {
	case c.Kind == "":
		v.errorf("kind", "required (want %q)", Kind)
	case c.Kind != Kind:
		v.errorf("kind", "unsupported kind (want %q)", Kind)
	}
	v.metadata(&c.Metadata)
	v.spec(&c.Spec)
}

type validator struct{ d *docDecoder }

// errorf records a problem about field unless the decoder already reported
// that field or one that contains it.
func (v validator) errorf(field, format string, args ...any) {
	if v.d.failed[""] {
		return // the document is not a mapping: nothing below it was read
	}
	for p := field; ; {
		if v.d.failed[p] {
			return
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	v.d.errorAt(v.lineOf(field), field, fmt.Sprintf(format, args...))
}

// lineOf is the line of the field, or of the nearest field around it that
// was present, or the document's start.
func (v validator) lineOf(field string) int {
	for p := field; p != ""; {
		if l, ok := v.d.lines[p]; ok {
			return l
		}
		i := strings.LastIndexAny(p, ".[")
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return v.d.docLine
}

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
	labelName        = regexp.MustCompile(`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`)
	toolPrefixChars  = regexp.MustCompile(`^[A-Za-z0-9_.-]*$`)
	secretKey        = regexp.MustCompile(`^[-._a-zA-Z0-9]+$`)
)

const (
	maxNameLen       = 63
	maxToolPrefixLen = 64
	maxSubdomainLen  = 253
)

func (v validator) metadata(m *ObjectMeta) {
	switch {
	case m.Name == "":
		v.errorf("metadata.name", "required")
	case len(m.Name) > maxNameLen || !dns1123Label.MatchString(m.Name):
		v.errorf("metadata.name", "invalid name: must be a DNS-1123 label (at most %d characters: lowercase letters, digits and '-', starting and ending with a letter or digit)", maxNameLen)
	}
	for _, k := range sortedKeys(m.Labels) {
		field := joinKey("metadata.labels", k)
		if msg := labelKeyProblem(k); msg != "" {
			v.errorf(field, "invalid label key: %s", msg)
		}
		if val := m.Labels[k]; val != "" && (len(val) > maxNameLen || !labelName.MatchString(val)) {
			v.errorf(field, "invalid label value: must be at most %d characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit", maxNameLen)
		}
	}
}

// labelKeyProblem checks a Kubernetes label key: an optional DNS subdomain
// prefix and "/", then a name.
func labelKeyProblem(k string) string {
	prefix, name, hasPrefix := strings.Cut(k, "/")
	if !hasPrefix {
		name, prefix = prefix, ""
	}
	switch {
	case hasPrefix && (prefix == "" || len(prefix) > 253 || !dns1123Subdomain.MatchString(prefix)):
		return "the prefix before '/' must be a DNS subdomain (lowercase letters, digits, '-' and '.')"
	case name == "":
		return "the name is empty"
	case len(name) > maxNameLen || !labelName.MatchString(name):
		return fmt.Sprintf("the name must be at most %d characters of letters, digits, '-', '_' and '.', starting and ending with a letter or digit", maxNameLen)
	}
	return ""
}

func (v validator) spec(s *Spec) {
	var set []string
	for _, t := range []struct {
		name string
		set  bool
	}{{"stdio", s.Stdio != nil}, {"http", s.HTTP != nil}, {"container", s.Container != nil}} {
		if t.set {
			set = append(set, t.name)
		}
	}
	switch {
	case len(set) == 0:
		if v.d.failed["spec.stdio"] || v.d.failed["spec.http"] || v.d.failed["spec.container"] {
			break // one was there, but unreadable: that is the problem to fix
		}
		v.errorf("spec", "exactly one of stdio, http or container is required")
	case len(set) > 1:
		v.errorf("spec", "%s are mutually exclusive: set exactly one", strings.Join(set, " and "))
	}
	if s.Stdio != nil {
		v.stdio(s.Stdio)
	}
	if s.HTTP != nil {
		v.http(s.HTTP)
	}
	if s.Container != nil {
		v.container(s.Container)
	}
	if s.ToolPrefix != nil {
		p := *s.ToolPrefix
		if len(p) > maxToolPrefixLen || !toolPrefixChars.MatchString(p) {
			v.errorf("spec.toolPrefix", "invalid prefix %s: must be at most %d characters of letters, digits, '_', '-' and '.' (tool names are <prefix>_<tool>)", truncateQuote(p), maxToolPrefixLen)
		}
	}
	if s.Tools != nil {
		v.globs("spec.tools.allow", s.Tools.Allow)
		v.globs("spec.tools.deny", s.Tools.Deny)
	}
	if hc := s.HealthCheck; hc != nil {
		v.positive("spec.healthCheck.interval", hc.Interval)
		v.positive("spec.healthCheck.timeout", hc.Timeout)
		if hc.FailureThreshold != nil && *hc.FailureThreshold < 1 {
			v.errorf("spec.healthCheck.failureThreshold", "must be at least 1, got %d", *hc.FailureThreshold)
		}
	}
	if b := s.Backoff; b != nil {
		okInitial := v.positive("spec.backoff.initial", b.Initial)
		okMax := v.positive("spec.backoff.max", b.Max)
		if okInitial && okMax && s.BackoffMax() < s.BackoffInitial() {
			if b.Max != nil {
				v.errorf("spec.backoff.max", "%s is less than backoff.initial (%s)", s.BackoffMax(), s.BackoffInitial())
			} else {
				v.errorf("spec.backoff.initial", "%s is more than the default backoff.max (%s): set max too", s.BackoffInitial(), s.BackoffMax())
			}
		}
	}
	v.positive("spec.callTimeout", s.CallTimeout)
	if l := s.Lifecycle; l != nil {
		switch l.Mode {
		case "", LifecycleAlways, LifecycleOnDemand:
		default:
			v.errorf("spec.lifecycle.mode", "%s is not %s or %s", truncateQuote(l.Mode), LifecycleAlways, LifecycleOnDemand)
		}
		if v.positive("spec.lifecycle.idleTimeout", l.IdleTimeout) && l.IdleTimeout != nil && l.Mode != LifecycleOnDemand {
			v.errorf("spec.lifecycle.idleTimeout", "applies to mode %s only", LifecycleOnDemand)
		}
	}
}

// positive checks an optional duration; it reports whether the value (or
// its absence) is fine.
func (v validator) positive(field string, d *Duration) bool {
	if d == nil {
		return true
	}
	if d.Duration <= 0 {
		v.errorf(field, "must be positive, got %s", d.Duration)
		return false
	}
	return true
}

func (v validator) globs(field string, patterns []string) {
	for i, p := range patterns {
		f := fmt.Sprintf("%s[%d]", field, i)
		if p == "" {
			v.errorf(f, "empty pattern")
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			v.errorf(f, "invalid glob %s: %v", truncateQuote(p), err)
		}
	}
}

func (v validator) stdio(s *StdioSpec) {
	switch {
	case s.Command == "":
		v.errorf("spec.stdio.command", "required")
	case strings.ContainsRune(s.Command, 0):
		v.errorf("spec.stdio.command", "must not contain a NUL character")
	}
	for i, a := range s.Args {
		if strings.ContainsRune(a, 0) {
			v.errorf(fmt.Sprintf("spec.stdio.args[%d]", i), "must not contain a NUL character")
		}
	}
	if strings.ContainsRune(s.WorkingDir, 0) {
		v.errorf("spec.stdio.workingDir", "must not contain a NUL character")
	}
	v.values("spec.stdio.env", s.Env, envNameProblem, envValueProblem)
	if s.Sandbox != nil {
		v.sandbox("spec.stdio.sandbox", s.Sandbox)
	}
}

func (v validator) http(h *HTTPSpec) {
	if h.URL == "" {
		v.errorf("spec.http.url", "required")
	} else if msg := urlProblem(h.URL); msg != "" {
		v.errorf("spec.http.url", "%s", msg)
	}
	switch h.Transport {
	case "", TransportStreamable, TransportSSE:
	default:
		v.errorf("spec.http.transport", "unsupported transport %s (want %q or %q)", truncateQuote(h.Transport), TransportStreamable, TransportSSE)
	}
	v.values("spec.http.headers", h.Headers, headerNameProblem, headerValueProblem)
	if h.OAuth != nil {
		v.oauth(h)
	}
}

// oauth checks spec.http.oauth: exactly one flow, its client and scopes,
// and no Authorization header of the manifest's own beside it.
func (v validator) oauth(h *HTTPSpec) {
	const field = "spec.http.oauth"
	o := h.OAuth
	for i, hd := range h.Headers {
		if strings.EqualFold(hd.Name, "Authorization") {
			v.errorf(fmt.Sprintf("spec.http.headers[%d].name", i), "an Authorization header and spec.http.oauth exclude each other: with oauth, tether sends the access token as the Authorization header")
		}
	}
	switch {
	case o.ClientCredentials == nil && o.AuthorizationCode == nil:
		if !v.d.failed[field+".clientCredentials"] && !v.d.failed[field+".authorizationCode"] {
			v.errorf(field, "exactly one of clientCredentials or authorizationCode is required")
		}
	case o.ClientCredentials != nil && o.AuthorizationCode != nil:
		v.errorf(field, "clientCredentials and authorizationCode are mutually exclusive: set exactly one")
	}
	if cc := o.ClientCredentials; cc != nil {
		f := field + ".clientCredentials"
		v.clientID(f+".clientID", cc.ClientID, true)
		if cc.ClientSecret == (SecretValue{}) {
			if !v.d.failed[f+".clientSecret"] {
				v.errorf(f+".clientSecret", "required (the client credentials grant needs a confidential client)")
			}
		} else {
			v.secret(f+".clientSecret", &cc.ClientSecret)
		}
		v.scopes(f+".scopes", cc.Scopes)
	}
	if ac := o.AuthorizationCode; ac != nil {
		f := field + ".authorizationCode"
		isURL := v.clientID(f+".clientID", ac.ClientID, false)
		if ac.ClientSecret != nil {
			switch {
			case ac.ClientID == "":
				v.errorf(f+".clientSecret", "needs clientID: a secret belongs to a client registered beforehand")
			case isURL:
				v.errorf(f+".clientSecret", "a client ID metadata document (a clientID that is a URL) is a public client: it has no secret")
			default:
				v.secret(f+".clientSecret", ac.ClientSecret)
			}
		}
		v.scopes(f+".scopes", ac.Scopes)
	}
}

// clientID checks an OAuth client ID; isURL reports one that names a client
// ID metadata document (an https:// URL).
func (v validator) clientID(field, id string, required bool) (isURL bool) {
	switch {
	case id == "":
		if required {
			v.errorf(field, "required")
		}
		return false
	case required && (strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://")):
		v.errorf(field, "a client ID that is a URL names a client ID metadata document, which is for authorizationCode; clientCredentials needs a client ID registered with the authorization server")
		return false
	case strings.HasPrefix(id, "https://"):
		u, err := url.Parse(id)
		if err == nil && u.Host != "" {
			if msg := hostPortProblem(u); msg != "" {
				v.errorf(field, "a client ID that is a URL names a client ID metadata document: %s", msg)
				return true
			}
		}
		if err != nil || u.Host == "" || u.Path == "" || u.Path == "/" {
			v.errorf(field, "a client ID that is a URL names a client ID metadata document: it must be an https:// URL with a path, such as https://example.com/tether.json")
		}
		return true
	case strings.HasPrefix(id, "http://"):
		v.errorf(field, "a client ID that is a URL names a client ID metadata document, which must be served over https://")
		return true
	}
	for _, r := range id {
		if r < 0x20 || r == 0x7f {
			v.errorf(field, "must not contain control characters")
			break
		}
	}
	return false
}

// secret checks a SecretValue: exactly one of value and valueFrom. The value
// is never quoted.
func (v validator) secret(field string, s *SecretValue) {
	switch {
	case s.Value == nil && s.ValueFrom == nil:
		v.errorf(field, "exactly one of value or valueFrom is required")
	case s.Value != nil && s.ValueFrom != nil:
		v.errorf(field, "value and valueFrom are mutually exclusive: set exactly one")
	case s.Value != nil:
		if msg := headerValueProblem(*s.Value); msg != "" {
			v.errorf(field+".value", "%s", msg)
		}
	default:
		v.valueFrom(field+".valueFrom", s.ValueFrom)
	}
}

// scopes checks OAuth scope tokens (RFC 6749 §3.3): printable ASCII but
// space, '"' and '\', each once.
func (v validator) scopes(field string, list []string) {
	seen := map[string]int{}
	for i, sc := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		if sc == "" {
			v.errorf(f, "empty scope")
			continue
		}
		if !validScope(sc) {
			v.errorf(f, "invalid scope %s: a scope is printable ASCII without spaces, '\"' or '\\' (list several scopes as several items)", truncateQuote(sc))
			continue
		}
		if first, dup := seen[sc]; dup {
			v.errorf(f, "duplicate scope %s (also %s[%d])", truncateQuote(sc), field, first)
			continue
		}
		seen[sc] = i
	}
}

func validScope(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// urlProblem checks an http(s) URL. It does not echo the URL: a query or
// user-info part may carry a credential.
func urlProblem(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "invalid URL: " + err.Error()
	}
	switch {
	case u.Scheme == "":
		return "invalid URL: no scheme (want http:// or https://)"
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Sprintf("unsupported scheme %s (want http or https)", truncateQuote(u.Scheme))
	case u.Host == "":
		return "invalid URL: no host"
	}
	return hostPortProblem(u)
}

// hostPortProblem checks what url.Parse lets through in a URL's authority:
// a port out of 1–65535 (it checks only that a port is digits), and a port
// without a host name. Like urlProblem it does not echo the URL.
func hostPortProblem(u *url.URL) string {
	if u.Hostname() == "" {
		return "invalid URL: no host name before the port"
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return "invalid URL: the port must be a number from 1 to 65535"
		}
	}
	return ""
}

// values checks env vars or headers: names valid and unique, exactly one of
// value / valueFrom, valueFrom exactly one of file / env / secretKeyRef. A
// value is never quoted in a message: every value is a secret.
func (v validator) values(field string, list []EnvVar, nameProblem func(string) string, valueProblem func(string) string) {
	seen := map[string]int{}
	for i, e := range list {
		f := fmt.Sprintf("%s[%d]", field, i)
		switch {
		case e.Name == "":
			v.errorf(f+".name", "required")
		default:
			if msg := nameProblem(e.Name); msg != "" {
				v.errorf(f+".name", "%s", msg)
			}
			key := e.Name
			if field == "spec.http.headers" {
				key = strings.ToLower(key) // header names are case-insensitive
			}
			if first, dup := seen[key]; dup {
				v.errorf(f+".name", "duplicate name %s (also %s[%d])", truncateQuote(e.Name), field, first)
			} else {
				seen[key] = i
			}
		}
		switch {
		case e.Value == nil && e.ValueFrom == nil:
			v.errorf(f, "exactly one of value or valueFrom is required")
		case e.Value != nil && e.ValueFrom != nil:
			v.errorf(f, "value and valueFrom are mutually exclusive: set exactly one")
		case e.Value != nil:
			if msg := valueProblem(*e.Value); msg != "" {
				v.errorf(f+".value", "%s", msg)
			}
		default:
			v.valueFrom(f+".valueFrom", e.ValueFrom)
		}
	}
}

func (v validator) valueFrom(field string, vf *ValueFrom) {
	var set []string
	if vf.File != "" {
		set = append(set, "file")
	}
	if vf.Env != "" {
		set = append(set, "env")
	}
	if vf.SecretKeyRef != nil {
		set = append(set, "secretKeyRef")
	}
	switch {
	case len(set) == 0:
		v.errorf(field, "exactly one of file, env or secretKeyRef is required")
		return
	case len(set) > 1:
		v.errorf(field, "%s are mutually exclusive: set exactly one", strings.Join(set, " and "))
		return
	}
	switch {
	case vf.File != "":
		if strings.ContainsRune(vf.File, 0) {
			v.errorf(field+".file", "must not contain a NUL character")
		}
	case vf.Env != "":
		if msg := envNameProblem(vf.Env); msg != "" {
			v.errorf(field+".env", "%s", msg)
		}
	default:
		ref := vf.SecretKeyRef
		switch {
		case ref.Name == "":
			v.errorf(field+".secretKeyRef.name", "required")
		case len(ref.Name) > maxSubdomainLen || !dns1123Subdomain.MatchString(ref.Name):
			v.errorf(field+".secretKeyRef.name", "invalid Secret name %s: must be a DNS-1123 subdomain (at most %d characters: lowercase letters, digits, '-' and '.')", truncateQuote(ref.Name), maxSubdomainLen)
		}
		switch {
		case ref.Key == "":
			v.errorf(field+".secretKeyRef.key", "required")
		case len(ref.Key) > maxSubdomainLen || !secretKey.MatchString(ref.Key):
			v.errorf(field+".secretKeyRef.key", "invalid Secret key %s: must be at most %d characters of letters, digits, '-', '_' and '.'", truncateQuote(ref.Key), maxSubdomainLen)
		}
	}
}

func envNameProblem(name string) string {
	if strings.ContainsAny(name, "=\x00") {
		return fmt.Sprintf("invalid environment variable name %s: must not contain '=' or NUL", truncateQuote(name))
	}
	return ""
}

func envValueProblem(val string) string {
	if strings.ContainsRune(val, 0) {
		return "must not contain a NUL character"
	}
	return ""
}

func headerNameProblem(name string) string {
	for _, r := range name {
		if r >= 0x80 || !isTokenChar(byte(r)) {
			return fmt.Sprintf("invalid header name %s: must be an HTTP token (letters, digits and !#$%%&'*+-.^_`|~)", truncateQuote(name))
		}
	}
	return ""
}

func headerValueProblem(val string) string {
	if strings.ContainsAny(val, "\r\n\x00") {
		return "must not contain CR, LF or NUL"
	}
	return ""
}

// isTokenChar reports whether c may appear in an HTTP token (RFC 9110 §5.6.2).
func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}

var (
	// imageRef is what a container image's reference may be made of; the
	// first character is never '-', so that an image cannot pass for an
	// option of the runtime's command.
	imageRef = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/:@+-]*$`)
	// networkName is a Docker network's name (its own rule).
	networkName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)
	// secretFileName is a file name of /run/secrets.
	secretFileName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	// containerUser is a user name or uid, with an optional group.
	containerUser = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]*)?$`)
)

// maxImageRefLen bounds an image reference (Docker's own bound is 255 for
// the name alone; a tag and a digest add to it).
const maxImageRefLen = 512

func (v validator) container(c *ContainerSpec) {
	const f = "spec.container"
	switch {
	case c.Image == "":
		v.errorf(f+".image", "required")
	case len(c.Image) > maxImageRefLen || !imageRef.MatchString(c.Image):
		v.errorf(f+".image", "invalid image reference %s: letters, digits and '.', '_', '/', ':', '@', '+', '-', starting with a letter or digit (at most %d characters)", truncateQuote(c.Image), maxImageRefLen)
	}
	for i, a := range c.Command {
		if strings.ContainsRune(a, 0) {
			v.errorf(fmt.Sprintf("%s.command[%d]", f, i), "must not contain a NUL character")
		}
	}
	if c.Command != nil && len(c.Command) == 0 {
		v.errorf(f+".command", "empty: leave it out to run the image's entrypoint")
	} else if len(c.Command) > 0 && c.Command[0] == "" {
		v.errorf(f+".command[0]", "the program to run is empty")
	}
	for i, a := range c.Args {
		if strings.ContainsRune(a, 0) {
			v.errorf(fmt.Sprintf("%s.args[%d]", f, i), "must not contain a NUL character")
		}
	}
	v.values(f+".env", c.Env, envNameProblem, envValueProblem)
	v.values(f+".secretFiles", c.SecretFiles, secretFileNameProblem, envValueProblem)
	switch n := c.Network; {
	case n == "", n == ContainerNetworkNone, n == ContainerNetworkBridge:
	case n == "host":
		v.errorf(f+".network", "host is refused: it would give the server the host's network, loopback services included (use bridge or a network of your own)")
	case len(n) > maxSubdomainLen || !networkName.MatchString(n):
		v.errorf(f+".network", "invalid network %s: none, bridge or a network's name (letters, digits, '_', '.' and '-', starting with a letter or digit)", truncateQuote(n))
	}
	switch {
	case c.Port < 0 || c.Port > 65535:
		v.errorf(f+".port", "must be a port from 1 to 65535, got %d", c.Port)
	case c.Port > 0 && c.NetworkMode() == ContainerNetworkNone:
		v.errorf(f+".port", "needs a network: with network none nothing can reach the port (set network: bridge or a network's name)")
	}
	switch {
	case c.Path != "" && c.Port == 0:
		v.errorf(f+".path", "applies only with port (a server on stdin and stdout has no path)")
	case c.Path != "" && (!strings.HasPrefix(c.Path, "/") || strings.ContainsAny(c.Path, "?# \t\r\n\x00")):
		v.errorf(f+".path", "must be an absolute URL path such as /mcp (no query, fragment or spaces)")
	}
	targets := map[string]int{}
	for i, m := range c.Mounts {
		mf := fmt.Sprintf("%s.mounts[%d]", f, i)
		switch {
		case m.Source == "":
			v.errorf(mf+".source", "required")
		case strings.ContainsRune(m.Source, 0):
			v.errorf(mf+".source", "must not contain a NUL character")
		}
		t := path.Clean(m.Target)
		switch {
		case m.Target == "":
			v.errorf(mf+".target", "required")
		case !strings.HasPrefix(m.Target, "/") || strings.ContainsRune(m.Target, 0):
			v.errorf(mf+".target", "must be an absolute path in the container")
		case t == "/":
			v.errorf(mf+".target", "must not be the container's root")
		case t == ContainerInitDir || strings.HasPrefix(t, ContainerInitDir+"/"):
			v.errorf(mf+".target", "%s is tether's (it starts the server with its env from there)", ContainerInitDir)
		case len(c.SecretFiles) > 0 && (t == ContainerSecretsDir || strings.HasPrefix(t, ContainerSecretsDir+"/")):
			v.errorf(mf+".target", "%s holds the secretFiles", ContainerSecretsDir)
		default:
			if first, dup := targets[t]; dup {
				v.errorf(mf+".target", "duplicate target %s (also %s.mounts[%d])", truncateQuote(t), f, first)
			} else {
				targets[t] = i
			}
		}
	}
	if c.Memory != "" {
		switch n, err := ParseMemory(c.Memory); {
		case err != nil:
			v.errorf(f+".memory", "%v", err)
		case n < MinContainerMemory:
			v.errorf(f+".memory", "%s is less than the least a container runtime takes (6Mi)", truncateQuote(c.Memory))
		}
	}
	if c.Pids != nil && *c.Pids < 1 {
		v.errorf(f+".pids", "must be at least 1, got %d", *c.Pids)
	}
	if c.User != "" && (len(c.User) > maxSubdomainLen || !containerUser.MatchString(c.User)) {
		v.errorf(f+".user", "invalid user %s: a name or uid, optionally :group or :gid", truncateQuote(c.User))
	}
}

func secretFileNameProblem(name string) string {
	if name == "." || name == ".." || len(name) > 255 || !secretFileName.MatchString(name) {
		return fmt.Sprintf("invalid file name %s: letters, digits, '.', '_' and '-' (it is the file %s/<name> in the container)", truncateQuote(name), ContainerSecretsDir)
	}
	return ""
}
