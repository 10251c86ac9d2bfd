package connection

import (
	"fmt"
	"path/filepath"
	"strings"
)

// cmdMetachars are the characters cmd.exe gives a meaning to in a batch
// file's command line, whatever quoting the arguments get: Windows runs a
// .bat or .cmd server (npx is npx.cmd) through cmd.exe, which does not
// parse the MSVC quoting os/exec gives arguments ("BatBadBut"): `%` and `!`
// expand variables even inside quotes, `\"` does not escape a quote, and
// an unquoted `&`, `|`, `<`, `>`, `^` or parenthesis runs or redirects a
// command. A line break ends the command. docs/contract.md §11.
const cmdMetachars = "&|<>^\"%!()\r\n\x00"

// batchArgsError refuses, for a server whose resolved program is a batch
// file, every argument with a cmd.exe metacharacter, naming the argument
// (spec.stdio.args[i]) and the character; nil for any other program. It is
// portable so that its rules are tested everywhere; only Windows calls it.
func batchArgsError(path string, args []string) error {
	switch strings.ToLower(filepath.Ext(strings.ReplaceAll(path, `\`, "/"))) {
	case ".bat", ".cmd":
	default:
		return nil
	}
	for i, a := range args {
		if j := strings.IndexAny(a, cmdMetachars); j >= 0 {
			return fmt.Errorf("spec.stdio.args[%d]: has %q, which cmd.exe, running the batch file %s, would read as a command or a variable rather than pass on; "+
				"run the program the batch file runs (node.exe with the package's script, not npx.cmd) or leave the character out",
				i, a[j:j+1], filepath.Base(strings.ReplaceAll(path, `\`, "/")))
		}
	}
	return nil
}
