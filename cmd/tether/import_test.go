package main

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runImport runs `tether import args...` in-process with stdin and returns
// what it printed and its error ("" for none).
func runImport(t *testing.T, stdin string, args ...string) (stdout, stderr, errText string) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(append([]string{"import"}, args...))
	if err := root.Execute(); err != nil {
		errText = err.Error()
	}
	return out.String(), errOut.String(), errText
}

// dumpTree lists every file under dir with its mode and content, and every
// directory whose mode import sets (secrets/).
func dumpTree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && p == dir {
				return filepath.SkipDir
			}
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() {
			fmt.Fprintf(&b, "=== %s/ (%04o)\n", rel, fi.Mode().Perm())
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "=== %s (%04o)\n%s", rel, fi.Mode().Perm(), data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteString("\n(no newline at end of file)\n")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestImportGolden(t *testing.T) {
	const dir = "testdata/import"
	tests := []struct {
		name    string
		args    []string // $OUT is the output directory (absent at start)
		stdin   string
		wantErr bool
	}{
		{"claude-desktop", []string{dir + "/claude-desktop.json", "--out", "$OUT"}, "", true},
		{"cursor", []string{dir + "/cursor-mcp.json", "--out", "$OUT"}, "", false},
		{"claude-code", []string{dir + "/claude-code.mcp.json", "--out", "$OUT"}, "", false},
		{"vscode", []string{dir + "/vscode-mcp.json", "--out", "$OUT"}, "", true},
		{"vscode-settings", []string{dir + "/vscode-settings.json", "--out", "$OUT"}, "", false},
		{"stdin", []string{"-", "--out", "$OUT"}, `{"mcpServers": {"a": {"url": "http://127.0.0.1:1/mcp"}}}`, false},
		{"dry-run", []string{dir + "/cursor-mcp.json", "--out", "$OUT", "--dry-run"}, "", false},
		{"no-servers", []string{dir + "/no-servers.json", "--out", "$OUT"}, "", true},
		{"empty-servers", []string{"-", "--out", "$OUT"}, `{"servers": {}}`, true},
		{"not-json", []string{dir + "/not-json.json", "--out", "$OUT"}, "", true},
		{"missing-config", []string{dir + "/missing.json", "--out", "$OUT"}, "", true},
		{"no-out", []string{dir + "/cursor-mcp.json"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			args := make([]string, len(tt.args))
			for i, a := range tt.args {
				args[i] = strings.ReplaceAll(a, "$OUT", out)
			}
			stdout, stderr, errText := runImport(t, tt.stdin, args...)
			if (errText != "") != tt.wantErr {
				t.Errorf("error = %q, want error: %v", errText, tt.wantErr)
			}
			var got strings.Builder
			got.WriteString("$ tether import " + strings.Join(tt.args, " ") + "\n")
			got.WriteString(stdout)
			if stderr != "" {
				got.WriteString("--- stderr\n" + stderr)
			}
			if errText != "" {
				got.WriteString("--- error\n" + errText + "\n")
			}
			got.WriteString(dumpTree(t, out))
			text := strings.ReplaceAll(got.String(), out, "$OUT")
			getCompareGolden(t, filepath.Join(dir, tt.name+".golden"), text)

			// The fake secrets of the configs end up in secret files only.
			for _, secret := range []string{"ghp_fake0example0token0for0tests", "sk_test_fake", "ntn_fake", "sntrys_fake", "fake-pw", "fake-token-value"} {
				if strings.Contains(stdout+stderr+errText, secret) {
					t.Errorf("the report shows the secret %q", secret)
				}
			}
			checkManifestsHoldNoSecrets(t, out)
		})
	}
}

// checkManifestsHoldNoSecrets fails if a manifest written under dir holds
// a credential that import should have moved into a secret file.
func checkManifestsHoldNoSecrets(t *testing.T, dir string) {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// Credentials in args stay as written (with a note), by design.
		for _, secret := range []string{"ghp_fake0example0token0for0tests", "ntn_fake", "sntrys_fake"} {
			if bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds the secret %q", f, secret)
			}
		}
	}
}

