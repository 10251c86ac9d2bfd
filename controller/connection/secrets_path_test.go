package connection

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/tether-mcp/tether/spec"
)

// A relative valueFrom.file is read from the manifest's directory, whatever
// tether's working directory is; an absolute one as it is.
func TestValueFromFileRelativeToManifest(t *testing.T) {
	manifestDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(manifestDir, "secrets"), 0o700); err != nil {
		t.Fatal(err)
	}
	rel := filepath.Join("secrets", "token")
	if err := os.WriteFile(filepath.Join(manifestDir, rel), []byte("relative-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	abs := writeSecret(t, "absolute-secret")
	vals, err := resolveValues("stdio.env", []spec.EnvVar{
		{Name: "REL", ValueFrom: &spec.ValueFrom{File: rel}},
		{Name: "ABS", ValueFrom: &spec.ValueFrom{File: abs}},
	}, func(string) string { return "" }, manifestDir)
	if err != nil {
		t.Fatal(err)
	}
	if vals[0].Value != "relative-secret" || vals[1].Value != "absolute-secret" {
		t.Errorf("values = %+v", vals)
	}
}
