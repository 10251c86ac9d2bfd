//go:build !linux

package spec

import (
	"strings"
	"testing"
)

// TestSandboxRefusedOffLinux: until macOS and Windows have an
// implementation, spec.stdio.sandbox is a validation error that names the
// file and the field (docs/security.md).
func TestSandboxRefusedOffLinux(t *testing.T) {
	data := "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: s\nspec:\n  stdio:\n    command: server\n    sandbox: {network: none}\n"
	docs := DecodeFile("s.yaml", []byte(data))
	if len(docs) != 1 || len(docs[0].Errors) != 1 {
		t.Fatalf("documents %+v, want one with one problem", docs)
	}
	e := docs[0].Errors[0]
	if e.File != "s.yaml" || e.Line != 8 || e.Field != "spec.stdio.sandbox" || !strings.Contains(e.Msg, "not supported on") {
		t.Errorf("problem %s, want s.yaml:8 spec.stdio.sandbox: not supported on …", e)
	}
}
