package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	pb "nacre/api/nacrepb"
	"nacre/internal/lfsck/admin"
)

// newLfsckCommand is `nacre lfsck`: the checker's commands
// (internal/lfsck/admin).
func newLfsckCommand(g *globals) *cobra.Command {
	top := &cobra.Command{Use: "lfsck", Short: "The online checker: OI scrub, namespace and layout check and repair", GroupID: "admin"}
	top.AddCommand(newLfsckStartCommand(g), newLfsckStopCommand(g), newLfsckQueryCommand(g), newLfsckStatusCommand(g),
		newLfsckSetCommand(g), newLfsckDigestCommand(g))
	for _, c := range top.Commands() {
		if c.Flags().Lookup("mdt") != nil {
			c.PreRunE = checkMDTFlags
		}
	}
	return top
}

type lfsckStartFlags struct {
	types                              []string
	speed                              uint64
	window                             uint32
	dry, reset, orphan, ostobj, mdtobj bool
	policy                             string
	mdt                                int
	all, wait, json                    bool
	checkpointMs                       int64
}

func newLfsckStartCommand(g *globals) *cobra.Command {
	var st lfsckStartFlags
	start := &cobra.Command{
		Use:   "start [-t scrub,namespace,layout] [-s SPEED] [-n] [-r] [-o] [-c] [-C] [-e failout|continue] [-w WINDOW] [--mdt N | -A] [--wait]",
		Short: "Start (or resume) the checker",
		Long: `Start the checker on an MDT (MDT0 by default, every MDT with -A).

Without -r, a check that was stopped, paused or crashed resumes from its
last checkpoint with its saved parameters. Repairs that create data (-c, -C)
and orphan adoption into .nacre/lost+found (-o) happen only when asked;
otherwise those inconsistencies are reported. -n is a dry run: it reports
and changes nothing at all. See docs/lfsck.md.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkLfsckStartFlags(st.types, st.policy); err != nil {
				return err
			}
			if cmd.Flags().Changed("type") && len(st.types) == 0 {
				return fmt.Errorf("lfsck start -t \"\": give scrub, namespace, layout or all (comma-separated), or leave -t out")
			}
			req := &pb.LfsckStartRequest{Types: st.types, DryRun: st.dry, Reset_: st.reset, Orphan: st.orphan,
				CreateOstobj: st.ostobj, CreateMdtobj: st.mdtobj, ErrorPolicy: st.policy, CheckpointIntervalMs: st.checkpointMs}
			if cmd.Flags().Changed("speed") {
				req.Speed = &st.speed
			}
			if cmd.Flags().Changed("window") {
				req.Window = &st.window
			}
			return admin.Start(cmd.Context(), g.env(cmd), admin.StartOptions{Req: req, MDT: st.mdt, All: st.all, Wait: st.wait, JSON: st.json})
		},
	}
	f := start.Flags()
	f.StringSliceVarP(&st.types, "type", "t", nil, "components: scrub, namespace, layout, all (default: resume the interrupted ones, else all)")
	f.VarP(speedFlag(&st.speed), "speed", "s", "speed limit in objects per second (0: no limit)")
	f.BoolVarP(&st.dry, "dryrun", "n", false, "dry run: report only, write nothing")
	f.BoolVarP(&st.reset, "reset", "r", false, "start from the beginning, with default parameters")
	f.BoolVarP(&st.orphan, "orphan", "o", false, "adopt orphans (OST objects, MDT objects, lost parents) into .nacre/lost+found")
	f.BoolVarP(&st.ostobj, "create-ostobj", "c", false, "re-create missing OST objects of layouts (dangling references)")
	f.BoolVarP(&st.mdtobj, "create-mdtobj", "C", false, "re-create missing MDT objects of directory entries (dangling names)")
	f.StringVarP(&st.policy, "error", "e", "", "on a failure: continue (default) or failout")
	f.VarP(windowFlag(&st.window), "window", "w", "layout checks in flight to the OSTs (default 65536)")
	f.IntVar(&st.mdt, "mdt", 0, "MDT index")
	f.BoolVarP(&st.all, "all", "A", false, "every MDT")
	f.BoolVar(&st.wait, "wait", false, "wait until it ends (progress on a terminal), then print the result")
	f.BoolVar(&st.json, "json", false, "print JSON only on standard output: the result with --wait, else the MDTs started")
	f.Int64Var(&st.checkpointMs, "checkpoint-interval-ms", 0, "checkpoint interval (default 60000)")
	f.MarkHidden("checkpoint-interval-ms")
	return start
}

func newLfsckStopCommand(g *globals) *cobra.Command {
	var f struct {
		mdt int
		all bool
	}
	stop := &cobra.Command{
		Use:   "stop [--mdt N | -A]",
		Short: "Stop the checker (it checkpoints; start resumes it); returns once stopped",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.Stop(cmd.Context(), g.env(cmd), f.mdt, f.all)
		},
	}
	stop.Flags().IntVar(&f.mdt, "mdt", 0, "MDT index")
	stop.Flags().BoolVarP(&f.all, "all", "A", false, "every MDT")
	return stop
}

func newLfsckQueryCommand(g *globals) *cobra.Command {
	var f struct {
		mdt             int
		all, json, wait bool
	}
	query := &cobra.Command{
		Use:   "query [--json] [--wait] [--mdt N | -A]",
		Short: "Show every component's status, figures and counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.Query(cmd.Context(), g.env(cmd), f.mdt, f.all, f.json, f.wait)
		},
	}
	query.Flags().IntVar(&f.mdt, "mdt", 0, "MDT index")
	query.Flags().BoolVarP(&f.all, "all", "A", false, "every MDT")
	query.Flags().BoolVar(&f.json, "json", false, "print JSON")
	query.Flags().BoolVarP(&f.wait, "wait", "w", false, "wait until no MDT is checking")
	return query
}

func newLfsckStatusCommand(g *globals) *cobra.Command {
	var f struct {
		comp string
		mdt  int
		json bool
	}
	status := &cobra.Command{
		Use:   "status -t COMPONENT [--json] [--mdt N]",
		Short: "Show one component in full (like Lustre's lfsck_namespace, lfsck_layout, oi_scrub)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			comp := strings.TrimSpace(f.comp)
			if comp == "" {
				return fmt.Errorf("lfsck status shows one component: give -t scrub, -t namespace or -t layout (nacre lfsck query shows them all)")
			}
			return admin.Status(cmd.Context(), g.env(cmd), f.mdt, comp, f.json)
		},
	}
	status.Flags().StringVarP(&f.comp, "type", "t", "", "scrub, namespace or layout")
	status.Flags().IntVar(&f.mdt, "mdt", 0, "MDT index")
	status.Flags().BoolVar(&f.json, "json", false, "print JSON")
	return status
}

func newLfsckSetCommand(g *globals) *cobra.Command {
	var set struct {
		speed  uint64
		window uint32
		mdt    int
		all    bool
	}
	setCmd := &cobra.Command{
		Use:   "set [-s SPEED] [-w WINDOW] [--mdt N | -A]",
		Short: "Change the speed limit or window of a running check",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var sp *uint64
			var w *uint32
			if cmd.Flags().Changed("speed") {
				sp = &set.speed
			}
			if cmd.Flags().Changed("window") {
				w = &set.window
			}
			if sp == nil && w == nil {
				return fmt.Errorf("give -s SPEED or -w WINDOW")
			}
			return admin.Set(cmd.Context(), g.env(cmd), set.mdt, set.all, sp, w)
		},
	}
	setCmd.Flags().VarP(speedFlag(&set.speed), "speed", "s", "objects per second (0: no limit)")
	setCmd.Flags().VarP(windowFlag(&set.window), "window", "w", "layout checks in flight")
	setCmd.Flags().IntVar(&set.mdt, "mdt", 0, "MDT index")
	setCmd.Flags().BoolVarP(&set.all, "all", "A", false, "every MDT")
	return setCmd
}

func newLfsckDigestCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:    "digest",
		Short:  "Print a digest of every target's store (a dry run must not change them)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return admin.Digests(cmd.Context(), g.env(cmd))
		},
	}
}

// checkMDTFlags refuses a negative --mdt ("no MDT-001 in the
// configuration"), and --mdt with -A, which silently meant every MDT.
func checkMDTFlags(cmd *cobra.Command, _ []string) error {
	mdt, _ := cmd.Flags().GetInt("mdt")
	if mdt < 0 {
		return fmt.Errorf("--mdt %d: an MDT index is 0 or more (nacre status lists the MDTs)", mdt)
	}
	if all, _ := cmd.Flags().GetBool("all"); all && cmd.Flags().Changed("mdt") {
		return fmt.Errorf("give --mdt N for one MDT or -A for every MDT, not both")
	}
	return nil
}

// checkLfsckStartFlags refuses an unknown component or error policy
// before anything is sent, with the choices, instead of the MDT's RPC
// error.
func checkLfsckStartFlags(types []string, policy string) error {
	for _, t := range types {
		switch strings.TrimSpace(t) {
		case "scrub", "namespace", "layout", "all":
		default:
			return fmt.Errorf("lfsck start -t %q: unknown component; give scrub, namespace, layout or all (comma-separated)", t)
		}
	}
	switch policy {
	case "", "continue", "failout":
	default:
		return fmt.Errorf("lfsck start -e %q: give continue or failout", policy)
	}
	return nil
}

// countFlag is a flag holding a count in a range, whose error gives the
// range (pflag names the flag and the value before it): pflag's own
// Uint64 flag said only `strconv.ParseUint: parsing "-5": invalid syntax`.
type countFlag[T uint32 | uint64] struct {
	p        *T
	min, max uint64
	rng      string // the range, for errors
}

func (f *countFlag[T]) Set(s string) error {
	v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
	if err != nil || v < f.min || v > f.max {
		return errors.New(f.rng)
	}
	*f.p = T(v)
	return nil
}

func (f *countFlag[T]) String() string { return strconv.FormatUint(uint64(*f.p), 10) }
func (f *countFlag[T]) Type() string   { return "uint" }

// speedFlag is -s: objects per second, 0 for no limit.
func speedFlag(p *uint64) *countFlag[uint64] {
	return &countFlag[uint64]{p: p, max: 1<<64 - 1, rng: "the speed limit is 0 (no limit) or more objects per second"}
}

// windowFlag is -w, with the range the checker accepts.
func windowFlag(p *uint32) *countFlag[uint32] {
	return &countFlag[uint32]{p: p, min: 1, max: 1 << 20, rng: "the window must be 1 to 1048576"}
}
