package exposure

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/yosida95/uritemplate/v3"
)

// The resource rules of docs/contract.md §5: which claim on a URI serves
// it (ClaimRank, over the specificity of templates) and how many templates
// of which kinds one connection may expose (TemplateCaps). The gateway
// routes by them; tether diff predicts with them.

// Specificity is how narrowly a URI template names URIs; see
// CompareSpecificity.
type Specificity struct {
	CatchAll bool // its literal prefix does not fix the URI scheme (no ':')
	Prefix   int  // literal characters before the first expression
	Literal  int  // literal characters in all
	Vars     int  // variables
	Reserved int  // {+x} and {#x} expressions, which match '/', '?' and '#' too
}

// TemplateSpecificity reads a URI template (RFC 6570 syntax: literals and
// {op var,var} expressions).
func TemplateSpecificity(tmpl string) Specificity {
	var sp Specificity
	inPrefix := true
	for rest := tmpl; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			open = len(rest)
		}
		n := utf8.RuneCountInString(rest[:open])
		sp.Literal += n
		if inPrefix {
			sp.Prefix += n
			sp.CatchAll = !strings.Contains(tmpl[:len(tmpl)-len(rest)+open], ":")
		}
		rest = rest[open:]
		if rest == "" {
			break
		}
		inPrefix = false
		expr, after, _ := strings.Cut(rest[1:], "}") // unterminated: the rest is one expression
		if expr != "" && (expr[0] == '+' || expr[0] == '#') {
			sp.Reserved++
		}
		sp.Vars += strings.Count(expr, ",") + 1
		rest = after
	}
	return sp
}

// CompareSpecificity is negative when a names URIs more narrowly than b:
// a template that fixes the scheme before one that does not (catch-all),
// then the longer literal prefix, then more literal characters, then fewer
// variables, then fewer {+x}/{#x} expressions.
func CompareSpecificity(a, b Specificity) int {
	if a.CatchAll != b.CatchAll {
		if b.CatchAll {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(b.Prefix, a.Prefix), cmp.Compare(b.Literal, a.Literal),
		cmp.Compare(a.Vars, b.Vars), cmp.Compare(a.Reserved, b.Reserved))
}

// LiteralPrefix is a template's text before its first expression: a URI
// it matches starts with it.
func LiteralPrefix(tmpl string) string {
	if i := strings.IndexByte(tmpl, '{'); i >= 0 {
		return tmpl[:i]
	}
	return tmpl
}

// URIClaim is one connection's claim on a URI, as ClaimRank orders it: its
// exact listing of the URI, or a template of it that matches the URI.
type URIClaim struct {
	Conn     string
	Seq      uint64 // when the listing or template was first offered (0: before the gateway settled)
	Exact    bool
	Template string      // the template, when not exact
	Spec     Specificity // the template's; zero (fixes the scheme) when exact
}

// ClaimRank orders the claims on one URI; the first serves it. A catch-all
// template never wins over a claim that fixes the scheme; then the claim
// offered first wins, whichever connection or kind it is (first come keeps
// a URI: a later exact URI or narrower template of another connection does
// not take it); claims made before the gateway settled tie (seq 0) and go
// to the exact listing, then the most specific template
// (CompareSpecificity), then the connection name.
func ClaimRank(a, b URIClaim) int {
	if a.Spec.CatchAll != b.Spec.CatchAll {
		if b.Spec.CatchAll {
			return -1
		}
		return 1
	}
	if c := cmp.Compare(a.Seq, b.Seq); c != 0 {
		return c
	}
	if a.Exact != b.Exact {
		if a.Exact {
			return -1
		}
		return 1
	}
	if c := CompareSpecificity(a.Spec, b.Spec); c != 0 {
		return c
	}
	return cmp.Or(cmp.Compare(a.Conn, b.Conn), cmp.Compare(a.Template, b.Template))
}

// DefaultMaxCatchAllTemplates is the default of --max-catch-all-templates:
// a server needs one or two templates that take any URI, not thousands
// (each is tried on every URI).
const DefaultMaxCatchAllTemplates = 16

// DefaultMaxTemplatesPerPrefix is the default of
// --max-templates-per-prefix: the gateway tries on a URI every template
// whose literal prefix starts it, so templates sharing one prefix
// ("x:/{a}/t1", "x:/{a}/t2", …) would each be tried on every URI under it.
const DefaultMaxTemplatesPerPrefix = 64

// TemplateCaps counts one connection's templates, in the order its server
// lists them (each once), against the two limits.
type TemplateCaps struct {
	MaxCatchAll, MaxPerPrefix int
	catchAlls                 int
	perPrefix                 map[string]int
}

// Admit counts tmpl and says why it is not exposed ("" when it is): the
// connection has more catch-all templates than MaxCatchAll, or more
// templates with its literal prefix than MaxPerPrefix, before it.
func (c *TemplateCaps) Admit(tmpl string) string {
	if TemplateSpecificity(tmpl).CatchAll {
		if c.catchAlls++; c.catchAlls > c.MaxCatchAll {
			return fmt.Sprintf("not exposed: matches URIs of any scheme, and the connection has more than %d such templates (--max-catch-all-templates)", c.MaxCatchAll)
		}
		return ""
	}
	if c.perPrefix == nil {
		c.perPrefix = map[string]int{}
	}
	p := LiteralPrefix(tmpl)
	if c.perPrefix[p]++; c.perPrefix[p] > c.MaxPerPrefix {
		return fmt.Sprintf("not exposed: the connection has more than %d templates with the literal prefix %s (--max-templates-per-prefix)", c.MaxPerPrefix, Shown(p))
	}
	return ""
}

// ShownLength bounds a name, URI or template as a message shows it.
const ShownLength = 80

// Shown is a name, URI or template as a message shows it: Go-quoted (ASCII
// only) when it holds anything but printable ASCII or a '"', cut to
// ShownLength.
func Shown(name string) string {
	plain := true
	for i := 0; i < len(name); i++ {
		if c := name[i]; c < 0x20 || c >= 0x7f || c == '"' {
			plain = false
			break
		}
	}
	if !plain {
		name = strconv.QuoteToASCII(name)
	}
	if len(name) > ShownLength {
		name = name[:ShownLength-3] + "..."
	}
	return name
}

// TemplateRegexp is what a URI must match to fall under tmpl; nil for a
// template the parser refuses (the go-sdk refuses it too). uritemplate
// compiles it with regexp.MustCompile: a backend's template must not be
// able to panic the gateway, which holds its lock.
func TemplateRegexp(tmpl string) (re *regexp.Regexp) {
	defer func() {
		if recover() != nil {
			re = nil
		}
	}()
	parsed, err := uritemplate.New(tmpl)
	if err != nil {
		return nil
	}
	return parsed.Regexp()
}
