package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/lfsck/admin"
)

func faultCommand(g *globals) *cobra.Command {
	top := &cobra.Command{Use: "fault", Short: "Fault injection: damage metadata on purpose, arm fault points", GroupID: "admin"}
	var jsonOut bool
	list := &cobra.Command{
		Use:   "list [--json]",
		Short: "List the kinds of damage inject knows",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.FaultList(adminEnv(g, cmd), jsonOut)
		},
	}
	list.Flags().BoolVar(&jsonOut, "json", false, "print JSON")
	var inj struct {
		path   string
		stripe uint32
		yes    bool
	}
	inject := &cobra.Command{
		Use:   "inject KIND --path PATH [--stripe I]",
		Short: "Damage one object of the running cluster in exactly one way",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			mgs, paths, err := g.env(cmd).ResolvePaths(inj.path)
			if err != nil {
				return err
			}
			e := adminEnv(g, cmd)
			e.MGS = mgs
			if !inj.yes && cli.IsTerminal(os.Stdin) {
				// Typed at a terminal, maybe on the wrong cluster or
				// path: the damage is real and only the checker undoes
				// it.
				fmt.Fprintf(cmd.ErrOrStderr(), "This damages %s (%s) on purpose; nacre lfsck repairs it, and a file's data may be lost. Type yes to go on: ", inj.path, args[0])
				line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
				if strings.TrimSpace(line) != "yes" {
					return fmt.Errorf("fault inject %s: not confirmed; nothing was changed (--yes skips the question)", inj.path)
				}
			}
			err = admin.FaultInject(cmd.Context(), e, args[0], paths[0], inj.stripe)
			var en *errno.Errno
			var down *client.MDTDownError
			if errors.As(err, &en) || errors.As(err, &down) {
				// A path that does not resolve, or an MDT that does not
				// answer: name the path, not the lookup's layers ("fault
				// inject /nope: no such file or directory").
				return cli.OpError("fault inject", inj.path, err)
			}
			return err
		},
	}
	inject.Flags().StringVar(&inj.path, "path", "", "the file or directory to damage")
	inject.Flags().Uint32Var(&inj.stripe, "stripe", 0, "the stripe (layout kinds)")
	inject.Flags().BoolVar(&inj.yes, "yes", false, "do not ask for confirmation at a terminal")
	inject.MarkFlagRequired("path")
	var target string
	arm := &cobra.Command{
		Use:   "arm POINT=ACTION[:ARG][*COUNT] --target mdtN|ostN",
		Short: "Arm a named fault point in a server (error, delay:5ms, crash, panic, off)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return admin.FaultArm(cmd.Context(), adminEnv(g, cmd), target, args[0])
		},
	}
	arm.Flags().StringVar(&target, "target", "mdt0", "the server: mdtN or ostN")
	top.AddCommand(list, inject, arm)
	return top
}
