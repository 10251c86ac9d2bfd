package exposure

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	for _, tt := range []struct{ prefix, orig, want string }{
		{"gh", "search", "gh_search"},
		{"", "search", "search"},
	} {
		if got := Name(tt.prefix, tt.orig); got != tt.want {
			t.Errorf("Name(%q, %q) = %q, want %q", tt.prefix, tt.orig, got, tt.want)
		}
	}
}

func TestNameProblem(t *testing.T) {
	for _, tt := range []struct {
		orig, name string
		want       string // a part of the problem; "" for none
	}{
		{"echo", "p_echo", ""},
		{"", "p_", "empty"},
		{"a\u202Eb", "p_a\u202Eb", "bidirectional control U+202E"},
		{"a\x1bb", "p_a\x1bb", "control character U+001B"},
		{strings.Repeat("x", 127), "p_" + strings.Repeat("x", 127), "129 characters, over the limit of 128"},
		{"\xff", "p_\xff", "not valid UTF-8"},
	} {
		got := NameProblem(tt.orig, tt.name, DefaultMaxNameLength)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("NameProblem(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestClaimBefore(t *testing.T) {
	if ClaimBefore(1, "b", 2, "a") >= 0 {
		t.Error("the earlier claim must come first, whatever the names")
	}
	if ClaimBefore(0, "a", 0, "b") >= 0 || ClaimBefore(0, "b", 0, "a") <= 0 {
		t.Error("equal claims must be ordered by connection name")
	}
	if ClaimBefore(3, "a", 3, "a") != 0 {
		t.Error("a claim is not before itself")
	}
}

// TestTemplateSpecificity pins the order of docs/contract.md §5.
func TestTemplateSpecificity(t *testing.T) {
	for _, c := range []struct {
		tmpl string
		want Specificity
	}{
		{"{+anything}", Specificity{CatchAll: true, Vars: 1, Reserved: 1}},
		{"{scheme}://{+path}", Specificity{CatchAll: true, Literal: 3, Vars: 2, Reserved: 1}},
		{"file{+rest}", Specificity{CatchAll: true, Prefix: 4, Literal: 4, Vars: 1, Reserved: 1}},
		{"file:///{+path}", Specificity{Prefix: 8, Literal: 8, Vars: 1, Reserved: 1}},
		{"item://{a}/{b,c}", Specificity{Prefix: 7, Literal: 8, Vars: 3}},
		{"x://h/{#frag}", Specificity{Prefix: 6, Literal: 6, Vars: 1, Reserved: 1}},
		{"res://fixed", Specificity{Prefix: 11, Literal: 11}},
		{"bad{", Specificity{CatchAll: true, Prefix: 3, Literal: 3, Vars: 1}},
	} {
		if got := TemplateSpecificity(c.tmpl); got != c.want {
			t.Errorf("TemplateSpecificity(%q) = %+v, want %+v", c.tmpl, got, c.want)
		}
	}
}

// TestClaimRank pins who serves a URI (docs/contract.md §5): a claim that
// fixes the scheme before a catch-all; the earlier claim, of any kind;
// among ties, the exact listing, the more specific template, the name.
func TestClaimRank(t *testing.T) {
	tmpl := func(conn, t string, seq uint64) URIClaim {
		return URIClaim{Conn: conn, Seq: seq, Template: t, Spec: TemplateSpecificity(t)}
	}
	exact := func(conn string, seq uint64) URIClaim { return URIClaim{Conn: conn, Seq: seq, Exact: true} }
	for _, c := range []struct {
		name        string
		first, then URIClaim
	}{
		{"a scheme-fixing template before an earlier catch-all", tmpl("b", "file:///{+p}", 5), tmpl("a", "{+any}", 1)},
		{"an exact URI before an earlier catch-all", exact("b", 5), tmpl("a", "{+any}", 1)},
		{"an earlier template before a later exact URI", tmpl("a", "file:///{+p}", 1), exact("b", 2)},
		{"an earlier exact URI before a later narrower template", exact("b", 1), tmpl("a", "file:///x/{p}", 2)},
		{"tied: the exact URI", exact("z", 0), tmpl("a", "file:///{+p}", 0)},
		{"tied: the more specific template", tmpl("z", "file:///x/{p}", 0), tmpl("a", "file:///{+p}", 0)},
		{"tied: the connection name", exact("a", 0), exact("b", 0)},
		{"tied: the template text", tmpl("a", "file:///{a}", 0), tmpl("a", "file:///{b}", 0)},
	} {
		if ClaimRank(c.first, c.then) >= 0 || ClaimRank(c.then, c.first) <= 0 {
			t.Errorf("%s: ClaimRank(%+v, %+v) = %d", c.name, c.first, c.then, ClaimRank(c.first, c.then))
		}
	}
	if a := exact("a", 0); ClaimRank(a, a) != 0 {
		t.Error("a claim does not tie with itself")
	}
}

// TestTemplateCaps: a connection's catch-all templates beyond MaxCatchAll
// and its templates of one literal prefix beyond MaxPerPrefix are not
// exposed, counted in its server's order; the others are.
func TestTemplateCaps(t *testing.T) {
	c := TemplateCaps{MaxCatchAll: 1, MaxPerPrefix: 2}
	for _, s := range []struct{ tmpl, want string }{
		{"{+a}", ""},
		{"x:/{a}/1", ""},
		{"{+b}", "more than 1 such templates (--max-catch-all-templates)"},
		{"x:/{a}/2", ""},
		{"y:/{a}", ""},
		{"x:/{a}/3", `more than 2 templates with the literal prefix x:/ (--max-templates-per-prefix)`},
	} {
		got := c.Admit(s.tmpl)
		if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
			t.Errorf("Admit(%q) = %q, want %q", s.tmpl, got, s.want)
		}
	}
	if got := (&TemplateCaps{}).Admit("x:/\x1b{a}"); !strings.Contains(got, `literal prefix "x:/\x1b" (`) {
		t.Errorf("a prefix with a control character: %q", got)
	}
	if got := Shown(strings.Repeat("a", 100)); len(got) != ShownLength || !strings.HasSuffix(got, "...") {
		t.Errorf("Shown of 100 characters: %q", got)
	}
}

// TestCompareSpecificity: each rule decides in both directions, in order.
func TestCompareSpecificity(t *testing.T) {
	for _, c := range []struct {
		name          string
		narrow, broad Specificity
	}{
		{"the scheme fixed", Specificity{Prefix: 1}, Specificity{CatchAll: true, Prefix: 9}},
		{"the longer prefix", Specificity{Prefix: 5, Literal: 5}, Specificity{Prefix: 4, Literal: 9}},
		{"more literal characters", Specificity{Prefix: 4, Literal: 6, Vars: 3}, Specificity{Prefix: 4, Literal: 5}},
		{"fewer variables", Specificity{Prefix: 4, Literal: 5, Vars: 1, Reserved: 1}, Specificity{Prefix: 4, Literal: 5, Vars: 2}},
		{"fewer reserved expressions", Specificity{Vars: 1}, Specificity{Vars: 1, Reserved: 1}},
	} {
		if CompareSpecificity(c.narrow, c.broad) >= 0 || CompareSpecificity(c.broad, c.narrow) <= 0 {
			t.Errorf("%s: %+v is not before %+v", c.name, c.narrow, c.broad)
		}
	}
	if s := (Specificity{Prefix: 3, Literal: 4, Vars: 1}); CompareSpecificity(s, s) != 0 {
		t.Error("a specificity does not tie with itself")
	}
}

func TestLiteralPrefixAndRegexp(t *testing.T) {
	for tmpl, want := range map[string]string{"{a}": "", "x://{a}/b": "x://", "res://fixed": "res://fixed"} {
		if got := LiteralPrefix(tmpl); got != want {
			t.Errorf("LiteralPrefix(%q) = %q, want %q", tmpl, got, want)
		}
	}
	if re := TemplateRegexp("test://template/{id}/data"); re == nil || !re.MatchString("test://template/7/data") || re.MatchString("test://template/7/other") {
		t.Errorf("TemplateRegexp: %v", re)
	}
	if re := TemplateRegexp("bad{"); re != nil {
		t.Errorf("an unterminated expression compiles to %v", re)
	}
}

func TestShown(t *testing.T) {
	for in, want := range map[string]string{
		"a b~":  "a b~",
		"a\x1f": `"a\x1f"`,
		"a\x7f": `"a\x7f"`,
		`a"b`:   `"a\"b"`,
		"é":     `"\u00e9"`,
	} {
		if got := Shown(in); got != want {
			t.Errorf("Shown(%q) = %s, want %s", in, got, want)
		}
	}
	if s := strings.Repeat("a", ShownLength); Shown(s) != s {
		t.Errorf("Shown of exactly %d characters is cut", ShownLength)
	}
}

func TestIsBidiControlBounds(t *testing.T) {
	for r, want := range map[rune]bool{0x061C: true, 0x200E: true, 0x200F: true, 0x2029: false, 0x202A: true, 0x202E: true, 0x202F: false,
		0x2065: false, 0x2066: true, 0x2069: true, 0x206A: false, 'a': false} {
		if got := IsBidiControl(r); got != want {
			t.Errorf("IsBidiControl(U+%04X) = %v", r, got)
		}
	}
	if p := NameProblem("x", strings.Repeat("x", 10), 10); p != "" {
		t.Errorf("a name of exactly the limit: %s", p)
	}
}
