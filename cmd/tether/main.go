// Command tether keeps a host's MCP connections in the state that a directory
// of McpConnection manifests declares. This package only parses flags, wires
// the parts together and handles signals.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() { os.Exit(run()) }

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
	root := &cobra.Command{
		Use:           "tether",
		Short:         "Keep MCP connections in the state a directory of manifests declares",
		Version:       currentBuild().String(),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(
		newVersionCmd(),
		newValidateCmd(),
		newDiffCmd(),
		newRunCmd(),
		newGetCmd(),
		newImportCmd(),
		newLoginCmd(),
		newSchemaCmd(),
		newCRDCmd(),
	)
	return root
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
