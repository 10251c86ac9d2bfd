package connection

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func TestRedactor(t *testing.T) {
	r := newRedactor(
		[]namedValue{{"A", "secret"}, {"B", "secret-longer"}, {"SHORT", "abc"}, {"Q", `say "hi"`}},
		[]namedValue{{"Authorization", "Bearer tok-42xyz"}},
	)
	for _, tc := range []struct{ in, want string }{
		{"x secret y", "x [redacted] y"},
		{"secret-longer", "[redacted]"}, // the longer value wins, no "[redacted]-longer"
		{"abc stays", "abc stays"},      // shorter than MinRedactLen
		{"Bearer tok-42xyz", "[redacted]"},
		{"token tok-42xyz alone", "token [redacted] alone"},
		{`{"v":"say \"hi\""}`, `{"v":"[redacted]"}`}, // the JSON-escaped form
		{"nothing here", "nothing here"},
	} {
		if got := r.String(tc.in); got != tc.want {
			t.Errorf("String(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := r.truncated("cut off at secr"); got != "cut off at " {
		t.Errorf("truncated dropped %q, want the trailing secret prefix gone", got)
	}
	var nilRed *redactor
	if got := nilRed.String("secret"); got != "secret" {
		t.Errorf("nil redactor changed its input: %q", got)
	}
}

func TestRedactedErrorKeepsCause(t *testing.T) {
	r := newRedactor([]namedValue{{"A", "hunter22"}}, nil)
	cause := errors.New("password hunter22 rejected")
	err := r.Err(fmt.Errorf("login: %w", cause))
	if err.Error() != "login: password [redacted] rejected" {
		t.Errorf("Error() = %q", err)
	}
	if !errors.Is(err, cause) {
		t.Error("redacted error lost its cause")
	}
	if r.Err(err) != err {
		t.Error("redacting twice wrapped twice")
	}
	// A redacted error wrapped with raw text beside it: the raw text is
	// redacted too (the session's end, and the call error that met it).
	both := r.Err(fmt.Errorf("%w (%w)", err, errors.New("retry with hunter22")))
	if strings.Contains(both.Error(), "hunter22") || !errors.Is(both, cause) {
		t.Errorf("wrapped: Error() = %q; cause kept: %v", both, errors.Is(both, cause))
	}
	if r.Err(nil) != nil {
		t.Error("Err(nil) != nil")
	}
}

func TestServerError(t *testing.T) {
	rejected := &jsonrpc.Error{Code: -32005, Message: "rejected by transport"}
	server := &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "bad hunter22"}
	r := newRedactor([]namedValue{{"A", "hunter22"}}, nil)
	for _, tc := range []struct {
		name string
		err  error
		want *jsonrpc.Error
	}{
		{"nil", nil, nil},
		{"plain", io.EOF, nil},
		{"connection refused", fmt.Errorf("calling: %w: %w", rejected, syscall.ECONNREFUSED), nil},
		{"client closing", fmt.Errorf("x: %w", &jsonrpc.Error{Code: -32003}), nil},
		{"HTTP 400 with a JSON-RPC body", fmt.Errorf("req: %w: %w: %v", server, rejected, "Bad Request"), server},
		{"joined", errors.Join(io.EOF, server), server},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := findServerError(tc.err); got != tc.want {
				t.Errorf("ServerError = %v, want %v", got, tc.want)
			}
		})
	}
	red := r.Err(fmt.Errorf("call: %w", server))
	if w := findServerError(red); w == nil || w == server || w.Message != "bad [redacted]" || w.Code != server.Code {
		t.Errorf("ServerError of a redacted error = %+v, want a redacted copy", w)
	}
	if w := findServerError(r.Err(fmt.Errorf("call: %w", rejected))); w != nil {
		t.Errorf("ServerError of a redacted local error = %v", w)
	}
}