// TestImportNeverOverwritesWithoutForce imports twice into the same
// directory: the second run writes nothing without --force, even the
// files that do not exist yet, and replaces everything with it.
func TestImportNeverOverwritesWithoutForce(t *testing.T) {
	out := t.TempDir()
	config := "testdata/import/cursor-mcp.json"
	if _, _, errText := runImport(t, "", config, "--out", out); errText != "" {
		t.Fatalf("first import: %s", errText)
	}
	edited := []byte("# edited by hand\n")
	manifest := filepath.Join(out, "notion.yaml")
	secret := filepath.Join(out, "secrets", "notion.OPENAPI_MCP_HEADERS")
	for _, f := range []string{manifest, secret} {
		if err := os.WriteFile(f, edited, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(filepath.Join(out, "linear.yaml")); err != nil {
		t.Fatal(err)
	}

	stdout, _, errText := runImport(t, "", config, "--out", out)
	if errText == "" || !strings.Contains(errText, "nothing written") ||
		!strings.Contains(errText, manifest+" exists") || !strings.Contains(errText, secret+" exists") {
		t.Fatalf("second import without --force: error %q, stdout %q", errText, stdout)
	}
	for _, f := range []string{manifest, secret} {
		if data, _ := os.ReadFile(f); !bytes.Equal(data, edited) {
			t.Errorf("%s was overwritten without --force", f)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "linear.yaml")); !os.IsNotExist(err) {
		t.Errorf("a conflicting import wrote linear.yaml (err %v)", err)
	}

	if _, _, errText := runImport(t, "", config, "--out", out, "--force"); errText != "" {
		t.Fatalf("import --force: %s", errText)
	}
	if data, _ := os.ReadFile(manifest); !bytes.Contains(data, []byte("name: notion")) {
		t.Errorf("--force did not replace %s:\n%s", manifest, data)
	}
	fi, err := os.Stat(secret)
	if err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(secret); bytes.Equal(data, edited) || fi.Mode().Perm() != 0o600 {
		t.Errorf("--force left %s as %q, mode %04o; want the value, 0600", secret, data, fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(out, "linear.yaml")); err != nil {
		t.Errorf("--force did not write linear.yaml: %v", err)
	}
}

// TestImportRefusesDuplicateNames keeps names unique across the tree:
// another file of --out declaring a name is a conflict even with --force.
func TestImportRefusesDuplicateNames(t *testing.T) {
	out := t.TempDir()
	other := filepath.Join(out, "team", "mine.yaml")
	if err := os.MkdirAll(filepath.Dir(other), 0o755); err != nil {
		t.Fatal(err)
	}
	err := os.WriteFile(other, []byte("apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: linear\nspec:\n  stdio:\n    command: x\n"), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	for _, force := range []bool{false, true} {
		args := []string{"testdata/import/cursor-mcp.json", "--out", out}
		if force {
			args = append(args, "--force")
		}
		_, _, errText := runImport(t, "", args...)
		if !strings.Contains(errText, `name "linear" is already declared in `+other) {
			t.Errorf("force=%v: error %q", force, errText)
		}
		if _, err := os.Stat(filepath.Join(out, "stripe.yaml")); !os.IsNotExist(err) {
			t.Errorf("force=%v: wrote stripe.yaml despite a conflict", force)
		}
	}
}

// TestImportedTreeValidates runs `tether validate` on what import wrote
// from every sample configuration: the manifests must be what tether reads.
func TestImportedTreeValidates(t *testing.T) {
	configs, err := filepath.Glob("testdata/import/*.json")
	if err != nil {
		t.Fatal(err)
	}
	examples, err := filepath.Glob("../../examples/import/*.json")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	imported := 0
	for _, c := range append(configs, examples...) {
		// One directory per config: names repeat between configs.
		dst := filepath.Join(out, strings.TrimSuffix(filepath.Base(c), ".json")+fmt.Sprint(imported))
		_, _, errText := runImport(t, "", c, "--out", dst)
		if _, err := os.Stat(dst); err == nil {
			imported++
			root := newRootCmd()
			var vout, verr bytes.Buffer
			root.SetOut(&vout)
			root.SetErr(&verr)
			root.SetArgs([]string{"validate", dst})
			if err := root.Execute(); err != nil {
				t.Errorf("%s (import error %q): tether validate: %v\n%s%s", c, errText, err, vout.String(), verr.String())
			}
		}
	}
	if imported < 7 {
		t.Errorf("only %d configurations imported anything", imported)
	}
}
