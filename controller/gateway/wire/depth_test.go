package wire

import (
	"strings"
	"testing"
)

// The bound on nesting is the go-sdk's, counted alike (brackets in
// strings, escaped quotes among them, do not count).
func TestWithinSDKDepth(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		body string
		ok   bool
	}{
		{nest(SDKMaxDepth), true},
		{nest(SDKMaxDepth + 1), false},
		{`{"a":"` + strings.Repeat("[", 2*SDKMaxDepth) + `"}`, true},
		{`{"a":"\"` + strings.Repeat("{", 2*SDKMaxDepth) + `"}`, true},
		{`{"a":"\\"` + nest(SDKMaxDepth) + `}`, false},
	} {
		if got := WithinSDKDepth([]byte(tc.body)); got != tc.ok {
			t.Errorf("WithinSDKDepth(%.40q…) = %v, want %v", tc.body, got, tc.ok)
		}
	}
}
