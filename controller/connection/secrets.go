package connection

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/spec"
)

// Redacted replaces every resolved secret value in what tether shows.
const Redacted = "[redacted]"

// MinRedactLen is the shortest value that is redacted. Shorter values carry
// no secret worth the name, and replacing every "1" or "on" in an error or a
// stderr line would destroy the message (and point at the value anyway).
const MinRedactLen = 4

// MinLineRedactLen is the shortest line of a multi-line value that is
// redacted on its own (the whole value always is, from MinRedactLen). A
// server's stderr reaches tether line by line, so each line of a PEM key or
// a JSON key file must be redacted where it shows alone; but the short
// lines of those shapes are structure ("}", "},", "-----", a blank line),
// the same in every such file and in unrelated output, and replacing them
// everywhere would destroy the output without hiding anything. A line that
// carries key material (a PEM body line, a JSON value) is longer.
// docs/contract.md §5a says the same.
const MinLineRedactLen = 8

// namedValue is one resolved env entry or header.
type namedValue struct {
	Name  string
	Value string
}

// SecretReader reads one key of a Secret for valueFrom.secretKeyRef. In
// Kubernetes mode one is scoped to the namespace of the connection's object;
// its errors name the Secret and the key, never a value.
type SecretReader interface {
	SecretValue(ctx context.Context, name, key string) (string, error)
}

// valueSources are where valueFrom reads: tether's environment, files
// (relative ones against baseDir, the manifest's directory) and, in
// Kubernetes mode, Secrets.
type valueSources struct {
	environ func(string) string
	baseDir string
	secrets SecretReader // nil outside Kubernetes mode
}

// resolveValues resolves env entries or headers. what names the list in
// errors ("env", "headers"); errors name the entry and the source, never a
// value. A relative valueFrom.file is resolved against src.baseDir, the
// manifest's directory, as a relative command is: a repository of manifests
// can carry its own (git-ignored) secrets directory.
func resolveValues(ctx context.Context, what string, vars []spec.EnvVar, src valueSources) ([]namedValue, error) {
	out := make([]namedValue, 0, len(vars))
	for i, v := range vars {
		val, err := resolveValue(ctx, v, src)
		if err != nil {
			return nil, fmt.Errorf("%s[%d] (%s): %w", what, i, v.Name, err)
		}
		out = append(out, namedValue{Name: v.Name, Value: val})
	}
	return out, nil
}

// MaxSecretFileSize bounds a valueFrom.file (docs/contract.md, Limits on
// files): Linux refuses an environment string over 128 KiB
// (MAX_ARG_STRLEN), so a bigger secret could not be passed anyway.
const MaxSecretFileSize = 128 << 10

func resolveValue(ctx context.Context, v spec.EnvVar, src valueSources) (string, error) {
	switch {
	case v.Value != nil && v.ValueFrom != nil:
		return "", errors.New("both value and valueFrom are set")
	case v.Value != nil:
		return *v.Value, nil
	case v.ValueFrom == nil:
		return "", errors.New("neither value nor valueFrom is set")
	case countSet(v.ValueFrom.File != "", v.ValueFrom.Env != "", v.ValueFrom.SecretKeyRef != nil) > 1:
		return "", errors.New("valueFrom has more than one of file, env and secretKeyRef")
	case v.ValueFrom.File != "":
		file := v.ValueFrom.File
		if !filepath.IsAbs(file) && src.baseDir != "" {
			file = filepath.Join(src.baseDir, file)
		}
		// Bounded and without blocking: a FIFO held the connection in
		// Connecting past --connect-timeout, a link to /dev/zero had no end.
		b, _, err := boundedfile.Read(file, MaxSecretFileSize)
		if err != nil {
			// The *PathError names the file and the reason, not the content.
			return "", fmt.Errorf("valueFrom.file: %w", err)
		}
		// Keyfiles usually end with a newline that is not part of the secret.
		return strings.TrimRight(string(b), "\r\n"), nil
	case v.ValueFrom.Env != "":
		// environ cannot tell unset from empty; an empty secret is almost
		// always a missing one, and saying so beats a confusing 401 later.
		val := src.environ(v.ValueFrom.Env)
		if val == "" {
			return "", fmt.Errorf("valueFrom.env: %s is unset or empty in tether's environment", v.ValueFrom.Env)
		}
		return val, nil
	case v.ValueFrom.SecretKeyRef != nil:
		ref := v.ValueFrom.SecretKeyRef
		if src.secrets == nil {
			return "", fmt.Errorf("valueFrom.secretKeyRef (Secret %s, key %s): Secrets are read only in Kubernetes mode (tether run --kubernetes); in a manifest directory use valueFrom.file", ref.Name, ref.Key)
		}
		val, err := src.secrets.SecretValue(ctx, ref.Name, ref.Key)
		if err != nil {
			return "", fmt.Errorf("valueFrom.secretKeyRef: %w", err)
		}
		return val, nil
	default:
		return "", errors.New("valueFrom has none of file, env and secretKeyRef")
	}
}

