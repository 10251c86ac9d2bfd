//go:build unix

package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// gitRepo is a clone whose origin is a local bare repository, with a
// manifest directory committed on origin/main.
type gitRepo struct {
	t    *testing.T
	work string
	env  []string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed")
		}
		t.Skip("git is not installed")
	}
	root := t.TempDir()
	home := filepath.Join(root, "home")
	must(t, os.Mkdir(home, 0o755))
	g := &gitRepo{t: t, work: filepath.Join(root, "work"), env: []string{
		"HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com",
		"PATH=" + builtBinaries(t) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"TETHER=" + filepath.Join(builtBinaries(t), "tether"),
	}}
	g.run(root, "git", "init", "--quiet", "--bare", "--initial-branch=main", "origin.git")
	g.run(root, "git", "clone", "--quiet", "origin.git", "work")
	g.run(g.work, "git", "checkout", "--quiet", "-b", "main")
	return g
}

func (g *gitRepo) run(dir string, name string, args ...string) string {
	g.t.Helper()
	out, code := g.try(dir, nil, name, args...)
	if code != 0 {
		g.t.Fatalf("%s %v: exit %d\n%s", name, args, code, out)
	}
	return out
}

// try runs a command and returns its combined output and exit status.
func (g *gitRepo) try(dir string, env []string, name string, args ...string) (string, int) {
	g.t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), g.env...), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return out.String(), ee.ExitCode()
	}
	if err != nil {
		g.t.Fatalf("%s: %v", name, err)
	}
	return out.String(), 0
}

func (g *gitRepo) write(rel, content string) {
	g.t.Helper()
	writeFile(g.t, filepath.Join(g.work, rel), content)
}

func (g *gitRepo) commit(msg string) {
	g.t.Helper()
	g.run(g.work, "git", "add", "-A")
	g.run(g.work, "git", "commit", "--quiet", "-m", msg)
}

const ciManifestA = "apiVersion: tether.dev/v1alpha1\nkind: McpConnection\nmetadata:\n  name: a\nspec:\n  stdio: {command: ./server}\n"

// TestCIScript: examples/ci/tether-check.sh in a pull request's checkout
// (a real git, an origin that is a local bare repository) exits 0 with no
// change, 1 with changes (and prints them), 2 with an invalid manifest.
func TestCIScript(t *testing.T) {
	script := filepath.Join(repoRoot(t), "examples", "ci", "tether-check.sh")
	g := newGitRepo(t)
	g.write("manifests/a.yaml", ciManifestA)
	g.write("manifests/.tetherignore", "drafts/\n")
	g.commit("base")
	g.run(g.work, "git", "push", "--quiet", "origin", "main")

	g.run(g.work, "git", "checkout", "--quiet", "-b", "change")
	if out, code := g.try(g.work, nil, script); code != 0 {
		t.Fatalf("no change: exit %d, want 0\n%s", code, out)
	}
	g.write("manifests/a.yaml", ciManifestA+"  toolPrefix: x\n")
	g.write("manifests/b.yaml", strings.ReplaceAll(ciManifestA, "name: a", "name: b"))
	g.write("manifests/drafts/c.yaml", "not: a manifest\n") // ignored by the revision's .tetherignore too
	g.commit("change")
	out, code := g.try(g.work, nil, script, "manifests", "origin/main")
	if code != 1 {
		t.Fatalf("changes: exit %d, want 1\n%s", code, out)
	}
	for _, want := range []string{"diff against git revision origin/main", "~ in place   a", "spec.toolPrefix", "+ added      b", "1 added, 0 removed, 0 reconnect, 1 in place, 0 unchanged; 0 invalid"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	g.write("manifests/bad.yaml", strings.ReplaceAll(ciManifestA, "name: a", "name: bad")+"  bogus: 1\n")
	g.commit("bad")
	out, code = g.try(g.work, nil, script, "manifests", "origin/main")
	if code != 2 || !strings.Contains(out, "spec.bogus") {
		t.Fatalf("an invalid manifest: exit %d, want 2, naming spec.bogus\n%s", code, out)
	}
}

// TestCIPreCommitHook: examples/ci/pre-commit refuses a commit whose staged
// manifests are invalid (whatever the work tree holds) and lets a valid one
// through, printing its diff.
func TestCIPreCommitHook(t *testing.T) {
	hook := filepath.Join(repoRoot(t), "examples", "ci", "pre-commit")
	g := newGitRepo(t)
	data, err := os.ReadFile(hook)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(g.work, ".git", "hooks", "pre-commit"), data, 0o755))
	// TETHER wraps tether to see what the hook exported: only the
	// manifest directory, not the rest of the index.
	exported := filepath.Join(t.TempDir(), "exported")
	wrapper := filepath.Join(t.TempDir(), "tether")
	must(t, os.WriteFile(wrapper, []byte("#!/bin/sh\nif [ \"$1\" = validate ]; then (cd \"$(dirname \"$2\")\" && find . -type f) >\""+exported+"\"; fi\nexec \"$REAL_TETHER\" \"$@\"\n"), 0o755))
	g.env = append(g.env, "REAL_TETHER="+filepath.Join(builtBinaries(t), "tether"), "TETHER="+wrapper)
	g.write("manifests/a.yaml", ciManifestA)
	g.write("big/data.bin", "not a manifest\n")
	g.commit("base") // the first commit: nothing to compare with, validated
	got, err := os.ReadFile(exported)
	must(t, err)
	if strings.TrimSpace(string(got)) != "./manifests/a.yaml" {
		t.Errorf("the hook exported %q, want the manifest directory only", got)
	}

	g.write("manifests/bad.yaml", strings.ReplaceAll(ciManifestA, "name: a", "name: bad")+"  bogus: 1\n")
	g.run(g.work, "git", "add", "-A")
	g.write("manifests/bad.yaml", strings.ReplaceAll(ciManifestA, "name: a", "name: bad")) // fixed in the work tree only
	out, code := g.try(g.work, nil, "git", "commit", "-m", "bad")
	if code == 0 || !strings.Contains(out, "spec.bogus") || !strings.Contains(out, "commit is refused") {
		t.Fatalf("an invalid staged manifest: exit %d, want a refused commit naming spec.bogus\n%s", code, out)
	}
	g.run(g.work, "git", "add", "-A")
	out, code = g.try(g.work, nil, "git", "commit", "-m", "good")
	if code != 0 || !strings.Contains(out, "+ added      bad") {
		t.Fatalf("a valid commit: exit %d, want 0 and the diff\n%s", code, out)
	}
}

