//go:build unix

package main

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tether-mcp/tether/spec"
)

// TestFaultSecretsStayHidden: a server that repeats the secrets it was given
// everywhere it can (docs/reliability.md, row X1): on stderr, in a tool
// error, in a JSON-RPC error, in its dying words. Neither the value from a
// file nor the one from tether's environment shows in status, logs (debug
// included), metrics or the gateway's answers.
func TestFaultSecretsStayHidden(t *testing.T) {
	const fromFile, fromEnv = "file-s3cret-Value-7", "env-s3cret-Value-9"
	t.Setenv("TETHER_FAULT_TOKEN", fromEnv) // tether inherits it
	secretFile := filepath.Join(t.TempDir(), "token")
	must(t, os.WriteFile(secretFile, []byte(fromFile+"\n"), 0o600))

	dir := t.TempDir()
	m := filepath.Join(dir, "leaky.yaml")
	writeFile(t, m, faultManifest(t, "leaky", []string{"-print-env", "FILE_SECRET"}, fmt.Sprintf(
		"    env:\n      - {name: FILE_SECRET, valueFrom: {file: %s}}\n      - {name: ENV_SECRET, valueFrom: {env: TETHER_FAULT_TOKEN}}\n%s",
		secretFile, quick)))
	// A two-line secret (a key file), which a server that fails at start
	// prints on stderr as it is, base64- and URL-encoded, and as its last
	// words, which go into lastError and the Ready message (H3).
	const line1, line2 = "multi-Line-s3cret+/?&=One", "second-LINE-s3cret-Two"
	multiFile := filepath.Join(t.TempDir(), "key")
	must(t, os.WriteFile(multiFile, []byte(line1+"\n"+line2+"\n"), 0o600))
	mm := filepath.Join(dir, "multiline.yaml")
	writeFile(t, mm, stdioManifest("multiline", "/bin/sh", []string{"-c",
		`"$0" -print-env MULTI -print-encoded MULTI -exit-at-start 4; printf 'auth failed for %s' "$MULTI" >&2; exit 4`, faultServer(t)},
		fmt.Sprintf("    env:\n      - {name: MULTI, valueFrom: {file: %s}}\n%s", multiFile, quick)))

	tt, ep := startTetherServing(t, dir)
	waitStatus(t, m, "leaky", 15*time.Second, "Connected", phaseIs(spec.PhaseConnected))
	s := connectClient(t, ep)

	leaks := func(what, text string) {
		t.Helper()
		for _, secret := range []string{fromFile, fromEnv} {
			if strings.Contains(text, secret) {
				t.Errorf("%s shows a secret: %s", what, text)
			}
		}
	}
	for _, c := range []struct{ tool, env string }{
		{"leaky_leak_error", "FILE_SECRET"},
		{"leaky_leak_error", "ENV_SECRET"},
		{"leaky_leak_rpc", "FILE_SECRET"},
		{"leaky_leak_rpc", "ENV_SECRET"},
	} {
		res, err := call(s, 10*time.Second, c.tool, map[string]any{"name": c.env})
		switch {
		case err != nil:
			leaks(c.tool+" error", err.Error())
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("%s(%s): error %q lacks [redacted]: did the server leak at all?", c.tool, c.env, err)
			}
		case res.IsError:
			leaks(c.tool+" result", textOf(res))
			if !strings.Contains(textOf(res), "[redacted]") {
				t.Errorf("%s(%s): %q lacks [redacted]: did the server leak at all?", c.tool, c.env, textOf(res))
			}
		default:
			t.Errorf("%s(%s) succeeded", c.tool, c.env)
		}
	}

	// The server's stderr (its start line, the leak lines) in status.
	st := waitStatus(t, m, "leaky", 10*time.Second, "the server's stderr in status", func(st spec.ConnectionStatus) bool {
		return st.Process != nil && slices.Contains(st.Process.StderrTail, "starting with FILE_SECRET=[redacted]") &&
			slices.Contains(st.Process.StderrTail, "leaking [redacted] on stderr")
	})
	pid := st.Process.PID

	// Its last words, without a newline, as it dies.
	_, _ = call(s, 10*time.Second, "leaky_leak_exit", map[string]any{"name": "FILE_SECRET"})
	waitStatus(t, m, "leaky", 15*time.Second, "a new child after the crash", func(st spec.ConnectionStatus) bool {
		return st.Process != nil && st.Process.PID != pid && st.Process.LastExitCode != nil && *st.Process.LastExitCode == 2
	})
	// The line of this crash: a health check that timed out earlier (quick
	// settings on a loaded machine) logs a "connection lost" line too.
	tt.waitLogLine(t, 10*time.Second, "connection lost", "connection=leaky", "auth failed for token [redacted]")

	status, err := os.ReadFile(filepath.Join(dir, "leaky.status.yaml"))
	must(t, err)
	leaks("the status file", string(status))
	leaks("tether's log", tt.logs.String())
	leaks("/metrics", scrape(t, ep))

	t.Run("H3 a two-line secret, and its encodings", func(t *testing.T) {
		whole := line1 + "\n" + line2
		forms := []string{line1, line2, url.QueryEscape(whole), url.PathEscape(whole), url.QueryEscape(line1)}
		for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
			forms = append(forms, enc.EncodeToString([]byte(whole)))
		}
		st := waitStatus(t, mm, "multiline", 15*time.Second, "Reconnecting, its last words in lastError", func(st spec.ConnectionStatus) bool {
			return st.Phase == spec.PhaseReconnecting && st.Attempt >= 2 && strings.Contains(st.LastError, "exit code 4")
		})
		// The server did print it all: each line where the secret was
		// shows [redacted].
		for _, want := range []string{
			"starting with MULTI=[redacted]",
			"base64: [redacted] base64url: [redacted] raw: [redacted] rawurl: [redacted]",
			"callback: https://example.com/cb?token=[redacted] and /files/[redacted]",
			"auth failed for [redacted]",
		} {
			if !slices.Contains(st.Process.StderrTail, want) {
				t.Errorf("stderrTail lacks %q: %q", want, st.Process.StderrTail)
			}
		}
		if !strings.HasSuffix(st.LastError, "stderr: [redacted]") {
			t.Errorf("lastError %q does not end with the redacted last line", st.LastError)
		}
		if ready := st.Conditions[0]; !strings.Contains(ready.Message, "stderr: [redacted]") {
			t.Errorf("the Ready message %q lacks the redacted last line", ready.Message)
		}
		status, err := os.ReadFile(filepath.Join(dir, "multiline.status.yaml"))
		must(t, err)
		tt.waitLogLine(t, 10*time.Second, "level=WARN", "connection=multiline", "stderr: [redacted]")
		for _, form := range forms {
			for what, text := range map[string]string{"the status file": string(status), "tether's log": tt.logs.String()} {
				if strings.Contains(text, form) {
					t.Errorf("%s shows %q of the two-line secret", what, form)
				}
			}
		}
	})
}
