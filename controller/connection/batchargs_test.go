package connection

import (
	"strings"
	"testing"
)

// A batch file's arguments with a cmd.exe metacharacter are refused,
// naming the argument; other programs, and safe arguments, pass.
func TestBatchArgsError(t *testing.T) {
	refused := []struct {
		path string
		args []string
		want string
	}{
		{`C:\Program Files\nodejs\npx.cmd`, []string{"-y", "pkg", "a&calc.exe"}, "spec.stdio.args[2]"},
		{`C:\tools\server.BAT`, []string{"100%"}, "spec.stdio.args[0]"},
		{`C:\tools\server.bat`, []string{"ok", `say "hi"`}, "spec.stdio.args[1]"},
		{`C:\tools\run.Cmd`, []string{"a|b"}, `"|"`},
		{"/opt/x/run.cmd", []string{"^x"}, "spec.stdio.args[0]"},
		{`run.cmd`, []string{"!PATH!"}, `"!"`},
		{`run.cmd`, []string{"(x)"}, "spec.stdio.args[0]"},
		{`run.cmd`, []string{"a>b"}, "spec.stdio.args[0]"},
		{`run.cmd`, []string{"a<b"}, "spec.stdio.args[0]"},
		{`run.cmd`, []string{"line\r\nnext"}, "spec.stdio.args[0]"},
		{`run.cmd`, []string{"x\x00"}, "spec.stdio.args[0]"},
	}
	for _, c := range refused {
		err := batchArgsError(c.path, c.args)
		if err == nil {
			t.Errorf("%s %q: accepted", c.path, c.args)
			continue
		}
		if !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %q: error %q does not name %s", c.path, c.args, err, c.want)
		}
	}
	if err := batchArgsError(`C:\x\npx.cmd`, []string{"a&b"}); err == nil || !strings.Contains(err.Error(), "npx.cmd") {
		t.Errorf("error %v does not name the batch file", err)
	}
	accepted := []struct {
		path string
		args []string
	}{
		{`C:\Program Files\nodejs\npx.cmd`, []string{"-y", "@modelcontextprotocol/server-filesystem", `C:\Users\me\My Documents`, "--port=8080", "a,b;c"}},
		{`C:\x\node.exe`, []string{"a&b", "100%", `"q"`}},
		{"/usr/bin/server", []string{"a&b|c"}},
		{`C:\x\cmd.exe.txt`, []string{"%x%"}},
		{`C:\x\run.cmd`, nil},
	}
	for _, c := range accepted {
		if err := batchArgsError(c.path, c.args); err != nil {
			t.Errorf("%s %q: refused: %v", c.path, c.args, err)
		}
	}
}