// TestCIGitHubWorkflow runs the workflow's own steps (the run: scripts of
// examples/ci/github-actions.yaml) in a pull request's checkout, as the
// runner would after actions/checkout.
func TestCIGitHubWorkflow(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot(t), "examples", "ci", "github-actions.yaml"))
	must(t, err)
	var wf struct {
		Name string            `json:"name"`
		On   map[string]any    `json:"on"`
		Env  map[string]string `json:"env"`
		Jobs map[string]struct {
			RunsOn string `json:"runs-on"`
			Steps  []struct {
				Name string         `json:"name"`
				Uses string         `json:"uses"`
				With map[string]any `json:"with"`
				Run  string         `json:"run"`
			} `json:"steps"`
		} `json:"jobs"`
	}
	must(t, yaml.UnmarshalStrict(data, &wf))
	if _, ok := wf.On["pull_request"]; !ok {
		t.Fatalf("the workflow does not run on pull requests: %v", wf.On)
	}
	// Its paths filter is the manifest directory TETHER_DIR names.
	pr, _ := wf.On["pull_request"].(map[string]any)
	if paths, _ := pr["paths"].([]any); len(paths) != 1 || paths[0] != wf.Env["TETHER_DIR"]+"/**" {
		t.Errorf("the pull_request paths filter %v is not TETHER_DIR (%q)/**", pr["paths"], wf.Env["TETHER_DIR"])
	}
	g := newGitRepo(t)
	g.write("manifests/a.yaml", ciManifestA)
	g.commit("base")
	g.run(g.work, "git", "push", "--quiet", "origin", "main")
	g.run(g.work, "git", "checkout", "--quiet", "-b", "pr")
	g.write("manifests/a.yaml", ciManifestA+"  callTimeout: 5s\n")
	g.commit("pr")
	summary := filepath.Join(t.TempDir(), "summary.md")
	env := []string{"GITHUB_BASE_REF=main", "GITHUB_STEP_SUMMARY=" + summary}
	for k, v := range wf.Env {
		env = append(env, k+"="+v)
	}
	var ran []string
	for _, step := range wf.Jobs["diff"].Steps {
		if step.Run == "" || strings.Contains(step.Run, "go install") {
			continue // the runner's setup; tether is on PATH here
		}
		out, code := g.try(g.work, env, "bash", "-e", "-c", step.Run)
		if code != 0 {
			t.Fatalf("step %q: exit %d\n%s", step.Name, code, out)
		}
		ran = append(ran, step.Name)
	}
	if len(ran) != 2 {
		t.Fatalf("ran %v, want the validate and diff steps", ran)
	}
	got, err := os.ReadFile(summary)
	must(t, err)
	if !strings.Contains(string(got), "~ in place   a") || !strings.Contains(string(got), "spec.callTimeout") {
		t.Errorf("the step summary:\n%s", got)
	}
}
