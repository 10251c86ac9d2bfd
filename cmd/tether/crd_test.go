//go:build unix

package main

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCRDCommand: `tether crd` prints examples/kubernetes/crd.yaml, which the
// kustomize base lists, and the Helm chart's crds/mcpconnections.yaml, a
// copy that hack/update-generated.sh writes (not a symbolic link: a checkout
// without them would break the chart).
func TestCRDCommand(t *testing.T) {
	crd := runCommand(t, "crd")
	checkGenerated(t, crd, filepath.Join("..", "..", "examples", "kubernetes", "crd.yaml"))
	chartCRD := filepath.Join("..", "..", "examples", "helm", "tether", "crds", "mcpconnections.yaml")
	checkGenerated(t, crd, chartCRD)
	fi, err := os.Lstat(chartCRD)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.Mode().IsRegular() {
		t.Errorf("%s is not a regular file (%v): run hack/update-generated.sh", filepath.ToSlash(chartCRD), fi.Mode())
	}
}
