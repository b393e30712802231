package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/cli"
)

// newGetCommand is `nacre get`.
func newGetCommand(g *globals) *cobra.Command {
	return &cobra.Command{Use: "get PATH LOCAL", Short: "Copy a file out of the file system (LOCAL - for stdout)", GroupID: "fs", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Get(cmd.Context(), g.env(cmd), args[0], args[1])
		}}
}

// newCatCommand is `nacre cat`.
func newCatCommand(g *globals) *cobra.Command {
	return &cobra.Command{Use: "cat PATH...", Short: "Print files", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Cat(cmd.Context(), g.env(cmd), args)
		}}
}
