package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/controller/importer"
	"github.com/tether-mcp/tether/controller/statusview"
)

type importOptions struct {
	out    string
	force  bool
	dryRun bool
}

func newImportCmd() *cobra.Command {
	o := &importOptions{}
	cmd := &cobra.Command{
		Use:   "import CONFIG --out DIR",
		Short: "Turn a Claude Desktop, Cursor or VS Code MCP configuration into manifests",
		Long: `import reads the MCP servers of a client configuration and writes one
McpConnection manifest per server into --out, as <name>.yaml.

Formats (found by their top-level key; comments and trailing commas allowed):
  "mcpServers"   Claude Desktop (claude_desktop_config.json), Cursor
                 (.cursor/mcp.json), Claude Code (.mcp.json) and most others
  "servers"      VS Code (.vscode/mcp.json, or "mcp" in settings.json), with
                 "type": "stdio" | "http" | "sse"

A server with a command becomes a stdio connection; one with only a url a
streamable HTTP connection, unless its type is sse or the URL path ends in
/sse. "disabled": true becomes suspend: true. Server names become DNS-1123
labels (lower case, other characters '-'); renames are reported.

Values:
  - ${VAR} and ${env:VAR} (the whole value) become valueFrom.env: tether
    reads them from its own environment.
  - A credential-looking value (an env or header name with TOKEN, SECRET,
    KEY, PASSWORD, CREDENTIAL or AUTH, or a value like "Bearer …" or
    "ghp_…") is written to DIR/secrets/<name>-<ENTRY> with mode 0600 (the
    directory 0700, with a .gitignore) and read with valueFrom.file, so the
    manifests can be committed.
  - A VS Code ${input:…} prompt, or a credential with a variable inside a
    longer value ("Bearer ${env:TOKEN}"), has no value to write: its
    valueFrom.file is set, the file is not created, and the report says
    NEEDS A VALUE with what to put there.
  - Other variables (${workspaceFolder}, …) and credentials in args or URLs
    stay as written, with a note.

Nothing is overwritten without --force: if a manifest or secret file exists,
import writes nothing. Every manifest is validated as tether reads it before
it is reported written. CONFIG "-" reads standard input. import exits 1 if a
server cannot be converted (the others are still written).`,
		Example: `  # Claude Desktop on macOS
  tether import ~/Library/Application\ Support/Claude/claude_desktop_config.json --out ./manifests

  # Claude Desktop on Windows (PowerShell; cmd.exe: %APPDATA%)
  tether import $env:APPDATA\Claude\claude_desktop_config.json --out .\manifests

  # a project's VS Code servers; see what would be written first
  tether import .vscode/mcp.json --out ./manifests --dry-run

  # Claude Code's project file, replacing earlier imports
  tether import .mcp.json --out ./manifests --force`,
		Args: cobra.ExactArgs(1),
		ValidArgsFunction: func(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
			if len(args) > 0 {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return []string{"json", "jsonc"}, cobra.ShellCompDirectiveFilterFileExt
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(args[0], cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.out, "out", "", "directory to write the manifests to (created if missing); secrets go to DIR/secrets")
	f.BoolVar(&o.force, "force", false, "replace manifests and secret files that exist")
	f.BoolVar(&o.dryRun, "dry-run", false, "report what would be written, write nothing")
	_ = cmd.MarkFlagRequired("out")
	_ = cmd.MarkFlagDirname("out")
	return cmd
}

func (o *importOptions) run(config string, stdin io.Reader, stdout, stderr io.Writer) error {
	var data []byte
	var err error
	source := filepath.Base(config)
	if config == "-" {
		data, err = io.ReadAll(io.LimitReader(stdin, maxConfigBytes+1))
		source = "standard input"
	} else {
		data, err = readConfig(config)
	}
	if err != nil {
		return err
	}
	if len(data) > maxConfigBytes {
		return fmt.Errorf("%s: over %d bytes: not a client configuration", displayName(config), maxConfigBytes)
	}
	plan, err := importer.NewPlan(data, importer.Options{Source: source, OutDir: o.out})
	if err != nil {
		return fmt.Errorf("%s: %w", displayName(config), err)
	}
	if len(plan.Servers) == 0 {
		return fmt.Errorf("%s: no servers in %q", displayName(config), plan.Format)
	}
	if !o.dryRun {
		if err := plan.Write(o.force); err != nil {
			var ce *importer.ConflictError
			if errors.As(err, &ce) {
				return err
			}
			return fmt.Errorf("writing: %w", err)
		}
	}
	if err := plan.Report(stdout, !o.dryRun); err != nil {
		return err
	}
	if !o.dryRun {
		printSetupHint(stdout, config, o.out)
	}
	if plan.Failed() {
		fmt.Fprintln(stderr, "error: some servers were not imported (see above)")
		return exitCode(1)
	}
	return nil
}

// printSetupHint ends an import with how to point the client the
// configuration came from back at tether (tether setup), and what to do
// with the servers it still launches itself.
func printSetupHint(w io.Writer, config, out string) {
	client := clientOfConfig(config)
	dir := out
	if abs, err := filepath.Abs(out); err == nil {
		dir = abs
	}
	// Printed to be pasted: a path with a space (macOS's "Application
	// Support") is quoted.
	dir = statusview.ShellQuote(dir)
	fmt.Fprintf(w, "\nNext: serve these with tether (tether run --dir %s, or a service), then point the client at it:\n", dir)
	if client == "" {
		fmt.Fprintf(w, "  tether setup --print --dir %s   (paste the snippet into the client's configuration)\n", dir)
	} else {
		flag := ""
		if config != "-" {
			flag = " --config " + statusview.ShellQuote(config)
		}
		fmt.Fprintf(w, "  tether setup %s --dir %s%s --dry-run   (then without --dry-run)\n", client, dir, flag)
	}
	fmt.Fprintln(w, "and remove the imported servers from the client's configuration, or each runs twice.")
}

// clientOfConfig guesses the client from its configuration's file name;
// "" when it cannot tell.
func clientOfConfig(config string) string {
	slash := filepath.ToSlash(config)
	switch {
	case filepath.Base(config) == "claude_desktop_config.json":
		return "claude-desktop"
	case filepath.Base(config) == ".claude.json" || filepath.Base(config) == ".mcp.json":
		return "claude-code"
	case strings.Contains(slash, ".cursor/"):
		return "cursor"
	case strings.Contains(slash, ".vscode/") || strings.Contains(slash, "Code/User/"):
		return "vscode"
	}
	return ""
}

func displayName(config string) string {
	if config == "-" {
		return "standard input"
	}
	return config
}

// maxConfigBytes bounds what import reads: client configurations are a
// few kilobytes.
const maxConfigBytes = 4 << 20

func readConfig(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
}
