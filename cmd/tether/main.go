// Command tether keeps a host's MCP connections in the state that a directory
// of McpConnection manifests declares. This package only parses flags, wires
// the parts together and handles signals.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/controller/connection"
	"github.com/tether-mcp/tether/controller/sandbox"
)

func main() {
	// The sandbox launcher (controller/sandbox) is tether re-executed by
	// itself to confine a stdio server between fork and exec: it is
	// handled before the command line, so no flag or command can collide
	// with it and nothing of cobra runs in it.
	if len(os.Args) > 1 && os.Args[1] == sandbox.LauncherArg {
		os.Exit(sandbox.Launch(os.Args[2:]))
	}
	os.Exit(run())
}

func run() int {
	root := newRootCmd()
	if err := root.Execute(); err != nil {
		var ec exitCode
		if asExitCode(err, &ec) {
			return int(ec)
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}

func newRootCmd() *cobra.Command {
	// --version is a flag of tether's own, not cobra's Version field: cobra
	// prints that through text/template, and a binary that links
	// text/template keeps every exported method of every type (the linker
	// cannot tell which a template calls), which cost 5.7 MB of binary and
	// 3 MB of idle RSS (make bench, idle1).
	var showVersion bool
	root := &cobra.Command{
		Use:           "tether",
		Short:         "Keep MCP connections in the state a directory of manifests declares",
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if showVersion {
				_, err := fmt.Fprintln(cmd.OutOrStdout(), currentBuild())
				return err
			}
			return cmd.Help()
		},
	}
	root.Flags().BoolVar(&showVersion, "version", false, "print the version, commit, build date, Go version and platform, as `tether version` does")
	root.AddCommand(
		newVersionCmd(),
		newValidateCmd(),
		newDiffCmd(),
		newRunCmd(),
		newConnectCmd(),
		newGetCmd(),
		newImportCmd(),
		newSetupCmd(),
		newLoginCmd(),
		newSchemaCmd(),
		newCRDCmd(),
		newContainerInitCmd(),
	)
	return root
}

// newContainerInitCmd is the entrypoint of a container server that has env
// (docs/contract.md §1, spec.container): tether's own binary, mounted
// read-only in the container, sets the env and execs the server. Hidden:
// nobody types it.
func newContainerInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:                connection.ContainerInitCommand + " ENVFILE -- COMMAND [ARG...]",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(_ *cobra.Command, args []string) error {
			return connection.RunContainerInit(args)
		},
	}
}

// exitCode is an error that asks for a specific exit status after the
// command has already printed what went wrong.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func asExitCode(err error, target *exitCode) bool {
	ec, ok := err.(exitCode)
	if ok {
		*target = ec
	}
	return ok
}
