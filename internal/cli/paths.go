package cli

import (
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"nacre/internal/client"
	"nacre/internal/fusefs"
)

// Path arguments of the client commands (ls, put, rm, setstripe, ...).
//
// A command may name a file by its path from the file system root
// ("/m1/x"), or, as Lustre's lfs does, by its path on a Nacre FUSE mount of
// this machine ("/mnt/nacre/m1/x", or "x" in /mnt/nacre/m1). PathEnv.Resolve
// decides which:
//
//  1. a relative argument is made absolute against the current directory;
//  2. if that path lies on a Nacre FUSE mount (file system type fuse.nacre
//     in /proc/self/mountinfo, the deepest mount covering the path), it is
//     translated to the path below that mount;
//  3. otherwise, if the path goes through a local symbolic link into such a
//     mount, the same, after the link is followed;
//  4. otherwise a relative argument is refused, and an absolute one keeps
//     its meaning: a path from the file system root.
//
// A mount belongs to the file system of the MGS its daemon recorded
// (fusefs.Record). A command given no MGS uses that one; a command given
// another MGS refuses the path, so `rm` never removes a file of another
// file system by mistake. A mount made by another user has no record this
// process can read; such a mount is assumed to be of the command's file
// system.

// PathEnv is what resolving a path argument reads from the machine.
type PathEnv struct {
	// Cwd is the current directory as the kernel knows it (no symbolic
	// links); CwdErr says why it is unknown.
	Cwd    string
	CwdErr error
	// Mounts is the mount table, in /proc/self/mountinfo order.
	Mounts []fusefs.MountInfo
	// EvalSymlinks follows symbolic links (filepath.EvalSymlinks); nil to
	// not follow them.
	EvalSymlinks func(string) (string, error)
	// MountMGS is the MGS address a mount's daemon recorded, "" if none.
	MountMGS func(dir string) string
}

// LocalPathEnv reads this process's current directory and mount table;
// the mounts' daemons record their MGS in stateDir (fusefs.StateDir).
func LocalPathEnv(stateDir string) PathEnv {
	pe := PathEnv{EvalSymlinks: filepath.EvalSymlinks, MountMGS: func(dir string) string { return recordedMGS(stateDir, dir) }}
	pe.Cwd, pe.CwdErr = syscall.Getwd()
	pe.Mounts = fusefs.Mounts()
	return pe
}

func recordedMGS(stateDir, dir string) string {
	r, err := fusefs.ReadRecord(stateDir, dir)
	if err != nil {
		return ""
	}
	return r.MGS
}

// FSPath is a resolved path argument.
type FSPath struct {
	Arg   string // as given
	Path  string // from the file system root
	Mount string // the Nacre mount it was found under; "" if taken as a path from the root
	MGS   string // the MGS that mount's daemon recorded, if any
}

// Resolve turns a command's path argument into a path from the file
// system root (see the comment at the top of this file).
func (pe PathEnv) Resolve(arg string) (FSPath, error) {
	fp := FSPath{Arg: arg}
	if arg == "" {
		return fp, fmt.Errorf("empty path")
	}
	relative := !strings.HasPrefix(arg, "/")
	abs := arg
	if relative {
		if pe.Cwd == "" {
			err := pe.CwdErr
			if err == nil {
				err = fmt.Errorf("unknown")
			}
			return fp, fmt.Errorf("relative path %s: cannot read the current directory: %v", arg, err)
		}
		abs = path.Join(pe.Cwd, arg)
	}
	abs = path.Clean(abs)
	if pe.onMount(&fp, abs) {
		return fp, nil
	}
	if pe.EvalSymlinks != nil {
		// A local symbolic link into a mount (the last component is not
		// followed: `rm link` removes the link).
		dir, rest := path.Dir(abs), path.Base(abs)
		for {
			if real, err := pe.EvalSymlinks(dir); err == nil {
				if real = path.Join(real, rest); real != abs && pe.onMount(&fp, real) {
					return fp, nil
				}
				break
			}
			if dir == "/" || dir == "." {
				break
			}
			rest = path.Join(path.Base(dir), rest)
			dir = path.Dir(dir)
		}
	}
	if relative {
		like := "/" + path.Clean(arg)
		if strings.HasPrefix(path.Clean(arg), "..") {
			like = "/dir/" + path.Base(arg)
		}
		return fp, fmt.Errorf("relative path %s is not under a Nacre mount (%s is not): give a path from the file system root, like %s, or cd into a Nacre mount", arg, abs, like)
	}
	fp.Path = arg
	return fp, nil
}