func countSet(b ...bool) int {
	n := 0
	for _, x := range b {
		if x {
			n++
		}
	}
	return n
}

// redactor replaces every resolved value. It is immutable after creation and
// safe for concurrent use.
type redactor struct {
	secrets  []string // longest first
	replacer *strings.Replacer
	live     *liveSecrets // learnt while the session runs (oauth.go); nil without OAuth
}

func newRedactor(env, headers []namedValue) *redactor {
	seen := map[string]bool{}
	var secrets []string
	add := func(s string) {
		if len(s) >= MinRedactLen && !seen[s] {
			seen[s] = true
			secrets = append(secrets, s)
		}
	}
	addShapes := func(v string) {
		for _, shape := range secretShapes(v) {
			add(shape)
		}
	}
	addValue := func(v string) {
		addShapes(v)
		// A multi-line value (a key file) shows line by line too: a
		// child's stderr tail is split into lines.
		if strings.ContainsAny(v, "\r\n") {
			for _, line := range strings.FieldsFunc(v, func(r rune) bool { return r == '\n' || r == '\r' }) {
				if line = strings.TrimSpace(line); len(line) >= MinLineRedactLen {
					addShapes(line)
				}
			}
		}
	}
	for _, nv := range env {
		addValue(nv.Value)
	}
	for _, nv := range headers {
		addValue(nv.Value)
		// "Bearer <token>": the token alone may show up in a message.
		if scheme, token, ok := strings.Cut(nv.Value, " "); ok && scheme != "" {
			addValue(strings.TrimSpace(token))
		}
	}
	// strings.Replacer gives earlier pairs priority at the same position:
	// longest first, so that a value containing another is redacted whole.
	slices.SortStableFunc(secrets, func(a, b string) int { return len(b) - len(a) })
	r := &redactor{secrets: secrets}
	if len(secrets) > 0 {
		pairs := make([]string, 0, 2*len(secrets))
		for _, s := range secrets {
			pairs = append(pairs, s, Redacted)
		}
		r.replacer = strings.NewReplacer(pairs...)
	}
	return r
}

// secretShapes are the forms in which a value shows when a server echoes it:
// as it is; JSON-escaped (inside a JSON string); base64-encoded, standard
// and URL alphabets, padded and raw (Basic credentials, tokens passed on);
// URL-encoded, as a query value and as a path segment.
func secretShapes(v string) []string {
	shapes := []string{v}
	if b, err := json.Marshal(v); err == nil {
		shapes = append(shapes, string(b[1:len(b)-1]))
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		shapes = append(shapes, enc.EncodeToString([]byte(v)))
	}
	return append(shapes, url.QueryEscape(v), url.PathEscape(v))
}

// String redacts s.
func (r *redactor) String(s string) string {
	if r == nil {
		return s
	}
	if r.replacer != nil {
		s = r.replacer.Replace(s)
	}
	return r.live.replace(s)
}

