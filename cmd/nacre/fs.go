package main

import (
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/layout"
)

func addStripeFlags(cmd *cobra.Command, count *int, size *string, offset *int) {
	cmd.Flags().IntVarP(count, "stripe-count", "c", 0, "stripe count (-1: all OSTs)")
	cmd.Flags().StringVarP(size, "stripe-size", "S", "", "stripe size (e.g. 64K, 1M, 4M)")
	cmd.Flags().IntVarP(offset, "stripe-index", "i", -1, "first OST index (-1: any)")
}

// stripeOpts reads the -c/-S/-i flags; a count or size of 0 given
// explicitly is refused (0 would mean "the default" otherwise).
func stripeOpts(cmd *cobra.Command, count int, size string, offset int) (cli.StripeOpts, error) {
	so := cli.StripeOpts{Count: count, Offset: offset}
	if cmd.Flags().Changed("stripe-count") && count == 0 {
		return so, fmt.Errorf("-c 0: 0 is not a valid stripe count: use -1 (all OSTs) or 1..%d", layout.MaxStripeCount)
	}
	if size != "" {
		v, err := layout.ParseSize(size)
		if err != nil {
			return so, err
		}
		if v == 0 {
			return so, fmt.Errorf("-S %s: 0 is not a valid stripe size: use a multiple of 64K such as 64K, 1M or 4M", size)
		}
		so.Size = v
	}
	if cmd.Flags().Changed("stripe-index") && offset < -1 {
		return so, fmt.Errorf("-i %d: an OST index is 0 or more (-1: any)", offset)
	}
	return so, nil
}

