package main

import (
	"bytes"
	"strings"
	"testing"
)

// A usage error of tether diff exits 2, never 1 ("changes"): a CI step
// that takes 1 as "the pull request changes something" must not pass a
// mistyped command.
func TestDiffUsageErrorsExit2(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"diff", "--bogus"},
		{"diff", "--max-name-length", "x"},
		{"diff", "--dir", dir, "-", "-"},
		{"diff", "--dir", dir, "-o", "table", "-"},
	} {
		root := newRootCmd()
		var stderr bytes.Buffer
		root.SetArgs(args)
		root.SetErr(&stderr)
		root.SetOut(&bytes.Buffer{})
		root.SetIn(strings.NewReader(""))
		err := root.Execute()
		var ec exitCode
		if !asExitCode(err, &ec) || ec != 2 {
			t.Errorf("tether %s: %v, want exit status 2", strings.Join(args, " "), err)
			continue
		}
		if !strings.Contains(stderr.String(), "error:") {
			t.Errorf("tether %s: stderr %q says no error", strings.Join(args, " "), stderr.String())
		}
	}
}
