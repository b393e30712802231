// Command nacre is the one binary of the Nacre parallel file system: it
// formats and serves targets, brings up a local cluster, and is the client
// and admin CLI. Each file here is one command or command group, a
// newXCommand that wires the command's flags (a struct of its own) to a
// function of a package under internal/; no file system logic lives in
// this package. The environment is read here only (environment.go).
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"nacre/internal/cli"
	"nacre/internal/pki"
	"nacre/internal/version"
)

// exitError carries a specific exit status.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	// First, before anything runs or is written: a signal that would end
	// the process ends the command's context instead, so that the command
	// cleans up (`nacre up` stops its cluster). SIGHUP is a closed
	// terminal, which is Ctrl-C for a command that runs in it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	root := newRoot()
	out := &countWriter{f: os.Stdout}
	root.SetOut(out)
	ran, err := root.ExecuteContextC(ctx)
	interrupted := ctx.Err() != nil
	stop()
	if err != nil && wantsJSON(ran) && out.n == 0 && !errors.Is(err, cli.ErrReported) {
		// A script that asked for JSON reads standard output: it gets a
		// document there too (the message still goes to standard error).
		cli.WriteJSONError(os.Stdout, err)
	}
	if err != nil {
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		if interrupted && errors.Is(err, context.Canceled) {
			// Ctrl-C (or SIGTERM, SIGHUP): say so, not "context canceled".
			fmt.Fprintln(os.Stderr, "nacre: interrupted")
			os.Exit(130)
		}
		if errors.Is(err, cli.ErrReported) {
			os.Exit(1) // each failure has been printed
		}
		fmt.Fprintln(os.Stderr, "nacre:", err)
		os.Exit(1)
	}
}

// countWriter counts what a command wrote to standard output.
type countWriter struct {
	f *os.File
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.f.Write(p)
	c.n += int64(n)
	return n, err
}

// Fd is standard output's descriptor, so that a command still sees a
// terminal there (cli.IsTerminal) through this wrapper: ls quotes names
// and top redraws in place only at a terminal.
func (c *countWriter) Fd() uintptr { return c.f.Fd() }

// wantsJSON reports whether the command that ran was asked for --json.
func wantsJSON(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

// globals are the flags every command sees, and the environment.
type globals struct {
	mgs     string
	environ environ
	// tlsDir is --tls-dir, or NACRE_TLS_DIR; creds are what it holds,
	// loaded before a client command runs (nil: no TLS).
	tlsDir string
	creds  *pki.Creds
}

func (g *globals) env(cmd *cobra.Command) cli.Env {
	return cli.Env{MGS: g.mgs, Out: cmd.OutOrStdout(), Err: cmd.ErrOrStderr(), Stdin: cmd.InOrStdin(),
		MountState: g.environ.mountState(), FollowerReads: g.environ.followerReads(), TLS: g.creds}
}

// noClientCreds are the commands that make no client connection with
// the command's credentials: servers take theirs from their target
// directory, and `nacre up`, `down` and `cert` from the cluster's.
var noClientCreds = map[string]bool{"serve": true, "format": true, "up": true, "down": true, "cert": true, "help": true, "umount": true}

// loadCreds loads the credentials of --tls-dir or NACRE_TLS_DIR, for a
// command that connects as a client.
func (g *globals) loadCreds(cmd *cobra.Command) error {
	if f := cmd.Flags().Lookup("tls-dir"); f == nil || !f.Changed {
		g.tlsDir = g.environ.get("NACRE_TLS_DIR")
	}
	top := cmd
	for top.HasParent() && top.Parent().HasParent() {
		top = top.Parent()
	}
	if g.tlsDir == "" || noClientCreds[top.Name()] {
		return nil
	}
	c, err := pki.Load(g.tlsDir)
	if err != nil {
		return fmt.Errorf("%w (from --tls-dir or NACRE_TLS_DIR)", err)
	}
	g.creds = c
	return nil
}

func newRoot() *cobra.Command { return newRootIn(os.Getenv) }

// newRootIn is the command tree, reading the environment from getenv.
func newRootIn(getenv environ) *cobra.Command {
	g := &globals{environ: getenv}
	root := &cobra.Command{
		Use:   "nacre",
		Short: "Nacre: a parallel file system with Lustre's architecture",
		Long: `Nacre is a parallel file system: a management server (MGS), metadata
servers whose targets are Raft groups (MDT), object storage servers holding
striped file data (OST), a client library and a FUSE mount.

Start a local cluster:   nacre up --dir ./nacre-cluster
Then use it:             export NACRE_MGS=<address printed by up>; nacre ls /`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// The protocol and the store format are what decide whether two
		// releases mix (docs/architecture.md, Versions and upgrades).
		Version: fmt.Sprintf("%s (protocol %d, store format %d)", version.Software, version.Protocol, version.Format),
	}
	root.SetFlagErrorFunc(flagError) // and so every subcommand's
	// The flag's own default is empty and NACRE_MGS is read once the
	// command line is parsed (PersistentPreRunE): a default taken from the
	// environment was also printed by the help after the usage's own
	// "(default $NACRE_MGS)", which then said it twice.
	root.PersistentFlags().StringVar(&g.mgs, "mgs", "", "MGS address HOST:PORT (default $NACRE_MGS)")
	root.PersistentFlags().StringVar(&g.tlsDir, "tls-dir", "", "TLS credentials directory: ca.pem, cert.pem, key.pem (default $NACRE_TLS_DIR; none: no TLS)")
	var cpuprofile string
	var profFile *os.File
	root.PersistentFlags().StringVar(&cpuprofile, "cpuprofile", "", "write a CPU profile of this command to FILE")
	root.PersistentFlags().MarkHidden("cpuprofile")
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error {
		if f := cmd.Flags().Lookup("mgs"); f == nil || !f.Changed {
			g.mgs = g.environ.get("NACRE_MGS")
		}
		if err := g.loadCreds(cmd); err != nil {
			return err
		}
		if cpuprofile == "" {
			return nil
		}
		f, err := os.Create(cpuprofile)
		if err != nil {
			return err
		}
		profFile = f
		return pprof.StartCPUProfile(f)
	}
	root.PersistentPostRun = func(cmd *cobra.Command, _ []string) {
		if profFile != nil {
			pprof.StopCPUProfile()
			profFile.Close()
		}
	}
	root.AddGroup(&cobra.Group{ID: "server", Title: "Servers and clusters:"}, &cobra.Group{ID: "fs", Title: "Files:"},
		&cobra.Group{ID: "admin", Title: "Administration and benchmarks:"})
	root.AddCommand(
		// Servers and clusters: a file each.
		newFormatCommand(g), newServeCommand(g), newUpCommand(g), newDownCommand(g), newStatusCommand(g), newInstallCommand(g),
		// Files.
		newLsCommand(g), newMkdirCommand(g), newPutCommand(g), newGetCommand(g), newCatCommand(g), newStatCommand(g),
		newRmCommand(g), newMvCommand(g), newLnCommand(g), newSetstripeCommand(g), newGetstripeCommand(g), newGetdirstripeCommand(g), newDfCommand(g),
		newPath2fidCommand(g), newFid2pathCommand(g), newMountCommand(g), newUmountCommand(g),
		// Administration and benchmarks.
		newLfsckCommand(g), newFaultCommand(g), newMdtCommand(g), newReplicaCommand(g), newCertCommand(g), newNodemapCommand(g), newStatsCommand(g), newTopCommand(g),
		newBenchCommand(g),
		environmentTopic())
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes a command that only groups others
// (lfsck, replica, fault, mdt...) fail on an unknown subcommand: cobra
// printed the usage and exited 0, so `nacre lfsck strat` looked like
// success to a script. Without arguments it still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, s := range c.Commands() {
		refuseUnknownSubcommands(s)
		if s.HasSubCommands() && s.Run == nil && s.RunE == nil {
			s.Args = cobra.NoArgs
			s.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
		}
	}
}