func TestRedactingLogger(t *testing.T) {
	r := newRedactor([]namedValue{{"A", "hunter22"}}, nil)
	var buf bytes.Buffer
	log := newRedactingLogger(slog.New(slog.NewTextHandler(&buf, nil)), r)
	log = log.With("with", "pre hunter22")
	log.Info("msg hunter22", "s", "v hunter22", "err", errors.New("e hunter22"),
		"any", []string{"hunter22"}, slog.Group("g", "inner", "hunter22"), "n", 42)
	out := buf.String()
	if strings.Contains(out, "hunter22") {
		t.Fatalf("log leaks the secret: %s", out)
	}
	for _, want := range []string{`msg="msg [redacted]"`, `with="pre [redacted]"`, `err="e [redacted]"`, `g.inner=[redacted]`, "n=42"} {
		if !strings.Contains(out, want) {
			t.Errorf("log %q lacks %q", out, want)
		}
	}
}

func TestStderrTail(t *testing.T) {
	r := newRedactor([]namedValue{{"A", "hunter22"}}, nil)
	write := func(tail *stderrTail, chunks ...string) {
		for _, c := range chunks {
			if n, err := tail.Write([]byte(c)); n != len(c) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
	}
	for _, tc := range []struct {
		name   string
		chunks []string
		want   []string
	}{
		{"empty", nil, nil},
		{"lines", []string{"a\nb\n"}, []string{"a", "b"}},
		{"split across writes", []string{"hel", "lo\nwor", "ld\n"}, []string{"hello", "world"}},
		{"unfinished last line", []string{"a\npart"}, []string{"a", "part"}},
		{"crlf", []string{"a\r\n"}, []string{"a"}},
		{"secret split across writes", []string{"pw hun", "ter22 ok\n"}, []string{"pw [redacted] ok"}},
		{"unfinished secret", []string{"pw hunt"}, []string{"pw "}},
		{"invalid utf-8", []string{"a\xffb\n"}, []string{"a\uFFFDb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tail := newStderrTail(r)
			write(tail, tc.chunks...)
			if got := tail.Lines(); !slices.Equal(got, tc.want) {
				t.Errorf("Lines() = %q, want %q", got, tc.want)
			}
		})
	}

	t.Run("keeps the last lines", func(t *testing.T) {
		tail := newStderrTail(r)
		for i := range 3*TailLines + 5 {
			write(tail, fmt.Sprintf("line %d\n", i))
		}
		got := tail.Lines()
		if len(got) != TailLines || got[0] != fmt.Sprintf("line %d", 2*TailLines+5) || got[TailLines-1] != fmt.Sprintf("line %d", 3*TailLines+4) {
			t.Errorf("Lines() = %q", got)
		}
		if tail.Last() != fmt.Sprintf("line %d", 3*TailLines+4) {
			t.Errorf("Last() = %q", tail.Last())
		}
	})

	t.Run("a 10 MB line without newline stays bounded", func(t *testing.T) {
		tail := newStderrTail(r)
		chunk := bytes.Repeat([]byte("x"), 64*1024)
		for range 160 {
			write(tail, string(chunk))
		}
		if c := cap(tail.partial); c > 2*MaxLineBytes {
			t.Errorf("partial line buffer grew to %d bytes", c)
		}
		write(tail, "\nnext\n")
		got := tail.Lines()
		if len(got) != 2 || len(got[0]) != MaxLineBytes+len(truncatedMark) || !strings.HasSuffix(got[0], truncatedMark) || got[1] != "next" {
			t.Errorf("Lines() = %d lines, first %d bytes", len(got), len(got[0]))
		}
	})
}

func TestChildEnv(t *testing.T) {
	base := map[string]string{"PATH": "/bin", "HOME": "/home/t", "SECRET_OF_TETHER": "x", "TZ": ""}
	env := childEnv(func(k string) string { return base[k] }, []namedValue{{"HOME", "/override"}, {"A", "1"}, {"A", "2"}})
	want := []string{"PATH=/bin", "HOME=/override", "A=2"}
	if !slices.Equal(env, want) {
		t.Errorf("childEnv = %q, want %q", env, want)
	}
	if got := envValue(env, "HOME"); got != "/override" {
		t.Errorf("envValue(HOME) = %q", got)
	}
}
