package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/controller/atomicfile"
	"github.com/tether-mcp/tether/controller/boundedfile"
	"github.com/tether-mcp/tether/controller/importer"
)

type setupOptions struct {
	dir     string
	url     string
	config  string
	name    string
	dryRun  bool
	print   bool
	connect bool // the entry runs tether connect, not tether run --stdio
}

// maxSetupConfigBytes bounds a client configuration tether setup edits.
// Claude Code's ~/.claude.json keeps per-project history beside its
// servers and grows to a few megabytes; anything past this is not a
// configuration.
const maxSetupConfigBytes = 16 << 20

func newSetupCmd() *cobra.Command {
	o := &setupOptions{}
	cmd := &cobra.Command{
		Use:   "setup (claude-desktop | claude-code | cursor | vscode | --print)",
		Short: "Point a desktop client at tether: write its MCP configuration",
		Long: `setup writes one server entry, "tether", into a client's MCP configuration,
so that the client launches "tether run --stdio --dir DIR": the first agent
started owns DIR and starts its servers, every other one bridges to that
owner, and when the owner's agent quits a bridge takes over (docs/contract.md
§6b). With --connect the entry launches "tether connect --dir DIR" instead,
which only ever bridges: for a directory a service of the same user always
owns. With --url the client uses tether's streamable HTTP gateway
(claude-code, cursor and vscode; Claude Desktop launches its servers
itself).

Files (--config overrides):
  claude-desktop  macOS   ~/Library/Application Support/Claude/claude_desktop_config.json
                  Windows %APPDATA%\Claude\claude_desktop_config.json
                  Linux   ~/.config/Claude/claude_desktop_config.json
  claude-code     ~/.claude.json (user scope; --config .mcp.json for a project)
  cursor          ~/.cursor/mcp.json
  vscode          macOS   ~/Library/Application Support/Code/User/mcp.json
                  Windows %APPDATA%\Code\User\mcp.json
                  Linux   ~/.config/Code/User/mcp.json

Only that entry is added or replaced: every other byte of the file stays as
it was (other servers and keys, their order, indentation, and in VS Code's
JSONC files comments and trailing commas). The file before the change is
kept beside it as FILE.tether-backup-TIME. --dry-run prints the change as a
diff and writes nothing. A symlink, a file that is not a regular file, one
over 16 MiB or one that is not JSON is refused, and nothing is written.
--print writes no file: it prints the snippet to paste into any client
that takes the "mcpServers" format.`,
		Example: `  # Claude Desktop launches tether (or bridges to the one running) for ~/mcp
  tether setup claude-desktop --dir ~/mcp

  # Claude Code only ever bridges to the user service that owns ~/mcp
  tether setup claude-code --dir ~/mcp --connect

  # what the change to VS Code's user mcp.json would be
  tether setup vscode --dir ~/mcp --dry-run

  # Cursor uses the running gateway over streamable HTTP
  tether setup cursor --url http://127.0.0.1:8808/mcp

  # a snippet for another client
  tether setup --print --dir ~/mcp`,
		Args:      cobra.MaximumNArgs(1),
		ValidArgs: []string{"claude-desktop", "claude-code", "cursor", "vscode"},
		RunE: func(cmd *cobra.Command, args []string) error {
			client := "generic"
			if len(args) == 1 {
				client = args[0]
			} else if !o.print {
				return errors.New("name a client (claude-desktop, claude-code, cursor, vscode), or --print a snippet")
			}
			return o.run(client, cmd.OutOrStdout())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", ".", "the manifest directory whose tether the client reaches (tether run --stdio --dir)")
	f.StringVar(&o.url, "url", "", "use tether's streamable HTTP gateway at this URL instead of launching tether")
	f.BoolVar(&o.connect, "connect", false, "launch tether connect (only ever a bridge to the directory's owner) instead of tether run --stdio (the owner, or a bridge to it)")
	f.StringVar(&o.config, "config", "", "the client's configuration file (default: where the client keeps it on this OS)")
	f.StringVar(&o.name, "name", "tether", "the name of the entry")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the change as a diff, write nothing")
	f.BoolVar(&o.print, "print", false, "print the configuration snippet instead of writing a file")
	return cmd
}

func (o *setupOptions) run(name string, stdout io.Writer) error {
	client, ok := importer.Clients[name]
	if !ok || (name == "generic" && !o.print) {
		return fmt.Errorf("unknown client %q: one of claude-desktop, claude-code, cursor, vscode", name)
	}
	if o.name == "" {
		return errors.New("--name must not be empty")
	}
	launch, err := o.launch()
	if err != nil {
		return err
	}
	if o.print {
		b, err := client.Snippet(o.name, launch)
		if err != nil {
			return err
		}
		_, err = stdout.Write(b)
		return err
	}
	path := o.config
	if path == "" {
		if path, err = clientConfigPath(name, runtime.GOOS, os.Getenv); err != nil {
			return err
		}
	}
	old, mode, err := readClientConfig(path)
	if err != nil {
		return err
	}
	updated, err := client.Set(old, o.name, launch)
	if err != nil {
		return fmt.Errorf("%s: %w (nothing written)", path, err)
	}
	if bytes.Equal(old, updated) {
		fmt.Fprintf(stdout, "%s already points %q at tether: nothing to change\n", path, o.name)
		return nil
	}
	if o.dryRun {
		return importer.UnifiedDiff(stdout, path, old, updated)
	}
	if old != nil {
		backup := backupPath(path, time.Now())
		if err := atomicfile.Write(backup, old, mode, 0o700); err != nil {
			return fmt.Errorf("keeping a backup of %s: %w (nothing written)", path, err)
		}
		fmt.Fprintf(stdout, "kept the previous %s as %s\n", filepath.Base(path), backup)
	}
	if err := writeClientConfig(path, old, updated, mode); err != nil {
		return err
	}
	what := "launches " + strings.Join(append([]string{launch.Command}, launch.Args...), " ")
	if launch.URL != "" {
		what = "uses " + launch.URL
	}
	fmt.Fprintf(stdout, "%s: %q %s; restart %s to pick it up\n", path, o.name, what, name)
	return nil
}

// launch is what the entry starts: this tether binary's absolute path
// (desktop clients do not run a login shell, so PATH is not the user's)
// with run --stdio --dir DIR (or, --connect, connect --dir DIR) made
// absolute, or the URL.
func (o *setupOptions) launch() (importer.Launch, error) {
	if o.url != "" {
		if o.connect {
			return importer.Launch{}, errors.New("--connect and --url exclude each other: one names the command the client launches, the other a gateway it uses")
		}
		if !strings.HasPrefix(o.url, "http://") && !strings.HasPrefix(o.url, "https://") {
			return importer.Launch{}, fmt.Errorf("--url %q: not an http:// or https:// URL", o.url)
		}
		return importer.Launch{URL: o.url}, nil
	}
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return importer.Launch{}, fmt.Errorf("--dir: %w", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return importer.Launch{}, fmt.Errorf("--dir %s: not a directory", dir)
	}
	exe, err := os.Executable()
	if err != nil {
		return importer.Launch{}, fmt.Errorf("finding the tether binary: %w", err)
	}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		exe = resolved
	}
	if o.connect {
		return importer.Launch{Command: exe, Args: []string{"connect", "--dir", dir}}, nil
	}
	return importer.Launch{Command: exe, Args: []string{"run", "--stdio", "--dir", dir}}, nil
}

// readClientConfig reads a client configuration to edit: nil when there
// is none yet (mode 0600 for the new file, since configurations hold
// tokens). A symlink is refused rather than replaced by a file (or
// followed to a file elsewhere): --config can name its target.
func readClientConfig(path string) ([]byte, fs.FileMode, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, 0o600, nil
	case err != nil:
		return nil, 0, err
	case fi.Mode()&fs.ModeSymlink != 0:
		target, _ := filepath.EvalSymlinks(path)
		return nil, 0, fmt.Errorf("%s is a symlink (to %s): tether setup does not write through it; name the file with --config", path, target)
	case !fi.Mode().IsRegular():
		return nil, 0, fmt.Errorf("%s is not a regular file (%s)", path, fi.Mode().Type())
	}
	data, _, err := boundedfile.Read(path, maxSetupConfigBytes)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return data, fi.Mode().Perm(), nil
}

