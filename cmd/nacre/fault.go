package main

import (
	"github.com/spf13/cobra"

	"nacre/internal/lfsck/admin"
)

// newFaultCommand is `nacre fault`: list, inject and arm
// (internal/lfsck/admin).
func newFaultCommand(g *globals) *cobra.Command {
	top := &cobra.Command{Use: "fault", Short: "Fault injection: damage metadata on purpose, arm fault points", GroupID: "admin"}
	top.AddCommand(newFaultListCommand(g), newFaultInjectCommand(g), newFaultArmCommand(g))
	return top
}

func newFaultListCommand(g *globals) *cobra.Command {
	var asJSON bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the kinds of damage inject knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.FaultList(g.env(cmd), asJSON)
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return list
}

func newFaultInjectCommand(g *globals) *cobra.Command {
	var f struct {
		path   string
		stripe uint32
		yes    bool
	}
	inject := &cobra.Command{
		Use:   "inject KIND --path PATH [--stripe I]",
		Short: "Damage one object of the running cluster in exactly one way",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin.FaultInject(cmd.Context(), g.env(cmd), args[0], f.path, f.stripe, f.yes)
		},
	}
	inject.Flags().StringVar(&f.path, "path", "", "the file or directory to damage")
	inject.Flags().Uint32Var(&f.stripe, "stripe", 0, "the stripe (layout kinds)")
	inject.Flags().BoolVar(&f.yes, "yes", false, "do not ask for confirmation at a terminal")
	inject.MarkFlagRequired("path")
	return inject
}

func newFaultArmCommand(g *globals) *cobra.Command {
	var target string
	arm := &cobra.Command{
		Use:   "arm POINT=ACTION[:ARG][*COUNT] --target mdtN|ostN",
		Short: "Arm a named fault point in a server (error, delay:5ms, crash, panic, off)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin.FaultArm(cmd.Context(), g.env(cmd), target, args[0])
		},
	}
	arm.Flags().StringVar(&target, "target", "mdt0", "the server: mdtN or ostN")
	return arm
}
