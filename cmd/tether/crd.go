package main

import (
	"github.com/spf13/cobra"

	"github.com/tether-mcp/tether/spec"
)

func newCRDCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "crd",
		Short: "Print the McpConnection CustomResourceDefinition for Kubernetes mode",
		Long: `crd prints the CustomResourceDefinition (apiextensions.k8s.io/v1) of
McpConnection, the resource tether run --kubernetes reads: group tether.dev,
version v1alpha1, namespaced, short name mcpc. Its schema is the one tether
schema prints, in the structural form Kubernetes requires, with the status
subresource and the PHASE, TOOLS, READY and AGE columns of kubectl get.`,
		Example: `  tether crd | kubectl apply -f -`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			b, err := spec.CRD()
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(b)
			return err
		},
	}
}
