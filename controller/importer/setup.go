package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// tether setup: the other direction of import. It writes one entry into a
// client's MCP configuration, and changes no other byte of the file: the
// file is edited in place, not decoded and encoded again, so every other
// server, every other key, their order, the indentation and, in VS Code's
// JSONC, comments and trailing commas stay as they were (docs/contract.md
// §6, tether setup). The entry itself is written as plain JSON; a comment
// inside a replaced entry goes with the entry.

// Client is a client that tether setup knows.
type Client struct {
	// Name is the CLIENT argument of tether setup.
	Name string
	// Path is where the servers live in the file, from the root object.
	Path []string
	// HTTP says whether the client takes a streamable HTTP server by URL.
	HTTP bool
	// Typed says whether entries carry "type": "stdio" | "http".
	Typed bool
}

// Clients are the clients tether setup writes, by name.
var Clients = map[string]Client{
	"claude-desktop": {Name: "claude-desktop", Path: []string{"mcpServers"}},
	"claude-code":    {Name: "claude-code", Path: []string{"mcpServers"}, HTTP: true, Typed: true},
	"cursor":         {Name: "cursor", Path: []string{"mcpServers"}, HTTP: true},
	"vscode":         {Name: "vscode", Path: []string{"servers"}, HTTP: true, Typed: true},
	"generic":        {Name: "generic", Path: []string{"mcpServers"}, HTTP: true},
}

// Launch is what the entry starts: a command (tether run --stdio --dir D, or tether connect --dir D) or a
// streamable HTTP URL.
type Launch struct {
	Command string
	Args    []string
	URL     string
}

// entry is one server of a client configuration, its keys in the order
// clients' own documentation writes them.
type entry struct {
	Type    string   `json:"type,omitempty"`
	Command string   `json:"command,omitempty"`
	Args    []string `json:"args,omitempty"`
	URL     string   `json:"url,omitempty"`
}

// Entry is c's configuration entry for l.
func (c Client) Entry(l Launch) (any, error) {
	var e entry
	switch {
	case l.URL != "":
		if !c.HTTP {
			return nil, fmt.Errorf("%s takes only servers it launches itself, not a URL: leave out --url (it then launches tether connect)", c.Name)
		}
		if c.Typed {
			e.Type = "http"
		}
		e.URL = l.URL
	default:
		if c.Typed {
			e.Type = "stdio"
		}
		e.Command, e.Args = l.Command, l.Args
	}
	return e, nil
}

// Snippet is the configuration a file would hold with only name in it.
func (c Client) Snippet(name string, l Launch) ([]byte, error) {
	return c.Set(nil, name, l)
}

// Set returns data, a client configuration (JSON, or JSONC), with the
// entry name set to launch l, every other byte unchanged. Empty data is a
// new file.
func (c Client) Set(data []byte, name string, l Launch) ([]byte, error) {
	entry, err := c.Entry(l)
	if err != nil {
		return nil, err
	}
	// A byte order mark (Windows editors write one) stays where it is.
	if rest, ok := bytes.CutPrefix(data, utf8BOM); ok {
		out, err := c.Set(rest, name, l)
		if err != nil {
			return nil, err
		}
		return append(append([]byte{}, utf8BOM...), out...), nil
	}
	// A file whose every line ends in CRLF (Windows) gets CRLF in the
	// entry too, not lines of both kinds.
	if n := bytes.Count(data, lf); n > 0 && bytes.Count(data, crlf) == n {
		out, err := c.Set(bytes.ReplaceAll(data, crlf, lf), name, l)
		if err != nil {
			return nil, err
		}
		return bytes.ReplaceAll(out, lf, crlf), nil
	}
	if len(bytes.TrimSpace(data)) == 0 {
		data = []byte("{}\n")
	}
	clean := stripJSONC(data)
	if !json.Valid(clean) {
		var v any
		return nil, syntaxError(data, json.Unmarshal(clean, &v))
	}
	unit := indentUnit(data)
	obj, err := objectAt(clean, 0)
	if err != nil {
		return nil, err
	}
	path := append(append([]string{}, c.Path...), name)
	for depth, key := range path {
		m, err := obj.find(key)
		if err != nil {
			return nil, err
		}
		last := depth == len(path)-1
		switch {
		case m == nil:
			// Build what is missing from here down, and insert it.
			var value any = entry
			for i := len(path) - 1; i > depth; i-- {
				value = map[string]any{path[i]: value}
			}
			return obj.insert(data, key, value, unit)
		case last:
			return m.replace(data, entry, unit)
		}
		if obj, err = objectAt(clean, m.valueStart); err != nil {
			return nil, fmt.Errorf("%q: %w", strings.Join(path[:depth+1], "."), err)
		}
	}
	return nil, errors.New("unreachable")
}

var (
	utf8BOM = []byte{0xEF, 0xBB, 0xBF}
	crlf    = []byte("\r\n")
	lf      = []byte("\n")
)

// object is a JSON object's place in a file: its braces and its members.
type object struct {
	open, close int // offsets of { and }
	members     []span
}

