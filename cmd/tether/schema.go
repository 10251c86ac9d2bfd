package main

import (
	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/spec"
)

func newSchemaCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "schema",
		Short: "Print the JSON Schema of the McpConnection manifest",
		Long: `schema prints the JSON Schema (draft 2020-12) of an McpConnection manifest
document, generated from tether's Go types. Editors that speak the YAML
language server protocol complete and check manifests against it when a
manifest's first line names it:

  # yaml-language-server: $schema=mcpconnection.schema.json

The schema catches unknown fields, wrong types, missing required fields, two
transports, bad durations, names and enums as you type; tether validate checks
the rest (unique names, URL schemes, glob syntax, positive durations).`,
		Example: `  tether schema > mcpconnection.schema.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := cmd.OutOrStdout().Write(spec.Schema())
			return err
		},
	}
}
