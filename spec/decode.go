package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Limits that bound the work spent on one file, whatever it holds.
const (
	// MaxFileSize is the largest manifest file decoded; a bigger one is an error.
	MaxFileSize = 1 << 20
	// MaxDocuments is the most documents one file may hold.
	MaxDocuments = 1000
	// maxDocumentErrors caps the problems listed for one document; the rest
	// are counted in a last line.
	maxDocumentErrors = 50
	// maxNodeVisits caps the nodes walked in one document, aliases included.
	maxNodeVisits = 100_000
)

// Document is one document of a manifest file, valid or not.
type Document struct {
	Index  int            // 0-based position in the file, counting non-empty documents
	Line   int            // 1-based line where the document starts (for Index -1: the problem's line, or 0)
	Name   string         // metadata.name when it could be read and is a valid name, even if the doc is invalid ("" otherwise); see salvageName
	Conn   *McpConnection // decoded, defaulted and valid; nil when Errors is non-empty
	Errors []*FieldError
}

// DecodeFile splits data into documents and decodes, defaults and validates
// each. file is used only to name the file in errors.
//
// Empty documents (only comments and white space) are skipped and take no
// index. A problem with the file as a whole (over MaxFileSize, not UTF-8
// text, more than MaxDocuments documents) is returned as a single Document
// with Index -1 whose one error has Index -1; no document of such a file is
// decoded. A later document with the same metadata.name as an earlier one is
// invalid. DecodeFile never panics and its work is bounded by the limits
// above.
func DecodeFile(file string, data []byte) (docs []Document) {
	defer func() {
		// A bug here must not take the daemon down with it: one bad file
		// becomes one error. The fuzz target keeps this branch unused.
		if r := recover(); r != nil {
			docs = fileError(file, 0, fmt.Sprintf("internal error decoding the file (please report it): %v", r))
		}
	}()
	if docs := OversizedFile(file, int64(len(data))); docs != nil {
		return docs
	}
	if line, msg := binaryContent(data); msg != "" {
		return fileError(file, line, msg)
	}
	data = bytes.TrimPrefix(data, []byte("\uFEFF"))
	chunks := splitDocuments(data, MaxDocuments)
	if len(chunks) > MaxDocuments {
		return fileError(file, 0, fmt.Sprintf("file holds more than %d documents", MaxDocuments))
	}
	docs = make([]Document, 0, len(chunks))
	seen := map[string]firstUse{}
	for _, c := range chunks {
		doc, empty := decodeDocument(file, len(docs), c, seen)
		if !empty {
			docs = append(docs, doc)
		}
	}
	return docs
}

// firstUse is where a metadata.name first appeared in a file.
type firstUse struct{ index, line int }

// OversizedFile returns DecodeFile's answer for a file of size bytes when
// that is over MaxFileSize, and nil otherwise. A reader calls it with the
// file's size before reading, so that it never reads a huge file into memory
// just to be told it is too big.
func OversizedFile(file string, size int64) []Document {
	if size <= MaxFileSize {
		return nil
	}
	return fileError(file, 0, fmt.Sprintf("file is %d bytes, over the limit of %d", size, MaxFileSize))
}

// fileError is the answer for a file that cannot be decoded at all.
func fileError(file string, line int, msg string) []Document {
	return []Document{{
		Index:  -1,
		Line:   line,
		Errors: []*FieldError{{File: file, Index: -1, Line: line, Msg: msg}},
	}}
}

// binaryContent finds what makes data something other than UTF-8 text: a
// NUL byte (binary junk, UTF-16) or an invalid UTF-8 sequence.
func binaryContent(data []byte) (line int, msg string) {
	if i := bytes.IndexByte(data, 0); i >= 0 {
		return 1 + bytes.Count(data[:i], []byte("\n")), "not a text file: NUL byte (binary or UTF-16 content)"
	}
	if utf8.Valid(data) {
		return 0, ""
	}
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		if r == utf8.RuneError && n <= 1 {
			return 1 + bytes.Count(data[:i], []byte("\n")), "not UTF-8 text: invalid byte sequence"
		}
		i += n
	}
	return 0, ""
}

