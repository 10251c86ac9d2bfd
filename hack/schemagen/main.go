// Command schemagen writes the JSON Schemas (draft 2020-12) of the
// McpConnection manifest and of its status document from the Go types of
// package spec, so that the schema can never say something the types do not.
//
//	go run ./hack/schemagen [-dir spec] [-out DIR]
//
// It reads the package's source with go/parser (it does not import it: spec
// embeds what this writes) and writes, into -out (default: -dir):
//
//	zz_generated.schema.json         the manifest, rooted at McpConnection (`tether schema`)
//	zz_generated.status.schema.json  a status document, rooted at StatusDocument
//
// hack/update-generated.sh runs it; hack/verify-generated.sh fails when the
// checked-in files differ from what it writes.
//
// # From Go to JSON Schema
//
// A struct is an object with additionalProperties false; its properties are
// the fields' json names, in field order. A field is required when its json
// tag has no omitempty and its type is not a pointer, slice or map; every
// other field is optional and may also be null, because the decoder reads a
// null as an absent field. string, bool and int map to string, boolean and
// integer; []T to an array; map[string]T to an object of T; time.Time to a
// date-time string. A named string type whose constants are declared with
// that type (Phase) is an enum of those constants' values.
//
// Every field needs a doc comment: it is the property's description, read by
// people in their editor, so it is written for them, in the manifest's field
// names. Lines of a comment that start with +tether: are markers, not text.
//
// # Markers
//
// On a field:
//
//	+tether:enum=a;b          the value is one of a, b
//	+tether:pattern=REGEX     a string matches REGEX (RE2 and ECMA-262 alike: keep it simple)
//	+tether:patternMessage=M  what an editor says when the pattern does not match
//	                          (patternErrorMessage, which VS Code and yaml-language-server read)
//	+tether:minLength=N       a string has at least N characters
//	+tether:maxLength=N       a string has at most N characters
//	+tether:minimum=N         an integer is at least N
//
// On a type:
//
//	+tether:exactlyOneOf=a;b  exactly one of the properties a, b is set (a oneOf)
//	+tether:type=string       the type is written as a string (with pattern: Duration)
//	+tether:pattern=REGEX     with type=string: what the string matches
//	+tether:patternMessage=M  with pattern: as on a field
//
// "Set" in exactlyOneOf means what validation means: present, not null, and
// for a plain string field, not empty.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The files schemagen writes, and the types they are rooted at.
const (
	ManifestFile = "zz_generated.schema.json"
	StatusFile   = "zz_generated.status.schema.json"

	manifestRoot = "McpConnection"
	statusRoot   = "StatusDocument"

	draft202012 = "https://json-schema.org/draft/2020-12/schema"
)

func main() {
	dir := flag.String("dir", "spec", "directory of the Go package whose types are read")
	out := flag.String("out", "", "directory to write the schemas into (default: -dir)")
	flag.Parse()
	if *out == "" {
		*out = *dir
	}
	files, err := Generate(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "schemagen:", err)
		os.Exit(1)
	}
	for _, name := range []string{ManifestFile, StatusFile} {
		if err := os.WriteFile(filepath.Join(*out, name), files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "schemagen:", err)
			os.Exit(1)
		}
	}
}

// Generate reads the Go package in dir and returns the content of each file
// schemagen writes, by file name.
func Generate(dir string) (map[string][]byte, error) {
	g, err := load(dir)
	if err != nil {
		return nil, err
	}
	roots := []struct{ file, typ, title string }{
		{ManifestFile, manifestRoot, "McpConnection"},
		{StatusFile, statusRoot, "McpConnection status"},
	}
	files := map[string][]byte{}
	for _, r := range roots {
		s, err := g.root(r.typ)
		if err != nil {
			return nil, err
		}
		s.Schema, s.Title = draft202012, r.title
		b, err := encode(s)
		if err != nil {
			return nil, fmt.Errorf("encoding the schema of %s: %w", r.typ, err)
		}
		files[r.file] = b
	}
	return files, nil
}

// schema is the subset of JSON Schema that schemagen writes, its keywords in
// the order people read them.
type schema struct {
	Schema               string     `json:"$schema,omitempty"`
	Title                string     `json:"title,omitempty"`
	Description          string     `json:"description,omitempty"`
	Type                 any        `json:"type,omitempty"` // a string, or [type, "null"]
	Format               string     `json:"format,omitempty"`
	Enum                 []any      `json:"enum,omitempty"` // strings, and null where the value may be null
	Pattern              string     `json:"pattern,omitempty"`
	PatternErrorMessage  string     `json:"patternErrorMessage,omitempty"`
	MinLength            *int       `json:"minLength,omitempty"`
	MaxLength            *int       `json:"maxLength,omitempty"`
	Minimum              *int       `json:"minimum,omitempty"`
	Items                *schema    `json:"items,omitempty"`
	Properties           properties `json:"properties,omitempty"`
	Required             []string   `json:"required,omitempty"`
	AdditionalProperties any        `json:"additionalProperties,omitempty"` // false or a *schema
	OneOf                []*schema  `json:"oneOf,omitempty"`
}