// truncated redacts a line that was cut short: besides whole values, it drops
// a trailing prefix of any value, which the cut may have left behind.
func (r *redactor) truncated(s string) string {
	s = r.String(s)
	if r == nil {
		return s
	}
	for _, sec := range r.secrets {
		for k := min(len(sec)-1, len(s)); k > 0; k-- {
			if strings.HasSuffix(s, sec[:k]) {
				s = s[:len(s)-k]
				break
			}
		}
	}
	return s
}

// Err returns err with a redacted message. The cause stays reachable for
// errors.Is/As; a JSON-RPC error the server sent is replaced, for errors.As,
// by a redacted copy so that forwarding its code and message is safe.
func (r *redactor) Err(err error) error {
	if err == nil {
		return nil
	}
	// Only an error that is itself redacted is left as it is: one that
	// merely wraps a redacted error (the session's end, with the raw error
	// of the call that met it) has unredacted text of its own.
	if already, ok := err.(*redactedError); ok && already.r == r {
		return err
	}
	re := &redactedError{r: r, msg: r.String(err.Error()), cause: err}
	if wire := findServerError(err); wire != nil {
		c := &jsonrpc.Error{Code: wire.Code, Message: r.String(wire.Message)}
		if len(wire.Data) > 0 {
			if d := r.String(string(wire.Data)); json.Valid([]byte(d)) {
				c.Data = json.RawMessage(d)
			}
		}
		re.wire = c
	}
	return re
}

// localCodes are the codes of the go-sdk's own *jsonrpc.Error values, which
// it returns for failures that never reached a server: -32005 "rejected by
// transport" (connection refused, HTTP 5xx), -32003 "client is closing",
// -32004 "server is closing", -32001 "unknown error".
var localCodes = map[int64]bool{-32001: true, -32003: true, -32004: true, -32005: true}

// ServerError returns the JSON-RPC error the server sent back that err
// carries (redacted when err came from a Session), or nil when err is a
// local failure: a transport error, a timeout, a closed session. Prefer it
// to errors.As(err, **jsonrpc.Error), which also finds the go-sdk's local
// codes (a refused connection is a *jsonrpc.Error -32005). It is a method
// because the gateway sees a session only through its methods.
func (s *Session) ServerError(err error) *jsonrpc.Error { return findServerError(err) }

// findServerError searches err's whole tree, depth first, for a
// *jsonrpc.Error with a code the go-sdk does not use locally.
func findServerError(err error) *jsonrpc.Error {
	switch e := err.(type) {
	case nil:
		return nil
	case *jsonrpc.Error:
		if !localCodes[e.Code] {
			return e
		}
		return nil
	case interface{ Unwrap() error }:
		return findServerError(e.Unwrap())
	case interface{ Unwrap() []error }:
		for _, c := range e.Unwrap() {
			if w := findServerError(c); w != nil {
				return w
			}
		}
	}
	return nil
}

// redactedError is an error whose message has been redacted.
type redactedError struct {
	r     *redactor
	msg   string
	cause error
	wire  *jsonrpc.Error // redacted copy of the server's error, if any
}

func (e *redactedError) Error() string { return e.msg }

func (e *redactedError) Unwrap() []error {
	if e.wire != nil {
		return []error{e.wire, e.cause}
	}
	return []error{e.cause}
}

// redactingHandler is a slog.Handler that redacts the message and every
// attribute before passing the record on. The go-sdk logs through it too.
type redactingHandler struct {
	inner slog.Handler
	r     *redactor
}

func newRedactingLogger(l *slog.Logger, r *redactor) *slog.Logger {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	if r == nil || (r.replacer == nil && r.live == nil) {
		return l
	}
	return slog.New(&redactingHandler{inner: l.Handler(), r: r})
}

func (h *redactingHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.inner.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = h.attr(a)
	}
	return &redactingHandler{inner: h.inner.WithAttrs(red), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{inner: h.inner.WithGroup(name), r: h.r}
}

func (h *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = h.attr(ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		// Errors, Stringers and whatever else render as text: redact that.
		if err, ok := v.Any().(error); ok {
			return slog.String(a.Key, h.r.String(err.Error()))
		}
		return slog.String(a.Key, h.r.String(fmt.Sprint(v.Any())))
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