// decodeDocument parses, decodes, defaults and validates one document. empty
// is true when the chunk holds no node at all. seen holds the names of the
// earlier documents of the file; decodeDocument adds this one's.
func decodeDocument(file string, index int, c chunk, seen map[string]firstUse) (doc Document, empty bool) {
	d := &docDecoder{
		file: file, index: index, docLine: c.startLine, lineOffset: c.firstLine - 1,
		failed: map[string]bool{},
	}
	doc.Index, doc.Line = index, c.startLine

	dec := yaml.NewDecoder(bytes.NewReader(c.text))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		if errors.Is(err, io.EOF) {
			return doc, true
		}
		d.syntaxError(err)
		doc.Name = nameIfValid(salvageName(c.text))
		doc.Errors = d.finish()
		return doc, false
	}
	if len(root.Content) == 0 || isImplicitNull(root.Content[0]) {
		return doc, true
	}
	// The splitter cuts on every marker, so a second document here means the
	// two disagree: say so rather than drop it.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			d.syntaxError(err)
		} else {
			d.errorf(&extra, "", "unexpected second document in one chunk")
		}
		doc.Errors = d.finish()
		return doc, false
	}

	var conn McpConnection
	if top := root.Content[0]; top.Kind == yaml.ScalarNode && top.ShortTag() == "!!null" {
		d.fail(top, "", "expected a mapping (an McpConnection), got null")
	} else {
		d.value(top, reflect.ValueOf(&conn).Elem(), "")
	}
	doc.Name = nameIfValid(conn.Metadata.Name)
	if !d.aborted {
		validate(&conn, d)
	}
	if doc.Name != "" {
		// A later document never silently replaces an earlier one.
		if first, dup := seen[doc.Name]; dup {
			d.errorAt(validator{d}.lineOf("metadata.name"), "metadata.name",
				fmt.Sprintf("duplicate name %q: document %d (line %d) has it already", doc.Name, first.index+1, first.line))
		} else {
			seen[doc.Name] = firstUse{index, c.startLine}
		}
	}
	doc.Errors = d.finish()
	if len(doc.Errors) == 0 {
		conn.Default()
		doc.Conn = &conn
	}
	return doc, false
}

// isImplicitNull reports an empty node, as "---" followed by nothing parses.
func isImplicitNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" && n.Value == "" && n.Style == 0 && n.Anchor == ""
}

// docDecoder walks one document's node tree into an McpConnection, with
// exact (case-sensitive) keys and strict types, collecting every problem.
type docDecoder struct {
	file       string
	index      int
	docLine    int
	lineOffset int // added to a node's line (relative to the chunk) for the file line

	errs    []*FieldError
	dropped int // problems past maxDocumentErrors
	failed  map[string]bool
	visits  int
	aborted bool

	lines map[string]int // field path -> line, for validation errors
}

func (d *docDecoder) line(n *yaml.Node) int {
	if n == nil || n.Line <= 0 {
		return d.docLine
	}
	return d.lineOffset + n.Line
}

// errorf records a problem at node n (nil: the document's start).
func (d *docDecoder) errorf(n *yaml.Node, field, format string, args ...any) {
	d.errorAt(d.line(n), field, fmt.Sprintf(format, args...))
}

func (d *docDecoder) errorAt(line int, field, msg string) {
	if len(d.errs) >= maxDocumentErrors {
		d.dropped++
		return
	}
	d.errs = append(d.errs, &FieldError{
		File: d.file, Index: d.index, DocLine: d.docLine, Line: line, Field: field, Msg: msg,
	})
}