// backupPath is a name for the backup of path taken at now that no file
// has: two runs within one second (setup, then setup with another --dir)
// must not replace the first backup, the only copy of the file as it was
// before tether touched it.
func backupPath(path string, now time.Time) string {
	base := path + ".tether-backup-" + now.UTC().Format("20060102T150405Z")
	name := base
	for i := 1; ; i++ {
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name
		}
		name = fmt.Sprintf("%s-%d", base, i)
	}
}

// writeClientConfig replaces the configuration at path, read as old, by
// updated, unless the file changed since it was read: clients rewrite
// their own configuration while they run (Claude Code's ~/.claude.json
// on every session), and writing over such a change would lose it.
func writeClientConfig(path string, old, updated []byte, mode fs.FileMode) error {
	now, _, err := boundedfile.Read(path, maxSetupConfigBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist) && old == nil:
	case err != nil:
		return fmt.Errorf("%s: %w (nothing written)", path, err)
	case old == nil || !bytes.Equal(now, old):
		return fmt.Errorf("%s changed while tether setup ran (its client rewrote it?): nothing written; run tether setup again", path)
	}
	if err := atomicfile.Write(path, updated, mode, 0o700); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// clientConfigPath is where client keeps its MCP configuration on goos.
func clientConfigPath(client, goos string, getenv func(string) string) (string, error) {
	home := getenv("HOME")
	if goos == "windows" {
		home = getenv("USERPROFILE")
	}
	appData := getenv("APPDATA")
	xdg := getenv("XDG_CONFIG_HOME")
	if xdg == "" && home != "" {
		xdg = filepath.Join(home, ".config")
	}
	need := func(v, what string) error {
		if v == "" {
			return fmt.Errorf("cannot find %s's configuration: $%s is not set (name the file with --config)", client, what)
		}
		return nil
	}
	switch client {
	case "claude-code", "cursor":
		if err := need(home, "HOME"); err != nil {
			return "", err
		}
		if client == "cursor" {
			return filepath.Join(home, ".cursor", "mcp.json"), nil
		}
		return filepath.Join(home, ".claude.json"), nil
	case "claude-desktop", "vscode":
		sub := []string{"Claude", "claude_desktop_config.json"}
		if client == "vscode" {
			sub = []string{"Code", "User", "mcp.json"}
		}
		switch goos {
		case "darwin":
			if err := need(home, "HOME"); err != nil {
				return "", err
			}
			return filepath.Join(append([]string{home, "Library", "Application Support"}, sub...)...), nil
		case "windows":
			if err := need(appData, "APPDATA"); err != nil {
				return "", err
			}
			return filepath.Join(append([]string{appData}, sub...)...), nil
		default:
			if err := need(xdg, "HOME"); err != nil {
				return "", err
			}
			return filepath.Join(append([]string{xdg}, sub...)...), nil
		}
	}
	return "", fmt.Errorf("unknown client %q", client)
}