// flagError names the flag and the form it takes when a flag's value does
// not parse: pflag says `invalid argument "abc" for "-c, --stripe-count"
// flag: strconv.ParseInt: parsing "abc": invalid syntax`, which names Go's
// parser rather than what to type.
func flagError(_ *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	f := iv.GetFlag()
	name := "--" + f.Name
	if f.Shorthand != "" {
		name = "-" + f.Shorthand + "/" + name
	}
	var want string
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64":
		want = "a whole number, such as 4"
	case "uint", "uint8", "uint16", "uint32", "uint64":
		want = "a whole number, 0 or more, such as 4"
	case "float32", "float64":
		want = "a number, such as 1.5"
	case "duration":
		want = "a duration with its unit, such as 500ms, 2s or 1m"
	case "bool":
		want = "true or false"
	default:
		return err
	}
	if ne := (*strconv.NumError)(nil); f.Value.Type() != "duration" && !errors.As(err, &ne) {
		// A flag that checks its own range says it (lfsck's -s, -w).
		return fmt.Errorf("%s %q: %w", name, iv.GetValue(), errors.Unwrap(err))
	}
	if errors.Is(err, strconv.ErrRange) {
		want = "out of range; want " + want
	} else {
		want = "want " + want
	}
	return fmt.Errorf("%s %q: %s", name, iv.GetValue(), want)
}

// selfName is how to run this binary again in the hints printed for the
// user: "nacre" when that is what the PATH finds, else the path it was
// run by (scripts/up.sh runs bin/nacre, which is not on the PATH).
func selfName() string {
	return selfNameFor(os.Args[0], exec.LookPath, os.Executable)
}

func selfNameFor(arg0 string, lookPath func(string) (string, error), executable func() (string, error)) string {
	self, err := executable()
	if err != nil {
		return "nacre"
	}
	if p, err := lookPath("nacre"); err == nil {
		if a, err := filepath.EvalSymlinks(p); err == nil {
			if b, err := filepath.EvalSymlinks(self); err == nil && a == b {
				return "nacre"
			}
		}
	}
	if strings.Contains(arg0, "/") {
		return arg0
	}
	return self
}
