//go:build unix

package main

import (
	"path/filepath"
	"testing"
)

// TestCRDCommand: `tether crd` prints examples/kubernetes/crd.yaml.
func TestCRDCommand(t *testing.T) {
	checkGenerated(t, runCommand(t, "crd"), filepath.Join("..", "..", "examples", "kubernetes", "crd.yaml"))
}
