//go:build unix

package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// TestHostileValidatePortOutOfRange: `tether validate` refuses a URL whose
// port is outside 1–65535 (docs/reliability.md, row HP3), naming the file,
// the document and the field, without echoing the URL (its query may hold a
// token). Port 99999 passed validate before.
func TestHostileValidatePortOutOfRange(t *testing.T) {
	dir := t.TempDir()
	m := filepath.Join(dir, "remote.yaml")
	writeFile(t, m, httpManifest("remote", "http://127.0.0.1:99999/mcp?token=hunter2", "streamable", ""))
	code, stdout, stderr := runValidate(t, m)
	want := m + ":7: document 1 (line 1): spec.http.url: invalid URL: the port must be a number from 1 to 65535"
	if code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want exit 1 and %q", code, stderr, want)
	}
	if strings.Contains(stdout+stderr, "hunter2") {
		t.Errorf("validate echoes the URL's query:\n%s%s", stdout, stderr)
	}
}

// TestHostileCredentialFileNotEchoed: manifests that are symlinks to
// credential files (docs/reliability.md, row HP5). What tether says about
// them (validate in text and JSON, run's log, the status file's
// manifestError, tether get) names the file, the field and what is
// expected, never the file's content. Before, the values of apiVersion,
// kind and metadata.name, and an alias's name in a YAML error, were quoted.
func TestHostileCredentialFileNotEchoed(t *testing.T) {
	const secret = "FAKECRED"
	creds := t.TempDir()
	dir := t.TempDir()
	for name, content := range map[string]string{
		// A token in apiVersion, in a file whose name is valid: its status
		// gets a manifestError.
		"api": "apiVersion: " + secret + "-api-0123456789\nkind: McpConnection\nmetadata:\n  name: api\nspec:\n  stdio: {command: x}\n",
		// A kubeconfig-like file: kind and a name that are secrets.
		"kube": "apiVersion: v1\nkind: " + secret + "Kind\nmetadata:\n  name: " + secret + "_name_0123456789\n",
		// A password that starts with '*': YAML reads an alias.
		"alias": "*" + secret + "pa55word\n",
		// A label value.
		"label": "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: label\n  labels: {token: \"" + secret + " 0123456789\"}\nspec:\n  stdio: {command: x}\n",
	} {
		cred := filepath.Join(creds, name+".token")
		must(t, os.WriteFile(cred, []byte(content), 0o600))
		must(t, os.Symlink(cred, filepath.Join(dir, name+".yaml")))
	}
	var outputs []string
	for _, format := range []string{"text", "json"} {
		code, stdout, stderr := runValidate(t, "-o", format, dir)
		if code != 1 {
			t.Errorf("validate -o %s: exit %d, want 1", format, code)
		}
		outputs = append(outputs, "validate -o "+format+":\n"+stdout+stderr)
	}
	if !strings.Contains(outputs[0], "apiVersion: unsupported apiVersion (want") {
		t.Errorf("validate does not say what apiVersion is expected:\n%s", outputs[0])
	}

	tt := startTether(t, dir)
	for _, f := range []string{"api", "kube", "alias", "label"} {
		tt.waitLogLine(t, 20*time.Second, "invalid manifest", f+".yaml")
	}
	st := waitStatus(t, filepath.Join(dir, "api.yaml"), "api", 20*time.Second, "a manifestError", func(st spec.ConnectionStatus) bool {
		return st.ManifestError != ""
	})
	if !strings.Contains(st.ManifestError, "apiVersion") {
		t.Errorf("manifestError does not name the field: %q", st.ManifestError)
	}
	get, err := exec.Command(filepath.Join(builtBinaries(t), "tether"), "get", "--dir", dir, "-o", "yaml").CombinedOutput()
	if err != nil {
		t.Fatalf("tether get: %v\n%s", err, get)
	}
	tt.stop()
	outputs = append(outputs, "tether run's log:\n"+tt.logs.String(), "tether get:\n"+string(get))
	statusFiles, _ := filepath.Glob(filepath.Join(dir, "*.status.yaml"))
	for _, f := range statusFiles {
		b, err := os.ReadFile(f)
		must(t, err)
		outputs = append(outputs, f+":\n"+string(b))
	}
	for _, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("the credential file's content is shown:\n%s", out)
		}
	}
}
