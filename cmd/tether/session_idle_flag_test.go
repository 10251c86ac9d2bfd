package main

import (
	"strings"
	"testing"
	"time"
)

// TestSessionIdleTimeoutZeroKeeps: --session-idle-timeout 0 keeps idle
// sessions, which gateway.Options says with a negative value (its 0 is the
// default, an hour); a value of a second or more passes as it is. A
// negative one, or one under a second, is refused naming the flag: with a
// nanosecond, the gateway's sweeper kept a core busy.
func TestSessionIdleTimeoutZeroKeeps(t *testing.T) {
	for flag, want := range map[time.Duration]time.Duration{0: -1, time.Second: time.Second, time.Hour: time.Hour} {
		if got, err := sessionTimeout(flag); got != want || err != nil {
			t.Errorf("--session-idle-timeout %v: Options.SessionTimeout %v (%v), want %v", flag, got, err, want)
		}
	}
	for _, flag := range []time.Duration{-time.Second, time.Nanosecond, 999 * time.Millisecond} {
		if _, err := sessionTimeout(flag); err == nil || !strings.Contains(err.Error(), "--session-idle-timeout "+flag.String()+": must be 0") {
			t.Errorf("--session-idle-timeout %v: %v, want refused naming the flag and the value", flag, err)
		}
	}
}
