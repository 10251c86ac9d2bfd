//go:build unix

package connection

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tether-mcp/tether/spec"
)

// shq quotes s for sh.
func shq(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shSpec runs script with sh -c.
func shSpec(script string) *spec.Spec { return stdioSpec("sh", "-c", script) }

func TestChildKilledEndsSession(t *testing.T) {
	s := connect(t, Request{Spec: stdioSpec(goEverything(t))})
	pid := s.Process().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, 3*time.Second)
	err := s.Err()
	if err == nil || !strings.Contains(err.Error(), "exit code 137") {
		t.Fatalf("Err = %v, want it to name exit code 137", err)
	}
	ps := spec.ProcessOf(err)
	if ps == nil || ps.LastExitCode == nil || *ps.LastExitCode != 137 || ps.PID != pid {
		t.Fatalf("spec.ProcessOf(Err) = %+v, want pid %d exit 137", ps, pid)
	}
	if got := s.Process().LastExitCode; got == nil || *got != 137 {
		t.Errorf("Process().LastExitCode = %v, want 137", got)
	}
	start := time.Now()
	if _, err := s.CallTool(context.Background(), &mcp.CallToolParams{Name: "test_simple_text"}, nil); err == nil {
		t.Error("CallTool on an ended session succeeded")
	}
	if d := time.Since(start); d > schedSlack {
		t.Errorf("CallTool on an ended session took %s", d)
	}
	if err := s.Probe(context.Background()); err == nil {
		t.Error("Probe on an ended session succeeded")
	}
}

// A wrapper that dies while its grandchild holds the pipes (docs/reliability.md, L3):
// the session must end, and the grandchild must be killed.
func TestWrapperDiesGrandchildKilled(t *testing.T) {
	script := "sleep 300 & exec " + shq(goEverything(t))
	s := connect(t, Request{Spec: shSpec(script)})
	pid := s.Process().PID
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitDone(t, s, StopTimeout+schedSlack)
	if ps := spec.ProcessOf(s.Err()); ps == nil || ps.LastExitCode == nil || *ps.LastExitCode != 137 {
		t.Fatalf("spec.ProcessOf(Err) = %+v, want exit 137", ps)
	}
	groupGone(t, pid, time.Second)
}

