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
