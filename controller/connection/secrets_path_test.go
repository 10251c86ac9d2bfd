//go:build unix

package connection

import (
	"context"
	"fmt"
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
	vals, err := resolveValues(context.Background(), "stdio.env", []spec.EnvVar{
		{Name: "REL", ValueFrom: &spec.ValueFrom{File: rel}},
		{Name: "ABS", ValueFrom: &spec.ValueFrom{File: abs}},
	}, valueSources{environ: func(string) string { return "" }, baseDir: manifestDir})
	if err != nil {
		t.Fatal(err)
	}
	if vals[0].Value != "relative-secret" || vals[1].Value != "absolute-secret" {
		t.Errorf("values = %+v", vals)
	}
}

// fakeSecrets is a SecretReader over a map of "name/key" to value.
type fakeSecrets map[string]string

func (f fakeSecrets) SecretValue(_ context.Context, name, key string) (string, error) {
	v, ok := f[name+"/"+key]
	if !ok {
		return "", fmt.Errorf("the Secret %s has no key %s", name, key)
	}
	return v, nil
}

// valueFrom.secretKeyRef reads through the SecretReader of Kubernetes mode;
// without one (a manifest directory) it is an error that says where it
// works, and no error carries a value.
func TestValueFromSecretKeyRef(t *testing.T) {
	vars := []spec.EnvVar{
		{Name: "TOKEN", ValueFrom: &spec.ValueFrom{SecretKeyRef: &spec.SecretKeySelector{Name: "github", Key: "token"}}},
	}
	src := valueSources{environ: os.Getenv, secrets: fakeSecrets{"github/token": "ghp-s3cr3t-value"}}
	vals, err := resolveValues(context.Background(), "stdio.env", vars, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(vals) != 1 || vals[0].Value != "ghp-s3cr3t-value" {
		t.Errorf("values = %+v", vals)
	}

	_, err = resolveValues(context.Background(), "stdio.env", vars, valueSources{environ: os.Getenv})
	want := "stdio.env[0] (TOKEN): valueFrom.secretKeyRef (Secret github, key token): Secrets are read only in Kubernetes mode (tether run --kubernetes); in a manifest directory use valueFrom.file"
	if err == nil || err.Error() != want {
		t.Errorf("without a SecretReader: err = %v, want %s", err, want)
	}

	src.secrets = fakeSecrets{"github/other": "ghp-s3cr3t-value"}
	_, err = resolveValues(context.Background(), "http.headers", vars, src)
	want = "http.headers[0] (TOKEN): valueFrom.secretKeyRef: the Secret github has no key token"
	if err == nil || err.Error() != want {
		t.Errorf("missing key: err = %v, want %s", err, want)
	}
}
