//go:build unix

package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runRoot runs the whole command tree in-process.
func runRoot(t *testing.T, args ...string) (stdout, stderr string, err error) {
	t.Helper()
	root := newRootCmd()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

func TestHelpListsCommands(t *testing.T) {
	out, _, err := runRoot(t, "--help")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"completion", "get", "import", "run", "validate", "version"} {
		if !strings.Contains(out, "\n  "+c+" ") {
			t.Errorf("tether --help does not list %q:\n%s", c, out)
		}
	}
	for _, c := range []string{"get", "import"} {
		out, _, err := runRoot(t, c, "--help")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out, "Examples:\n  ") {
			t.Errorf("tether %s --help has no examples:\n%s", c, out)
		}
	}
}

func TestCompletionScripts(t *testing.T) {
	tests := []struct{ shell, marker string }{
		{"bash", "__start_tether"},
		{"zsh", "#compdef tether"},
		{"fish", "complete -c tether"},
		{"powershell", "Register-ArgumentCompleter"},
	}
	for _, tt := range tests {
		out, _, err := runRoot(t, "completion", tt.shell)
		if err != nil || !strings.Contains(out, tt.marker) {
			t.Errorf("tether completion %s: err %v, output without %q (%d bytes)", tt.shell, err, tt.marker, len(out))
		}
	}
}

// TestCompleteGet asks cobra's completion entry point what the shells ask.
func TestCompleteGet(t *testing.T) {
	tree := filepath.Join("testdata", "get", "tree")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"names from the manifests, phase as description", []string{"get", "--dir", tree, "f"}, []string{"flaky\tDegraded", "fresh\tPending", ":4"}},
		{"names already given are not offered", []string{"get", "--dir", tree, "flaky", "f"}, []string{"fresh\tPending", ":4"}},
		{"no such directory", []string{"get", "--dir", filepath.Join(tree, "nowhere"), ""}, []string{":4"}},
		{"output formats", []string{"get", "-o", ""}, []string{"table", "wide", "yaml", "json", ":4"}},
		// cobra offers a required flag that is missing first.
		{"import configs", []string{"import", ""}, []string{"--out\tdirectory to write the manifests to (created if missing); secrets go to DIR/secrets", "json", "jsonc", ":8"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, _, err := runRoot(t, append([]string{"__complete"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Split(strings.TrimSpace(out), "\n")
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("completions %q, want %q", got, tt.want)
			}
		})
	}
}

// TestBashCompletesNames sources the bash script and runs it as bash
// would on <TAB>, against the built binary.
func TestBashCompletesNames(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("bash is not installed; CI must run the bash completion test")
		}
		t.Skip("bash is not installed")
	}
	bin := builtBinaries(t)
	tree, err := filepath.Abs(filepath.Join("testdata", "get", "tree"))
	if err != nil {
		t.Fatal(err)
	}
	// _get_comp_words_by_ref comes from the bash-completion package, which
	// the script expects; a stand-in keeps the test free of it.
	script := `
_get_comp_words_by_ref() { cur="${COMP_WORDS[COMP_CWORD]}"; prev="${COMP_WORDS[COMP_CWORD-1]}"; words=("${COMP_WORDS[@]}"); cword=$COMP_CWORD; }
source <(tether completion bash)
complete_line() {
	COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
	COMPREPLY=(); __start_tether 2>/dev/null; echo "${COMPREPLY[*]}"
}
complete_line tether ge
complete_line tether get --dir "$TREE" m
complete_line tether get -o y
`
	cmd := exec.Command(bash, "-c", script)
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "TREE="+tree)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	want := "get\nmemory\nyaml\n"
	if string(out) != want {
		t.Errorf("bash completions:\n%s\nwant:\n%s", out, want)
	}
}