func addFSCommands(root *cobra.Command, g *globals) {
	var long, lsJSON bool
	ls := &cobra.Command{Use: "ls [-l] [--json] [PATH]", Short: "List a directory (default: the current one on a Nacre mount, else /)", GroupID: "fs", Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p := ""
			if len(args) == 1 {
				p = args[0]
			}
			return cli.Ls(cmd.Context(), g.env(cmd), p, long, lsJSON)
		}}
	ls.Flags().BoolVarP(&long, "long", "l", false, "long listing")
	ls.Flags().BoolVar(&lsJSON, "json", false, "print JSON: an array of {name, type, mode, nlink, size, uid, gid, mtime, fid}")
	root.AddCommand(ls)

	var parents bool
	var mode string
	mkdir := &cobra.Command{Use: "mkdir [-p] PATH...", Short: "Make directories", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m := -1 // 0777 less the umask, as mkdir(1)
			if cmd.Flags().Changed("mode") {
				v, err := strconv.ParseUint(mode, 8, 32)
				if err != nil || v > 0o7777 {
					return fmt.Errorf("--mode %q: want an octal mode such as 755", mode)
				}
				m = int(v)
			}
			return cli.Mkdir(cmd.Context(), g.env(cmd), args, parents, m)
		}}
	mkdir.Flags().BoolVarP(&parents, "parents", "p", false, "make parents as needed, no error if existing")
	mkdir.Flags().StringVarP(&mode, "mode", "m", "", "permission bits (octal; default 0777 less the umask, as mkdir)")
	root.AddCommand(mkdir)

	var pc, pi int
	var ps string
	put := &cobra.Command{Use: "put LOCAL PATH", Short: "Copy a local file (- for standard input) into the file system", GroupID: "fs", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			so, err := stripeOpts(cmd, pc, ps, pi)
			if err != nil {
				return err
			}
			return cli.Put(cmd.Context(), g.env(cmd), args[0], args[1], so)
		}}
	addStripeFlags(put, &pc, &ps, &pi)
	root.AddCommand(put)

	root.AddCommand(&cobra.Command{Use: "get PATH LOCAL", Short: "Copy a file out of the file system (LOCAL - for stdout)", GroupID: "fs", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Get(cmd.Context(), g.env(cmd), args[0], args[1])
		}})
	root.AddCommand(&cobra.Command{Use: "cat PATH...", Short: "Print files", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Cat(cmd.Context(), g.env(cmd), args)
		}})

	var statJSON bool
	stat := &cobra.Command{Use: "stat [--json] PATH...", Short: "Show files' attributes and FIDs", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Stat(cmd.Context(), g.env(cmd), args, statJSON)
		}}
	stat.Flags().BoolVar(&statJSON, "json", false, "print JSON (an object for one path, an array for several)")
	root.AddCommand(stat)

	var rmo cli.RmOpts
	rm := &cobra.Command{Use: "rm [-r] [-f] PATH...", Short: "Remove files (and directories with -r)", GroupID: "fs",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 && !rmo.Force { // rm -f with no operand is no error, as rm(1)
				return fmt.Errorf("rm: give the paths to remove")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return cli.Rm(cmd.Context(), g.env(cmd), args, rmo)
		}}
	rm.Flags().BoolVarP(&rmo.Recursive, "recursive", "r", false, "remove directories and their contents")
	rm.Flags().BoolVarP(&rmo.Force, "force", "f", false, "a path that does not exist is no error")
	root.AddCommand(rm)

	root.AddCommand(&cobra.Command{Use: "mv SOURCE DEST | mv SOURCE... DIRECTORY", Short: "Rename or move files or directories", GroupID: "fs", Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Mv(cmd.Context(), g.env(cmd), args)
		}})

	var symbolic bool
	ln := &cobra.Command{Use: "ln [-s] TARGET LINK | ln [-s] TARGET... DIRECTORY", Short: "Make hard links (or symbolic links with -s)", GroupID: "fs", Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Ln(cmd.Context(), g.env(cmd), args, symbolic)
		}}
	ln.Flags().BoolVarP(&symbolic, "symbolic", "s", false, "make a symbolic link")
	root.AddCommand(ln)

	var sc, si int
	var ss string
	setstripe := &cobra.Command{Use: "setstripe -c COUNT -S SIZE [-i OST] PATH",
		Short: "Set a directory's default layout, or create a file (or relayout an empty one) with a layout", GroupID: "fs", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			so, err := stripeOpts(cmd, sc, ss, si)
			if err != nil {
				return err
			}
			return cli.SetStripe(cmd.Context(), g.env(cmd), args[0], so)
		}}
	addStripeFlags(setstripe, &sc, &ss, &si)
	root.AddCommand(setstripe)

	var gsJSON bool
	getstripe := &cobra.Command{Use: "getstripe [--json] PATH", Short: "Show a file's layout (or a directory's default)", GroupID: "fs", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.GetStripe(cmd.Context(), g.env(cmd), args[0], gsJSON)
		}}
	getstripe.Flags().BoolVar(&gsJSON, "json", false, "print JSON: stripe_count, stripe_size, objects [{ost, id}]")
	root.AddCommand(getstripe)

	var dfJSON bool
	var dfDir string
	df := &cobra.Command{Use: "df [--json] [--dir DIR] [MOUNTPOINT]", Short: "Show space and inodes per target", GroupID: "fs", Args: cobra.MaximumNArgs(1),
		Long: `Show space and inodes per target of the file system of --mgs (or of the
local cluster in --dir), or of the Nacre mount that MOUNTPOINT (any path
on it) is on, as lfs df does.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			e := g.env(cmd)
			if dfDir != "" && len(args) == 1 {
				return fmt.Errorf("df: give --dir %s or the mount point %s, not both", dfDir, args[0])
			}
			if err := mgsOfDir(cmd, &e, dfDir); err != nil {
				return err
			}
			if len(args) == 1 {
				mgs, err := e.MountMGS(args[0])
				if err != nil {
					return err
				}
				e.MGS = mgs
			}
			return cli.Df(cmd.Context(), e, dfJSON)
		}}
	df.Flags().BoolVar(&dfJSON, "json", false, "print JSON")
	addClusterDirFlag(df, &dfDir)
	root.AddCommand(df)

	var p2fJSON bool
	path2fid := &cobra.Command{Use: "path2fid [--json] PATH...", Short: "Print the FID of paths", GroupID: "fs", Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Path2Fid(cmd.Context(), g.env(cmd), args, p2fJSON)
		}}
	path2fid.Flags().BoolVar(&p2fJSON, "json", false, `print JSON: {"path", "fid"} for one path, an array for several`)
	root.AddCommand(path2fid)
	var f2pJSON bool
	fid2path := &cobra.Command{Use: "fid2path [--json] [MOUNTPOINT] FID...", Short: "Print every path of FIDs (under MOUNTPOINT, or the mount the current directory is on)", GroupID: "fs",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.Fid2Path(cmd.Context(), g.env(cmd), args, f2pJSON)
		}}
	fid2path.Flags().BoolVar(&f2pJSON, "json", false, `print JSON: {"fid", "paths": [...]} for one FID, an array for several`)
	root.AddCommand(fid2path)
}
