package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/manifest"
	"github.com/tether-mcp/tether/controller/oauth"
	"github.com/tether-mcp/tether/controller/state"
	"github.com/tether-mcp/tether/spec"
)

type loginOptions struct {
	dir          string
	statusDir    string
	stateDir     string
	redirectAddr string
	noBrowser    bool
	timeout      time.Duration
}

func newLoginCmd() *cobra.Command {
	o := &loginOptions{}
	cmd := &cobra.Command{
		Use:   "login NAME",
		Short: "Log in to the OAuth-protected server of one connection (spec.http.oauth.authorizationCode)",
		Long: `login gets OAuth tokens for the connection NAME, whose manifest under --dir has
spec.http.oauth.authorizationCode, and stores them where tether run finds them
(the state directory: --state-dir, by default .tether under --status-dir, else
under --dir; give the same flags as to tether run).

It connects to the server, which names its authorization server; registers
tether there (dynamic client registration) unless the manifest names a client
ID or a client ID metadata document; prints the authorization URL (and opens a
browser when there is one); receives the redirect on a loopback port; exchanges
the code (PKCE) and stores the tokens (mode 0600). Then it connects once more
with the stored tokens, as tether run will. A tether run that waits for the
login (phase AuthRequired) resumes by itself.`,
		Example: `  tether login github --dir ./manifests

  # a read-only manifest tree: the same flags as tether run
  tether login github --dir /etc/tether --status-dir /var/lib/tether/status`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runLogin(cmd.Context(), o, args[0], cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", ".", "directory of McpConnection manifests (as tether run --dir)")
	f.StringVar(&o.statusDir, "status-dir", "", "as tether run --status-dir: the state directory defaults to .tether under it")
	f.StringVar(&o.stateDir, "state-dir", "", "where tether run keeps its state, and so the tokens (default: "+state.DirName+" under --status-dir, else under --dir)")
	f.StringVar(&o.redirectAddr, "redirect-addr", "127.0.0.1:0", "loopback address that receives the authorization server's redirect (port 0: any free port)")
	f.BoolVar(&o.noBrowser, "no-browser", false, "only print the authorization URL; do not open a browser")
	f.DurationVar(&o.timeout, "timeout", 10*time.Minute, "bound on the whole login, the person's part included")
	return cmd
}

func runLogin(ctx context.Context, o *loginOptions, name string, stdout, stderr io.Writer) error {
	conn, dir, err := findConnection(o.dir, name)
	if err != nil {
		return err
	}
	switch h := conn.Spec.HTTP; {
	case h == nil || h.OAuth == nil:
		return fmt.Errorf("connection %s has no spec.http.oauth: nothing to log in to", name)
	case h.OAuth.ClientCredentials != nil:
		return fmt.Errorf("connection %s uses spec.http.oauth.clientCredentials: tether gets its tokens by itself, no login needed", name)
	}
	sd, err := state.Open(stateDirPath(o.stateDir, o.statusDir, o.dir), 0)
	if err != nil {
		return err
	}
	defer sd.Close()
	store := oauth.NewStore(sd.Path())
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	var open func(string) error
	if !o.noBrowser {
		open = browserOpener()
	}
	res, err := connection.Login(ctx, connection.Request{
		Name:        name,
		Spec:        &conn.Spec,
		ManifestDir: dir,
		Logger:      slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	}, oauth.LoginOptions{
		Store:       store,
		Out:         stdout,
		OpenBrowser: open,
		Listen:      o.redirectAddr,
	})
	if err != nil {
		return fmt.Errorf("login %s: %w", name, err)
	}
	fmt.Fprintf(stdout, "Logged in: connected to %s %s, %d tools. tether run uses the tokens from now on.\n",
		res.Server.Name, res.Server.Version, res.Tools)
	return nil
}

// findConnection finds the manifest document that declares name under dir,
// as tether run would: the first file in path order that declares it.
func findConnection(dir, name string) (*spec.McpConnection, string, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, "", fmt.Errorf("--dir %s: not a directory", dir)
	}
	tree, err := manifest.ListTree(dir)
	if err != nil {
		return nil, "", fmt.Errorf("--dir %s: %w", dir, err)
	}
	for _, file := range tree.Files {
		docs, err := manifest.Decode(file)
		if err != nil {
			continue
		}
		for _, d := range docs {
			if d.Name != name {
				continue
			}
			if d.Conn == nil {
				msg := "invalid"
				if len(d.Errors) > 0 {
					msg = d.Errors[0].Error()
				}
				return nil, "", fmt.Errorf("the manifest of %s is invalid: %s", name, msg)
			}
			abs, err := filepath.Abs(filepath.Dir(file))
			if err != nil {
				return nil, "", err
			}
			return d.Conn, abs, nil
		}
	}
	return nil, "", fmt.Errorf("no connection named %s under %s", name, dir)
}

// browserOpener opens a URL with xdg-open when there is a display to open
// it on; nil otherwise.
func browserOpener() func(string) error {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return nil
	}
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return nil
	}
	return func(u string) error {
		cmd := exec.Command(path, u)
		if err := cmd.Start(); err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }()
		return nil
	}
}