// onMount fills fp if abs (clean, absolute) lies on a Nacre mount.
func (pe PathEnv) onMount(fp *FSPath, abs string) bool {
	var best *fusefs.MountInfo
	for i := range pe.Mounts {
		m := &pe.Mounts[i]
		// The deepest mount covering abs; of mounts stacked on one
		// directory, the last.
		if under(abs, m.Dir) && (best == nil || len(m.Dir) >= len(best.Dir)) {
			best = m
		}
	}
	if best == nil || best.FsType != fusefs.NacreFsType {
		return false
	}
	root := best.Root
	if root == "" {
		root = "/"
	}
	fp.Path = path.Join(root, strings.TrimPrefix(abs, best.Dir))
	fp.Mount = best.Dir
	if pe.MountMGS != nil {
		fp.MGS = pe.MountMGS(best.Dir)
	}
	return true
}

// under reports whether p is dir or inside it (both clean and absolute).
func under(p, dir string) bool {
	if dir == "/" || p == dir {
		return true
	}
	return strings.HasPrefix(p, dir) && p[len(dir)] == '/'
}

// resolvePaths resolves args and picks the MGS of the command: the one
// given (--mgs, NACRE_MGS), which every mount a path is on must be of, or
// else the one the mounts recorded.
func (e Env) resolvePaths(args ...string) (string, []FSPath, error) {
	pe := e.pathEnv()
	mgs := e.MGS
	from := "--mgs or NACRE_MGS"
	out := make([]FSPath, len(args))
	for i, a := range args {
		fp, err := pe.Resolve(a)
		if err != nil {
			return "", nil, err
		}
		out[i] = fp
		switch {
		case fp.MGS == "":
		case mgs == "":
			mgs, from = fp.MGS, "the mount "+fp.Mount
		case !client.SameMGS(mgs, fp.MGS):
			return "", nil, fmt.Errorf("%s is on the Nacre mount %s of the file system whose MGS is %s, but this command uses the MGS %s (from %s): give --mgs %s, or a path from the file system root",
				a, fp.Mount, fp.MGS, mgs, from, fp.MGS)
		}
	}
	return mgs, out, nil
}

func (e Env) pathEnv() *PathEnv {
	if e.Paths != nil {
		return e.Paths
	}
	l := LocalPathEnv(e.MountState)
	return &l
}

// cwdOnMount reports whether the current directory is on a Nacre mount.
func (e Env) cwdOnMount() bool {
	fp, err := e.pathEnv().Resolve(".")
	return err == nil && fp.Mount != ""
}

// MountMGS is the MGS of the file system mounted where path is (df
// MOUNTPOINT): the mount's, which --mgs, if given, must name too.
func (e Env) MountMGS(path string) (string, error) {
	fp, err := e.pathEnv().Resolve(path)
	if err != nil {
		return "", err
	}
	if fp.Mount == "" {
		return "", fmt.Errorf("%s is not on a Nacre mount: give a mount point (see `mount -t fuse.nacre`), or leave it out for the file system of --mgs", path)
	}
	mgs, _, err := e.resolvePaths(path)
	if err != nil {
		return "", err
	}
	if mgs == "" {
		return "", fmt.Errorf("the Nacre mount %s did not record its MGS: give --mgs", fp.Mount)
	}
	return mgs, nil
}

// ResolvePaths resolves path arguments (PathEnv.Resolve) into paths from
// the file system root, and returns the MGS to use for them (e.MGS, or the
// one of the mount they are on).
func (e Env) ResolvePaths(args ...string) (string, []string, error) {
	mgs, fps, err := e.resolvePaths(args...)
	if err != nil {
		return "", nil, err
	}
	out := make([]string, len(fps))
	for i, fp := range fps {
		out[i] = fp.Path
	}
	return mgs, out, nil
}