// span is one member: where its key starts and its value starts and ends.
type span struct {
	key                            string
	keyStart, valueStart, valueEnd int
}

// objectAt reads the object whose value starts at offset at of clean (JSON
// without comments or trailing commas, offsets as in the file).
func objectAt(clean []byte, at int) (*object, error) {
	for at < len(clean) && isSpace(clean[at]) {
		at++
	}
	if at >= len(clean) || clean[at] != '{' {
		return nil, errors.New("not a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(clean[at:]))
	if _, err := dec.Token(); err != nil { // {
		return nil, err
	}
	o := &object{open: at}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key, _ := tok.(string)
		keyEnd := at + int(dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		end := at + int(dec.InputOffset())
		if seen[key] {
			return nil, fmt.Errorf("key %q appears twice", key)
		}
		seen[key] = true
		o.members = append(o.members, span{
			key:        key,
			keyStart:   bytes.LastIndexByte(clean[:keyEnd-1], '"'),
			valueStart: end - len(raw),
			valueEnd:   end,
		})
	}
	if _, err := dec.Token(); err != nil { // }
		return nil, err
	}
	o.close = at + int(dec.InputOffset()) - 1
	return o, nil
}

func (o *object) find(key string) (*span, error) {
	for i := range o.members {
		if o.members[i].key == key {
			return &o.members[i], nil
		}
	}
	return nil, nil
}

// replace puts value where m's value is, indented as m's line.
func (m *span) replace(data []byte, value any, unit string) ([]byte, error) {
	b, err := marshal(value, lineIndent(data, m.keyStart), unit)
	if err != nil {
		return nil, err
	}
	return splice(data, m.valueStart, m.valueEnd, b), nil
}

// insert adds "key": value as o's last member, indented as its siblings
// (or one unit deeper than o's line when it has none).
func (o *object) insert(data []byte, key string, value any, unit string) ([]byte, error) {
	var at int
	var indent, before, after string
	if n := len(o.members); n > 0 {
		lastM := o.members[n-1]
		at = lastM.valueEnd
		indent = lineIndent(data, lastM.keyStart)
		before = ",\n" + indent
	} else {
		at = o.open + 1
		outer := lineIndent(data, o.open)
		indent = outer + unit
		before = "\n" + indent
		after = "\n" + outer
		// An empty object written "{ }" or "{\n}": its inside goes.
		if inside := strings.TrimSpace(string(data[o.open+1 : o.close])); inside == "" {
			data = splice(data, o.open+1, o.close, nil)
		}
	}
	k, _ := json.Marshal(key)
	v, err := marshal(value, indent, unit)
	if err != nil {
		return nil, err
	}
	ins := before + string(k) + ": " + string(v) + after
	return splice(data, at, at, []byte(ins)), nil
}

func marshal(v any, prefix, unit string) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent(prefix, unit)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func splice(data []byte, from, to int, with []byte) []byte {
	out := make([]byte, 0, len(data)-(to-from)+len(with))
	out = append(out, data[:from]...)
	out = append(out, with...)
	return append(out, data[to:]...)
}

// lineIndent is the white space that starts the line holding offset at.
func lineIndent(data []byte, at int) string {
	start := bytes.LastIndexByte(data[:at], '\n') + 1
	end := start
	for end < at && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	return string(data[start:end])
}

// indentUnit is the file's indentation step: the white space of its first
// indented line, two spaces when it has none.
func indentUnit(data []byte) string {
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		n := 0
		for n < len(line) && (line[n] == ' ' || line[n] == '\t') {
			n++
		}
		if n > 0 && n < len(line) {
			return string(line[:n])
		}
	}
	return "  "
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// UnifiedDiff writes the lines that differ between old and new, with three
// lines of context, as diff -u does (without hunk line numbers' exactness
// being needed by anyone but a person reading it).
func UnifiedDiff(w io.Writer, name string, old, new []byte) error {
	a, b := splitLines(old), splitLines(new)
	// The longest common prefix and suffix: an edit of tether setup is one
	// region.
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	from := max(p-3, 0)
	toA, toB := min(len(a)-s+3, len(a)), min(len(b)-s+3, len(b))
	var buf bytes.Buffer
	// diff -u numbers an empty range by the line before it.
	start := func(n int) int {
		if n == 0 {
			return from
		}
		return from + 1
	}
	fmt.Fprintf(&buf, "--- %s\n+++ %s (tether setup)\n@@ -%d,%d +%d,%d @@\n", name, name, start(toA-from), toA-from, start(toB-from), toB-from)
	for _, l := range a[from:p] {
		buf.WriteString(" " + l + "\n")
	}
	for _, l := range a[p : len(a)-s] {
		buf.WriteString("-" + l + "\n")
	}
	for _, l := range b[p : len(b)-s] {
		buf.WriteString("+" + l + "\n")
	}
	for _, l := range a[len(a)-s : toA] {
		buf.WriteString(" " + l + "\n")
	}
	_, err := w.Write(buf.Bytes())
	return err
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}