// fail records a problem with the value at path, so that validation does not
// pile a second, derived complaint ("required") on the same field.
func (d *docDecoder) fail(n *yaml.Node, path, format string, args ...any) {
	d.failed[path] = true
	d.errorf(n, path, format, args...)
}

// finish returns the problems in the order of their lines, so they read like
// the file; problems on one line keep the order they were found in.
func (d *docDecoder) finish() []*FieldError {
	slices.SortStableFunc(d.errs, func(a, b *FieldError) int { return a.Line - b.Line })
	if d.dropped > 0 {
		d.errs = append(d.errs, &FieldError{
			File: d.file, Index: d.index, DocLine: d.docLine, Line: d.docLine,
			Msg: fmt.Sprintf("%d more problems not shown", d.dropped),
		})
		d.dropped = 0
	}
	return d.errs
}

var yamlLineError = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// nameIfValid returns name when it is a valid connection name, else "". A
// name that is not one names nothing, and it is the file's content: a
// "manifest" that is a symlink to a credential file would have its secret
// shown as the name of a status document (tether get) or in the log.
func nameIfValid(name string) string {
	if len(name) > maxNameLen || !dns1123Label.MatchString(name) {
		return ""
	}
	return name
}

// anchorName finds the name the parser quotes in its errors about anchors
// and aliases ("unknown anchor 'x' referenced").
var anchorName = regexp.MustCompile(`(anchor) '.*?' `)

// parserErrors are the problems go.yaml.in/yaml/v3's parser (as opposed to
// its scanner) reports, from its parserc.go.
var parserErrors = map[string]bool{
	"did not find expected <stream-start>":   true,
	"did not find expected <document start>": true,
	"did not find expected node content":     true,
	"did not find expected '-' indicator":    true,
	"did not find expected key":              true,
	"did not find expected ',' or ']'":       true,
	"did not find expected ',' or '}'":       true,
	"found duplicate %YAML directive":        true,
	"found duplicate %TAG directive":         true,
	"found incompatible YAML document":       true,
	"found undefined tag handle":             true,
}

// syntaxError reports a parser error at its line in the file.
func (d *docDecoder) syntaxError(err error) {
	msg := oneLine(err.Error())
	line := d.docLine
	if m := yamlLineError.FindStringSubmatch(msg); m != nil {
		msg = m[2]
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			// go.yaml.in/yaml/v3 v3.0.4 reports scanner errors 1-based but
			// parser errors 0-based; put the parser's back on their line.
			if parserErrors[msg] {
				n++
			}
			line = d.lineOffset + n
		}
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	// The parser quotes an alias's or anchor's name, which is the file's
	// content: a "manifest" that is a credential file starting with '*'
	// would have its secret printed.
	msg = anchorName.ReplaceAllString(msg, "${1} ")
	if msg == "found incompatible YAML document" {
		msg += " (go-yaml understands only a %YAML 1.1 directive; drop the directive)"
	}
	d.errorAt(line, "", "invalid YAML: "+msg)
}

var durationType = reflect.TypeFor[Duration]()