// Close stops a wrapper whose grandchild ignores SIGTERM and keeps the
// pipes open, within the bound.
func TestCloseKillsStubbornGrandchild(t *testing.T) {
	script := "(trap '' TERM; exec sleep 300) & exec " + shq(goEverything(t))
	s := connect(t, Request{Spec: shSpec(script)})
	pid := s.Process().PID
	start := time.Now()
	if err := s.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	took := time.Since(start)
	if took > StopTimeout+schedSlack {
		t.Errorf("Close took %s, bound %s", took, StopTimeout)
	}
	groupGone(t, pid, schedSlack)
	if !errors.Is(s.Err(), ErrClosed) {
		t.Errorf("Err after Close = %v, want ErrClosed", s.Err())
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	t.Logf("Close with a grandchild ignoring SIGTERM took %s", took.Round(time.Millisecond))
}

// A child that floods stderr (a 5 MB line without newline, then thousands
// of lines) before it serves must not block, and the tail stays bounded.
func TestStderrFlood(t *testing.T) {
	script := `head -c 5000000 /dev/zero | tr '\0' x >&2
i=0; while [ $i -lt 3000 ]; do echo "line $i" >&2; i=$((i+1)); done
exec ` + shq(goEverything(t))
	s := connect(t, Request{Spec: shSpec(script)})
	tail := waitTail(t, s, "line 2999")
	if len(tail) > TailLines {
		t.Errorf("tail has %d lines, bound %d", len(tail), TailLines)
	}
	for _, l := range tail {
		if len(l) > MaxLineBytes+len(truncatedMark) {
			t.Errorf("tail line of %d bytes, bound %d", len(l), MaxLineBytes)
		}
	}
	if want := fmt.Sprintf("line %d", 3000-TailLines); tail[0] != want {
		t.Errorf("oldest kept line = %q, want %q", tail[0], want)
	}
	if err := s.Probe(context.Background()); err != nil {
		t.Errorf("Probe after the flood: %v", err)
	}
}

// waitTail waits until the stderr tail's last line is last and returns it.
func waitTail(t *testing.T, s *Session, last string) []string {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		tail := s.Process().StderrTail
		if len(tail) > 0 && tail[len(tail)-1] == last {
			return tail
		}
		if time.Now().After(deadline) {
			t.Fatalf("stderr tail %q never ended with %q", tail, last)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writeSecret(t *testing.T, value string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestSecretRedactedInStderrTail(t *testing.T) {
	const secret = "s3cr3t-t0ken-value"
	sp := shSpec(`echo "token=$API_TOKEN json=\"$API_TOKEN\"" >&2; exec ` + shq(goEverything(t)))
	sp.Stdio.Env = []spec.EnvVar{{Name: "API_TOKEN", ValueFrom: &spec.ValueFrom{File: writeSecret(t, secret)}}}
	s := connect(t, Request{Spec: sp})
	want := `token=[redacted] json="[redacted]"`
	tail := waitTail(t, s, want)
	if strings.Contains(strings.Join(tail, "\n"), secret) {
		t.Fatalf("tail leaks the secret: %q", tail)
	}
	if got := s.Redact("x " + secret + " y"); got != "x [redacted] y" {
		t.Errorf("Redact = %q", got)
	}
}

// A child that prints its secret and dies before initialize: the error and
// the process facts say why, without the secret.
func TestConnectFailureCarriesProcessFacts(t *testing.T) {
	const secret = "another-s3cret"
	sp := shSpec(`echo "cannot log in with $API_TOKEN" >&2; exit 3`)
	sp.Stdio.Env = []spec.EnvVar{{Name: "API_TOKEN", Value: strptr(secret)}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	s, err := Connect(ctx, Request{Name: "failing", Spec: sp, Logger: testLogger(t)})
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded")
	}
	t.Logf("Connect failed after %s: %v", time.Since(start).Round(time.Millisecond), err)
	if strings.Contains(err.Error(), secret) {
		t.Fatalf("error leaks the secret: %v", err)
	}
	for _, want := range []string{"exit code 3", "cannot log in with [redacted]"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	ps := spec.ProcessOf(err)
	if ps == nil || ps.PID == 0 || ps.LastExitCode == nil || *ps.LastExitCode != 3 {
		t.Fatalf("ProcessOf = %+v, want a pid and exit code 3", ps)
	}
	if len(ps.StderrTail) != 1 || ps.StderrTail[0] != "cannot log in with [redacted]" {
		t.Errorf("StderrTail = %q", ps.StderrTail)
	}
	groupGone(t, ps.PID, time.Second)
}

// A child that never answers initialize: Connect honours its ctx and leaves
// nothing behind.
func TestConnectTimeoutLeavesNoChild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	s, err := Connect(ctx, Request{Name: "mute", Spec: shSpec("trap '' TERM; sleep 300"), Logger: testLogger(t)})
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded")
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	ps := spec.ProcessOf(err)
	if ps == nil {
		t.Fatalf("no process facts in %v", err)
	}
	groupGone(t, ps.PID, schedSlack)
	if limit := 300*time.Millisecond + 2*failedConnectGrace + killGrace; took > limit {
		t.Errorf("Connect took %s, want under %s", took, limit)
	}
	t.Logf("Connect gave up after %s: %v", took.Round(time.Millisecond), err)
}

func TestCommandResolution(t *testing.T) {
	server := goEverything(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\nexec " + shq(server) + ` "$@"` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "bin", "server"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "notexec"), []byte(wrapper), 0o644); err != nil {
		t.Fatal(err)
	}
	pathEnv := []spec.EnvVar{{Name: "PATH", Value: strptr(filepath.Join(dir, "bin") + ":" + os.Getenv("PATH"))}}
	for _, tc := range []struct {
		name    string
		command string
		env     []spec.EnvVar
		wantErr string // "" means it connects
	}{
		{name: "dot-slash", command: "./bin/server"},
		{name: "relative with slash", command: "bin/server"},
		{name: "absolute", command: filepath.Join(dir, "bin", "server")},
		{name: "PATH of the child", command: "server", env: pathEnv},
		{name: "missing relative", command: "./bin/missing", wantErr: `command "./bin/missing"`},
		{name: "missing on PATH", command: "no-such-command-tether", wantErr: `"no-such-command-tether" not found in PATH`},
		{name: "not executable", command: "./bin/notexec", wantErr: "permission denied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := stdioSpec(tc.command)
			sp.Stdio.Env = tc.env
			req := Request{Name: "resolve", Spec: sp, ManifestDir: dir, Logger: testLogger(t)}
			if tc.wantErr == "" {
				s := connect(t, req)
				if s.Server().Name != "mcp-conformance-test-server" {
					t.Errorf("connected to %q", s.Server().Name)
				}
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			s, err := Connect(ctx, req)
			if err == nil {
				s.Close()
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %q lacks %q", err, tc.wantErr)
			}
			if spec.ProcessOf(err) != nil {
				t.Errorf("a command that never started has process facts: %+v", spec.ProcessOf(err))
			}
		})
	}
}

// The child's environment is exactly the base plus the manifest, secrets are
// read at each connect, and a rotated secret file is used next time.
func TestChildEnvironment(t *testing.T) {
	everything := npmEverything(t)
	t.Setenv("TETHER_TEST_MUST_NOT_LEAK", "leak")
	secretFile := writeSecret(t, "first-secret")
	sp := stdioSpec(everything, "stdio")
	sp.Stdio.Env = []spec.EnvVar{
		{Name: "FROM_FILE", ValueFrom: &spec.ValueFrom{File: secretFile}},
		{Name: "FROM_ENV", ValueFrom: &spec.ValueFrom{Env: "INJECTED"}},
		{Name: "PLAIN", Value: strptr("plain-value")},
		{Name: "HOME", Value: strptr("/nonexistent-home")},
	}
	environ := func(name string) string {
		if name == "INJECTED" {
			return "injected-value"
		}
		return ""
	}
	getEnv := func(s *Session) map[string]string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "get-env"}, nil)
		if err != nil {
			t.Fatalf("get-env: %v", err)
		}
		env := map[string]string{}
		if err := json.Unmarshal([]byte(textOf(res)), &env); err != nil {
			t.Fatalf("get-env answered %q: %v", textOf(res), err)
		}
		return env
	}

	s := connect(t, Request{Spec: sp, Environ: environ})
	env := getEnv(s)
	for name, want := range map[string]string{
		"FROM_FILE": "first-secret", "FROM_ENV": "injected-value", "PLAIN": "plain-value",
		"HOME": "/nonexistent-home", "PATH": os.Getenv("PATH"),
	} {
		if env[name] != want {
			t.Errorf("child %s = %q, want %q", name, env[name], want)
		}
	}
	allowed := map[string]bool{"FROM_FILE": true, "FROM_ENV": true, "PLAIN": true}
	for _, n := range baseEnvNames {
		allowed[n] = true
	}
	for name := range env {
		if !allowed[name] {
			t.Errorf("child has %s, which is neither base nor manifest", name)
		}
	}
	s.Close()

	if err := os.WriteFile(secretFile, []byte("rotated-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := connect(t, Request{Spec: sp, Environ: environ})
	if got := getEnv(s2)["FROM_FILE"]; got != "rotated-secret" {
		t.Errorf("after rotation FROM_FILE = %q, want rotated-secret", got)
	}
	if got := s2.Redact("rotated-secret first-secret"); got != "[redacted] first-secret" {
		t.Errorf("Redact after rotation = %q: only the current values are known", got)
	}
}

func TestSecretResolutionErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name    string
		env     spec.EnvVar
		wantErr string
	}{
		{"missing file", spec.EnvVar{Name: "A", ValueFrom: &spec.ValueFrom{File: missing}}, "stdio.env[0] (A): valueFrom.file: open " + missing},
		{"unset env", spec.EnvVar{Name: "A", ValueFrom: &spec.ValueFrom{Env: "TETHER_UNSET_VAR"}}, "TETHER_UNSET_VAR is unset or empty"},
		{"no value", spec.EnvVar{Name: "A"}, "neither value nor valueFrom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp := stdioSpec("sh", "-c", "exit 1")
			sp.Stdio.Env = []spec.EnvVar{tc.env}
			_, err := Connect(context.Background(), Request{Spec: sp, Environ: func(string) string { return "" }})
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("Connect error = %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// A server that prints a banner on stdout cannot speak MCP there: the error
// says so.
func TestStdoutBannerExplained(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := Connect(ctx, Request{Name: "banner", Spec: shSpec("echo Starting server...; exec " + shq(goEverything(t))), Logger: testLogger(t)})
	if err == nil {
		s.Close()
		t.Fatal("Connect succeeded")
	}
	if !strings.Contains(err.Error(), "logs belong on stderr") {
		t.Errorf("error %q does not explain the non-JSON stdout", err)
	}
}

// The description of a child that exited carries what it wrote last, even
// when that reaches the pipe's reader after the child was reaped (here a
// subshell writes it 50 ms after the child's exit; a dying server's last
// line races its reaping the same way).
func TestExitErrCarriesLastWords(t *testing.T) {
	tail := newStderrTail(nil)
	p, err := startProcess("sh", "/bin/sh", []string{"-c", `(sleep 0.05; printf 'last words' >&2) & exit 3`}, "", nil, tail, slog.New(slog.DiscardHandler), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(time.Second, time.Second) })
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the child was not reaped")
	}
	s := &Session{proc: p}
	if err := s.exitErr(); !strings.Contains(err.Error(), "exit code 3") || !strings.Contains(err.Error(), "stderr: last words") {
		t.Errorf("exitErr = %q, want the exit code and the last words", err)
	}
}