// properties keeps the fields' order, which encoding/json's maps would sort.
type properties []property

type property struct {
	name   string
	schema *schema
}

func (ps properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := json.Marshal(p.name)
		if err != nil {
			return nil, err
		}
		v, err := marshal(p.schema)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal encodes without escaping <, > and & (descriptions hold
// "<prefix>_<tool>"); the caller indents.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func encode(s *schema) ([]byte, error) {
	compact, err := marshal(s)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := json.Indent(&b, compact, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// generator holds what it read of the package.
type generator struct {
	fset   *token.FileSet
	types  map[string]*typeDecl
	consts map[string][]string // named type -> its constants' values, in declaration order
	seen   map[string]bool     // types being expanded, against recursion
}

type typeDecl struct {
	name    string
	doc     string
	expr    ast.Expr
	pos     token.Pos
	markers []marker
}

type marker struct {
	key, value string
	pos        token.Pos
}

func load(dir string) (*generator, error) {
	g := &generator{fset: token.NewFileSet(), types: map[string]*typeDecl{}, consts: map[string][]string{}, seen: map[string]bool{}}
	paths, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	slices.Sort(paths)
	for _, path := range paths {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(g.fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.TYPE:
				for _, sp := range gd.Specs {
					ts := sp.(*ast.TypeSpec)
					doc := ts.Doc
					if doc == nil && len(gd.Specs) == 1 {
						doc = gd.Doc
					}
					text, markers := splitDoc(doc)
					g.types[ts.Name.Name] = &typeDecl{name: ts.Name.Name, doc: text, expr: ts.Type, pos: ts.Pos(), markers: markers}
				}
			case token.CONST:
				g.readConsts(gd)
			}
		}
	}
	if len(g.types) == 0 {
		return nil, fmt.Errorf("%s: no Go types found", dir)
	}
	return g, nil
}

// readConsts records the string constants declared with a named type
// (PhaseConnected Phase = "Connected").
func (g *generator) readConsts(gd *ast.GenDecl) {
	for _, sp := range gd.Specs {
		vs := sp.(*ast.ValueSpec)
		id, ok := vs.Type.(*ast.Ident)
		if !ok {
			continue
		}
		for _, v := range vs.Values {
			lit, ok := v.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			if s, err := strconv.Unquote(lit.Value); err == nil {
				g.consts[id.Name] = append(g.consts[id.Name], s)
			}
		}
	}
}

// splitDoc returns a comment's text as a description (lines of a paragraph
// joined, paragraphs separated by a blank line) and its +tether: markers.
func splitDoc(cg *ast.CommentGroup) (string, []marker) {
	if cg == nil {
		return "", nil
	}
	var markers []marker
	var paras []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			paras = append(paras, strings.Join(cur, " "))
			cur = nil
		}
	}
	for _, c := range cg.List {
		line := strings.TrimPrefix(c.Text, "//")
		line = strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(line, "+tether:"); ok {
			key, value, _ := strings.Cut(rest, "=")
			markers = append(markers, marker{key: key, value: value, pos: c.Pos()})
			continue
		}
		if line == "" {
			flush()
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return strings.Join(paras, "\n\n"), markers
}

func (g *generator) errorf(pos token.Pos, format string, args ...any) error {
	p := g.fset.Position(pos)
	return fmt.Errorf("%s:%d: %s", filepath.ToSlash(p.Filename), p.Line, fmt.Sprintf(format, args...))
}

// root is the schema of a top-level type: its description is the first
// paragraph of the type's doc comment.
func (g *generator) root(name string) (*schema, error) {
	td, ok := g.types[name]
	if !ok {
		return nil, fmt.Errorf("type %s not found", name)
	}
	s, err := g.named(td)
	if err != nil {
		return nil, err
	}
	// The first paragraph: the rest of a type's doc is for Go readers.
	s.Description, _, _ = strings.Cut(td.doc, "\n\n")
	return s, nil
}

// typeOf is the schema of a Go type expression (a field's type).
func (g *generator) typeOf(e ast.Expr) (*schema, error) {
	switch t := e.(type) {
	case *ast.StarExpr:
		return g.typeOf(t.X)
	case *ast.ArrayType:
		if t.Len != nil {
			return nil, g.errorf(t.Pos(), "arrays of fixed length are not supported")
		}
		items, err := g.typeOf(t.Elt)
		if err != nil {
			return nil, err
		}
		return &schema{Type: "array", Items: items}, nil
	case *ast.MapType:
		if k, ok := t.Key.(*ast.Ident); !ok || k.Name != "string" {
			return nil, g.errorf(t.Pos(), "only maps with string keys are supported")
		}
		v, err := g.typeOf(t.Value)
		if err != nil {
			return nil, err
		}
		return &schema{Type: "object", AdditionalProperties: v}, nil
	case *ast.SelectorExpr:
		if pkg, ok := t.X.(*ast.Ident); ok && pkg.Name == "time" && t.Sel.Name == "Time" {
			return &schema{Type: "string", Format: "date-time"}, nil
		}
		return nil, g.errorf(t.Pos(), "unsupported type %s", exprString(t))
	case *ast.Ident:
		switch t.Name {
		case "string":
			return &schema{Type: "string"}, nil
		case "bool":
			return &schema{Type: "boolean"}, nil
		case "int", "int32", "int64":
			return &schema{Type: "integer"}, nil
		}
		td, ok := g.types[t.Name]
		if !ok {
			return nil, g.errorf(t.Pos(), "unsupported type %s", t.Name)
		}
		return g.named(td)
	}
	return nil, g.errorf(e.Pos(), "unsupported type %s", exprString(e))
}

// named is the schema of a type declared in the package.
func (g *generator) named(td *typeDecl) (*schema, error) {
	if g.seen[td.name] {
		return nil, g.errorf(td.pos, "type %s refers to itself: recursive types are not supported", td.name)
	}
	g.seen[td.name] = true
	defer delete(g.seen, td.name)

	var asType, pattern, patternMessage string
	var oneOf []string
	for _, m := range td.markers {
		switch m.key {
		case "type":
			asType = m.value
		case "pattern":
			pattern = m.value
		case "patternMessage":
			patternMessage = m.value
		case "exactlyOneOf":
			oneOf = strings.Split(m.value, ";")
		default:
			return nil, g.errorf(m.pos, "unknown marker +tether:%s on type %s (want type, pattern, patternMessage or exactlyOneOf)", m.key, td.name)
		}
	}
	if asType != "" {
		if asType != "string" {
			return nil, g.errorf(td.pos, "+tether:type=%s on %s: only string is supported", asType, td.name)
		}
		if oneOf != nil {
			return nil, g.errorf(td.pos, "+tether:exactlyOneOf on %s, which is written as a string", td.name)
		}
		if patternMessage != "" && pattern == "" {
			return nil, g.errorf(td.pos, "+tether:patternMessage on %s, which has no pattern", td.name)
		}
		return &schema{Type: "string", Pattern: pattern, PatternErrorMessage: patternMessage}, nil
	}
	if pattern != "" || patternMessage != "" {
		return nil, g.errorf(td.pos, "+tether:pattern on type %s needs +tether:type=string", td.name)
	}
	st, ok := td.expr.(*ast.StructType)
	if !ok {
		if oneOf != nil {
			return nil, g.errorf(td.pos, "+tether:exactlyOneOf on %s, which is not a struct", td.name)
		}
		s, err := g.typeOf(td.expr)
		if err != nil {
			return nil, err
		}
		if values := g.consts[td.name]; len(values) > 0 && s.Type == "string" {
			for _, v := range values {
				s.Enum = append(s.Enum, v)
			}
		}
		return s, nil
	}
	return g.object(td, st, oneOf)
}

// object is the schema of a struct.
func (g *generator) object(td *typeDecl, st *ast.StructType, oneOf []string) (*schema, error) {
	s := &schema{Type: "object", Properties: properties{}, AdditionalProperties: false}
	kinds := map[string]ast.Expr{} // json name -> Go type, for exactlyOneOf
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 {
			return nil, g.errorf(f.Pos(), "%s: embedded fields are not supported (give the field a name)", td.name)
		}
		for _, id := range f.Names {
			if !id.IsExported() {
				continue
			}
			name, omitempty, err := g.jsonName(td, id, f)
			if err != nil {
				return nil, err
			}
			if name == "-" {
				continue
			}
			desc, markers := splitDoc(f.Doc)
			if desc == "" {
				return nil, g.errorf(id.Pos(), "field %s.%s has no doc comment: it is the description people read in their editor", td.name, id.Name)
			}
			ps, err := g.typeOf(f.Type)
			if err != nil {
				return nil, err
			}
			if err := g.applyMarkers(ps, markers, td.name+"."+id.Name); err != nil {
				return nil, err
			}
			ps.Description = desc
			required := !omitempty && !nillable(f.Type)
			if required {
				s.Required = append(s.Required, name)
			} else {
				ps.Type = []string{ps.Type.(string), "null"}
				if ps.Enum != nil {
					ps.Enum = append(ps.Enum, nil) // enum applies to null too
				}
			}
			s.Properties = append(s.Properties, property{name, ps})
			kinds[name] = f.Type
		}
	}
	for _, name := range oneOf {
		t, ok := kinds[name]
		if !ok {
			return nil, g.errorf(td.pos, "+tether:exactlyOneOf on %s names %q, which is not one of its fields", td.name, name)
		}
		if slices.Contains(s.Required, name) {
			return nil, g.errorf(td.pos, "+tether:exactlyOneOf on %s names %q, which is required", td.name, name)
		}
		base, err := g.typeOf(t)
		if err != nil {
			return nil, err
		}
		set := &schema{Type: base.Type}
		if id, ok := t.(*ast.Ident); ok && id.Name == "string" {
			one := 1
			set.MinLength = &one // validation reads "" as not set
		}
		s.OneOf = append(s.OneOf, &schema{Required: []string{name}, Properties: properties{{name, set}}})
	}
	if len(oneOf) == 1 {
		return nil, g.errorf(td.pos, "+tether:exactlyOneOf on %s names one field: name two or more", td.name)
	}
	return s, nil
}

// jsonName reads a field's json tag.
func (g *generator) jsonName(td *typeDecl, id *ast.Ident, f *ast.Field) (name string, omitempty bool, err error) {
	if f.Tag == nil {
		return "", false, g.errorf(id.Pos(), "field %s.%s has no json tag", td.name, id.Name)
	}
	tag, err := strconv.Unquote(f.Tag.Value)
	if err != nil {
		return "", false, g.errorf(f.Tag.Pos(), "field %s.%s: malformed tag", td.name, id.Name)
	}
	j, ok := reflect.StructTag(tag).Lookup("json")
	if !ok {
		return "", false, g.errorf(id.Pos(), "field %s.%s has no json tag", td.name, id.Name)
	}
	name, opts, _ := strings.Cut(j, ",")
	if name == "" {
		return "", false, g.errorf(id.Pos(), "field %s.%s: the json tag has no name", td.name, id.Name)
	}
	return name, slices.Contains(strings.Split(opts, ","), "omitempty"), nil
}

// nillable reports a pointer, slice or map: a type whose zero value encodes
// as null, so that it is never required.
func nillable(e ast.Expr) bool {
	switch e.(type) {
	case *ast.StarExpr, *ast.ArrayType, *ast.MapType:
		return true
	}
	return false
}

func (g *generator) applyMarkers(s *schema, markers []marker, field string) error {
	for _, m := range markers {
		switch m.key {
		case "enum":
			if s.Type != "string" {
				return g.errorf(m.pos, "+tether:enum on %s, which is not a string", field)
			}
			for _, v := range strings.Split(m.value, ";") {
				s.Enum = append(s.Enum, v)
			}
		case "pattern":
			if s.Type != "string" {
				return g.errorf(m.pos, "+tether:pattern on %s, which is not a string", field)
			}
			if _, err := regexp.Compile(m.value); err != nil {
				return g.errorf(m.pos, "+tether:pattern on %s: %v", field, err)
			}
			s.Pattern = m.value
		case "patternMessage":
			s.PatternErrorMessage = m.value
		case "minLength", "maxLength", "minimum":
			n, err := strconv.Atoi(m.value)
			if err != nil {
				return g.errorf(m.pos, "+tether:%s on %s: %q is not an integer", m.key, field, m.value)
			}
			want := "string"
			if m.key == "minimum" {
				want = "integer"
			}
			if s.Type != want {
				return g.errorf(m.pos, "+tether:%s on %s, which is not a%s %s", m.key, field, map[bool]string{true: "n", false: ""}[want == "integer"], want)
			}
			switch m.key {
			case "minLength":
				s.MinLength = &n
			case "maxLength":
				s.MaxLength = &n
			default:
				s.Minimum = &n
			}
		default:
			return g.errorf(m.pos, "unknown marker +tether:%s on %s (want enum, pattern, patternMessage, minLength, maxLength or minimum)", m.key, field)
		}
	}
	for _, m := range markers {
		if m.key == "patternMessage" && s.Pattern == "" {
			return g.errorf(m.pos, "+tether:patternMessage on %s, which has no pattern", field)
		}
	}
	return nil
}

func exprString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		return exprString(t.X) + "." + t.Sel.Name
	case *ast.StarExpr:
		return "*" + exprString(t.X)
	}
	return fmt.Sprintf("%T", e)
}