// value decodes node n into v, whose field path is path. It descends only
// as deep as the Go type does, so the work is bounded by the schema, not by
// how deeply the input nests or how often it aliases.
func (d *docDecoder) value(n *yaml.Node, v reflect.Value, path string) {
	n = d.resolve(n, path)
	if n == nil {
		return
	}
	if tag := n.ShortTag(); !knownTags[tag] {
		d.fail(n, path, "unsupported YAML tag %s", truncate(tag))
		return
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return // absent: leave the zero value, validation names what is required
	}
	t := v.Type()
	if t == durationType {
		d.duration(n, v, path)
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		e := reflect.New(t.Elem())
		d.value(n, e.Elem(), path)
		v.Set(e)
	case reflect.Struct:
		d.object(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "expected a list, got %s", describe(n))
			return
		}
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			ipath := fmt.Sprintf("%s[%d]", path, i)
			d.remember(ipath, item)
			// A null field is an absent one, but a null item is not an
			// absent item: say so rather than read it as "" (the schema
			// says the same).
			if r := d.resolve(item, ipath); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!null" {
				d.fail(item, ipath, "expected %s, got null", expected(t.Elem()))
				continue
			}
			d.value(item, s.Index(i), ipath)
		}
		v.Set(s)
	case reflect.Map:
		d.stringMap(n, v, path)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			d.fail(n, path, "expected a string, got %s%s", describe(n), quoteHint(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			d.fail(n, path, "expected true or false, got %s%s", describe(n), yaml11BoolHint(n))
			return
		}
		v.SetBool(strings.EqualFold(n.Value, "true"))
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
			d.fail(n, path, "expected an integer, got %s", describe(n))
			return
		}
		i, err := strconv.ParseInt(strings.TrimPrefix(n.Value, "+"), 10, 0)
		if err != nil {
			d.fail(n, path, "invalid integer %s: want a decimal integer within range", truncateQuote(n.Value))
			return
		}
		v.SetInt(i)
	default:
		// Only reachable if types.go gains a field of a kind not handled here.
		d.fail(n, path, "cannot decode into %s", t)
	}
}

// resolve follows aliases and counts the walk against the budget; nil means
// stop (budget spent).
func (d *docDecoder) resolve(n *yaml.Node, path string) *yaml.Node {
	for hops := 0; ; hops++ {
		if d.aborted {
			return nil
		}
		d.visits++
		if d.visits > maxNodeVisits {
			d.aborted = true
			d.errorf(n, "", "document too complex: more than %d nodes to walk (aliases expand)", maxNodeVisits)
			return nil
		}
		if n.Kind != yaml.AliasNode {
			return n
		}
		if n.Alias == nil || hops > 100 {
			d.fail(n, path, "unresolvable alias *%s", truncate(n.Value))
			return nil
		}
		n = n.Alias
	}
}

var knownTags = map[string]bool{
	"!!str": true, "!!int": true, "!!bool": true, "!!float": true, "!!null": true,
	"!!timestamp": true, "!!map": true, "!!seq": true, "!!merge": true,
}

func (d *docDecoder) duration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, path, "expected a duration such as \"30s\", got %s", describe(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, path, "invalid duration %s: %s", truncateQuote(n.Value), durationReason(err, n.Value))
		return
	}
	v.Set(reflect.ValueOf(Duration{dur}))
	d.remember(path, n)
}

// remember keeps the line of a scalar field so that validation can point at
// the value it complains about.
func (d *docDecoder) remember(path string, n *yaml.Node) {
	if d.lines == nil {
		d.lines = map[string]int{}
	}
	d.lines[path] = d.line(n)
}

// object decodes a mapping into a struct, matching keys to json tags exactly.
func (d *docDecoder) object(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		what := "a mapping"
		if path == "" {
			what = "a mapping (an McpConnection)"
		}
		d.fail(n, path, "expected %s, got %s", what, describe(n))
		return
	}
	fields := fieldsOf(v.Type())
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		name, ok := d.key(k, path)
		if !ok {
			continue
		}
		fpath := join(path, name)
		if first, dup := seen[name]; dup {
			d.fail(k, fpath, "duplicate field (first at line %d)", first)
			continue
		}
		seen[name] = d.line(k)
		idx, known := fields.index[name]
		if !known {
			msg := "unknown field"
			if want, ok := fields.folded[strings.ToLower(name)]; ok {
				msg = fmt.Sprintf("unknown field (did you mean %q? field names are case-sensitive)", want)
			}
			d.errorf(k, joinKey(path, name), "%s", msg)
			continue
		}
		d.remember(fpath, k)
		d.value(val, v.Field(idx), fpath)
	}
}

