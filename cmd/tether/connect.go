package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/controller/bridge"
	"github.com/tether-mcp/tether/controller/owner"
)

type connectOptions struct {
	dir       string
	statusDir string
	stateDir  string
	wait      time.Duration
	logLevel  string
}

func newConnectCmd() *cobra.Command {
	o := &connectOptions{}
	cmd := &cobra.Command{
		Use:   "connect [--dir DIR]",
		Short: "Bridge an MCP client on stdin/stdout to the tether that owns a directory",
		Long: `connect is what an MCP client launches (a "command" entry in its
configuration) where a tether daemon that runs as the same user (a systemd
user unit, a launchd agent, a tether run in a terminal) owns the directory:
the control socket admits no other user, so a system service under an account
of its own is reached at its HTTP gateway instead. It carries
the client's session on stdin/stdout to that tether's gateway over the
directory's control socket, and starts no server itself.

--dir defaults to the user's default directory of manifests
(tether/manifests under the user's configuration directory).

When no tether owns the directory, connect waits up to --wait for one, then
answers what the client sent with an error and exits 1. When the owner
restarts, connect answers the requests it had in flight with an error, holds
what the client sends, connects again within --wait, replays the client's
initialize and tells the client its lists changed.`,
		Example: `  # in a client's MCP configuration: {"command": "tether", "args": ["connect"]}
  tether connect

  # the tether that owns ./manifests
  tether connect --dir ./manifests`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), os.Stdin, os.Stdout, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.dir, "dir", "", "directory of McpConnection manifests the tether to reach owns (default: the user's default directory)")
	f.StringVar(&o.statusDir, "status-dir", "", "the owner's --status-dir, if it has one (its state directory is under it)")
	f.StringVar(&o.stateDir, "state-dir", "", "the owner's --state-dir, if it has one")
	f.DurationVar(&o.wait, "wait", defaultOwnerWait, "how long to wait for an owner, at start and after the owner went, before answering the client's waiting requests with an error and exiting")
	f.StringVar(&o.logLevel, "log-level", "warn", "log level (logs go to stderr): debug, info, warn or error")
	_ = cmd.MarkFlagDirname("dir")
	return cmd
}

func (o *connectOptions) run(ctx context.Context, in io.Reader, out, stderr io.Writer) error {
	log, err := newLogger(stderr, "text", o.logLevel)
	if err != nil {
		return err
	}
	if o.wait <= 0 {
		return errors.New("--wait must be positive")
	}
	if o.dir == "" && o.stateDir == "" {
		if o.dir, err = owner.DefaultDir(); err != nil {
			return fmt.Errorf("no --dir, and no default directory: %w", err)
		}
	}
	stateDir := stateDirPath(o.stateDir, o.statusDir, o.dir)
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	err = bridge.Run(ctx, bridge.Options{
		Dial: func(ctx context.Context) (io.ReadWriteCloser, error) {
			return owner.DialSession(ctx, stateDir, owner.BridgeWait)
		},
		In:   in,
		Out:  out,
		Wait: o.wait,
		Log:  log,
	})
	switch {
	case errors.Is(err, bridge.ErrNoOwner):
		// The last attempt's error says why: nothing listens, or a socket
		// there is refused.
		return fmt.Errorf("no tether owns %s (state directory %s) after waiting %s: start tether run --dir %s, or its service (%w)", o.dir, stateDir, o.wait, o.dir, err)
	case errors.Is(err, context.Canceled):
		return nil
	}
	return err
}
