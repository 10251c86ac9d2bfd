package manifest

import (
	"testing"
	"time"

	"github.com/tether-mcp/tether/controller/desired"
)

// TestNewSourceDefaults: a zero or negative interval takes its default;
// a positive one is kept.
func TestNewSourceDefaults(t *testing.T) {
	for _, tc := range []struct {
		name                              string
		in                                time.Duration
		wantDebounce, wantMax, wantResync time.Duration
	}{
		{"zero", 0, 50 * time.Millisecond, 500 * time.Millisecond, 5 * time.Minute},
		{"negative", -time.Second, 50 * time.Millisecond, 500 * time.Millisecond, 5 * time.Minute},
		{"set", 7 * time.Second, 7 * time.Second, 7 * time.Second, 7 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewSource(SourceOptions{Debounce: tc.in, MaxDelay: tc.in, Resync: tc.in}, desired.NewStore())
			if got := s.opts.Debounce; got != tc.wantDebounce {
				t.Errorf("Debounce = %v, want %v", got, tc.wantDebounce)
			}
			if got := s.opts.MaxDelay; got != tc.wantMax {
				t.Errorf("MaxDelay = %v, want %v", got, tc.wantMax)
			}
			if got := s.opts.Resync; got != tc.wantResync {
				t.Errorf("Resync = %v, want %v", got, tc.wantResync)
			}
		})
	}
}
