package main

import (
	"path/filepath"
	"testing"
)

// TestCRDCommand: `tether crd` prints examples/kubernetes/crd.yaml, which the
// kustomize base lists and the Helm chart's crds/ links to (one home: the
// chart's file is read here through that link).
func TestCRDCommand(t *testing.T) {
	crd := runCommand(t, "crd")
	checkGenerated(t, crd, filepath.Join("..", "..", "examples", "kubernetes", "crd.yaml"))
	checkGenerated(t, crd, filepath.Join("..", "..", "examples", "helm", "tether", "crds", "mcpconnections.yaml"))
}
