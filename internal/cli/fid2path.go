package cli

import (
	"context"
	"fmt"
	"path"
	"strings"

	"nacre/internal/client"
	"nacre/internal/fid"
)

// FIDPaths is one result of `nacre fid2path --json`.
type FIDPaths struct {
	FID   string   `json:"fid"` // as given
	Paths []string `json:"paths"`
	Error string   `json:"error,omitempty"` // why it failed (several operands)
}

// Fid2Path prints every path of each FID (args: [MOUNTPOINT] FID...). As
// `lfs fid2path /mnt/lustre FID`, the paths are under the Nacre mount
// MOUNTPOINT when one is given (or any path on that mount), else under
// the Nacre mount holding the current directory if there is one (of this
// file system), else from the file system root. A mount of a
// subdirectory (a bind mount) shows only the paths inside it. With asJSON
// it prints a FIDPaths for one FID, an array of them for several.
func Fid2Path(ctx context.Context, e Env, args []string, asJSON bool) error {
	var mountArg string
	if len(args) > 1 {
		if _, err := fid.Parse(args[0]); err != nil {
			mountArg, args = args[0], args[1:]
		}
	}
	if len(args) == 0 {
		return fmt.Errorf("fid2path: give a FID ([0xSEQ:0xOID:0xVER], as path2fid prints)")
	}
	var mnt *mountView
	pe := e.pathEnv()
	if mountArg != "" {
		mgs, fps, err := e.resolvePaths(mountArg)
		if err != nil {
			return fmt.Errorf("fid2path %s: %w", mountArg, err)
		}
		if fps[0].Mount == "" {
			return fmt.Errorf("fid2path: %s is not a Nacre mount (no fuse.nacre mount covers it in /proc/self/mountinfo): give the mount point of a Nacre mount, or only FIDs for paths from the file system root", mountArg)
		}
		if mnt, err = newMountView(pe, fps[0].Mount); err != nil {
			return err
		}
		e.MGS = mgs
	} else if fp, err := pe.Resolve("."); err == nil && fp.Mount != "" && (fp.MGS == "" || e.MGS == "" || client.SameMGS(e.MGS, fp.MGS)) {
		if mnt, err = newMountView(pe, fp.Mount); err != nil {
			return err
		}
		if e.MGS == "" {
			e.MGS = fp.MGS
		}
	}
	c, err := e.Connect(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	r := e.reporter("fid2path")
	// Paths come from the file system's names: quoted at a terminal.
	show := showNames(e.Out)
	var out []FIDPaths
	for i, s := range args {
		err := func() error {
			f, err := fid.Parse(s)
			if err != nil {
				return err
			}
			paths, err := c.Fid2Path(ctx, f)
			if err != nil {
				return err
			}
			if mnt != nil {
				if paths, err = mnt.show(paths); err != nil {
					return err
				}
			}
			out = append(out, FIDPaths{FID: s, Paths: paths})
			if !asJSON {
				for _, p := range paths {
					fmt.Fprintln(e.Out, show(p))
				}
			}
			return nil
		}()
		if err != nil {
			if fatal(ctx, err) {
				return r.stop(args, i, err)
			}
			r.fail(s, err)
			if len(args) > 1 {
				why := strings.TrimPrefix(operandMessage("fid2path", s, err), "fid2path "+s+": ")
				out = append(out, FIDPaths{FID: s, Error: why})
			}
		}
	}
	if asJSON {
		if err := jsonOneOrMany(e.Out, len(args), out); err != nil {
			return err
		}
	}
	return r.result()
}

// mountView shows paths from the file system root as paths on a mount.
type mountView struct {
	dir  string // the mount point
	root string // the directory of the file system it shows ("/" unless a bind mount)
}

func newMountView(pe *PathEnv, dir string) (*mountView, error) {
	fp, err := pe.Resolve(dir)
	if err != nil {
		return nil, err
	}
	return &mountView{dir: dir, root: fp.Path}, nil
}

// show maps paths from the file system root to paths on the mount,
// leaving out those outside the directory it shows.
func (m *mountView) show(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if under(p, m.root) {
			out = append(out, path.Join(m.dir, strings.TrimPrefix(p, m.root)))
		}
	}
	if len(out) == 0 && len(paths) > 0 {
		return nil, fmt.Errorf("no path under the mount %s, which shows %s of the file system; its paths from the file system root: %s",
			m.dir, m.root, strings.Join(paths, " "))
	}
	return out, nil
}
