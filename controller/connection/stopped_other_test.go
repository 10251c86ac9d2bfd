//go:build unix && !linux

package connection

import "testing"

// waitGroupStopped cannot see thread states without /proc.
func waitGroupStopped(t *testing.T, _ int) { t.Skip("needs /proc to see that SIGSTOP took effect") }
