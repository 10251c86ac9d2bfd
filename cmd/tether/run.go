package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func newRunCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "run",
		Short: "Run the controller on a directory of manifests",
		RunE: func(cmd *cobra.Command, args []string) error {
			return errors.New("run: not implemented yet")
		},
	}
}