// key reads a mapping key; ok is false (and the problem recorded) when it is
// not a plain string.
func (d *docDecoder) key(k *yaml.Node, path string) (string, bool) {
	if k.Kind == yaml.AliasNode {
		if k = d.resolve(k, path); k == nil {
			return "", false
		}
	}
	switch {
	case k.Kind == yaml.ScalarNode && k.ShortTag() == "!!merge":
		d.errorf(k, path, "merge keys (<<) are not supported")
		return "", false
	case k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str":
		d.errorf(k, path, "keys must be strings, got %s", describe(k))
		return "", false
	}
	return k.Value, true
}

// stringMap decodes a mapping of strings to strings (metadata.labels).
func (d *docDecoder) stringMap(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "expected a mapping, got %s", describe(n))
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		name, ok := d.key(k, path)
		if !ok {
			continue
		}
		kpath := joinKey(path, name)
		if first, dup := seen[name]; dup {
			d.fail(k, kpath, "duplicate key (first at line %d)", first)
			continue
		}
		seen[name] = d.line(k)
		d.remember(kpath, k)
		s := reflect.New(v.Type().Elem()).Elem()
		if r := d.resolve(val, kpath); r != nil && r.Kind == yaml.ScalarNode && r.ShortTag() == "!!null" {
			d.fail(val, kpath, "expected a string, got null")
			continue
		}
		d.value(val, s, kpath)
		m.SetMapIndex(reflect.ValueOf(name), s)
	}
	v.Set(m)
}

// fieldTable maps a struct's json names to its field indices.
type fieldTable struct {
	index  map[string]int
	folded map[string]string // lower-cased name -> name, for "did you mean"
}

var fieldTables sync.Map // reflect.Type -> *fieldTable

func fieldsOf(t reflect.Type) *fieldTable {
	if ft, ok := fieldTables.Load(t); ok {
		return ft.(*fieldTable)
	}
	ft := &fieldTable{index: map[string]int{}, folded: map[string]string{}}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		ft.index[name] = i
		ft.folded[strings.ToLower(name)] = name
	}
	fieldTables.Store(t, ft)
	return ft
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// joinKey names a map key or an unknown field in a path; keys that are not
// plain words are quoted so the path stays unambiguous.
func joinKey(path, key string) string {
	if plainKey.MatchString(key) && len(key) <= 64 {
		return join(path, key)
	}
	return path + "[" + truncateQuote(key) + "]"
}

// expected names what a value of type t is written as.
func expected(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a mapping"
	case reflect.Slice:
		return "a list"
	case reflect.Int:
		return "an integer"
	case reflect.Bool:
		return "true or false"
	}
	return "a string"
}

// describe names what a node is, for "expected X, got Y". It never quotes the
// node's value: the node may be a secret.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.ShortTag() {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "null"
	case "!!timestamp":
		return "a timestamp"
	}
	return "a " + truncate(n.ShortTag()) + " value"
}

// yaml11BoolHint explains why yes/no/on/off are not booleans here: YAML 1.2
// (and this decoder) reads them as strings, where YAML 1.1 tools read
// booleans.
func yaml11BoolHint(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
		return ""
	}
	switch strings.ToLower(n.Value) {
	case "yes", "no", "on", "off", "y", "n":
		return fmt.Sprintf(" (%s is a string in YAML 1.2: write true or false)", strconv.Quote(n.Value))
	}
	return ""
}

// quoteHint suggests quoting a plain scalar that YAML read as another type.
func quoteHint(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode && n.Style == 0 {
		return " (quote the value to make it a string)"
	}
	return ""
}

// truncate keeps echoed input short and on one line.
func truncate(s string) string {
	const limit = 64
	if len(s) > limit {
		s = s[:limit] + "..."
	}
	return strings.ToValidUTF8(strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return '?'
		}
		return r
	}, s), "?")
}

// truncateQuote quotes a short, one-line rendering of s.
func truncateQuote(s string) string {
	const limit = 64
	if len(s) > limit {
		return strconv.Quote(s[:limit]) + "..."
	}
	return strconv.Quote(s)
}
