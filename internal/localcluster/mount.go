package localcluster

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"nacre/internal/fusefs"
)

// mountFile records, in the cluster directory, where `nacre up --mount`
// mounted the file system, so that Down unmounts it first.
const mountFile = "mount"

// mountLocal mounts the cluster at dir with the mount daemon of bin,
// which records itself in stateDir.
func mountLocal(bin, clusterDir, mgs, dir, stateDir string, out io.Writer) error {
	abs, err := fusefs.MountPath(dir)
	if err != nil {
		return err
	}
	state, err := mountPointState(clusterDir, abs, stateDir)
	if err != nil {
		return err
	}
	switch state {
	case mountLiveOurs:
		fmt.Fprintf(out, "mounted at %s already\n", abs)
		return nil
	case mountDeadOurs:
		// This cluster's own mount, whose daemon died with the
		// servers (a power cut, kill -9): it is of no use to anyone.
		if err := fusefs.Umount(abs, fusefs.UmountOptions{Force: true, StateDir: stateDir}); err != nil {
			return fmt.Errorf("%s is this cluster's mount from before, whose daemon is gone, and unmounting it failed: %w; run `nacre umount --force %s`", abs, err, abs)
		}
		fmt.Fprintf(out, "unmounted %s (its daemon was gone)\n", abs)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	args := []string{"mount", "--mgs", mgs, abs, "--log", filepath.Join(clusterDir, "mount.log")}
	if HasTLS(clusterDir) {
		// The mount of the user who ran up: its admin credentials.
		tlsDir, err := filepath.Abs(AdminTLSDir(clusterDir))
		if err != nil {
			return err
		}
		args = append(args, "--tls-dir", tlsDir)
	}
	cmd := exec.Command(bin, args...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mount at %s: %v: %s", abs, err, strings.TrimSpace(string(b)))
	}
	if err := os.WriteFile(filepath.Join(clusterDir, mountFile), []byte(abs+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "mounted at %s (log %s)\n", abs, filepath.Join(clusterDir, "mount.log"))
	return nil
}

// mountState is what is at a mount point `nacre up --mount` was given.
type mountState int

const (
	mountFree     mountState = iota // no mount: mount there
	mountDeadOurs                   // this cluster's mount, its daemon gone: replace it
	mountLiveOurs                   // this cluster's mount, working: nothing to do
)

// mountPointState looks at the mount point abs for the cluster in
// clusterDir, and refuses one that cannot be mounted on: another mount
// (alive or dead), or a path that is not, and cannot be made, a directory.
// Mount daemons record themselves in stateDir.
func mountPointState(clusterDir, abs, stateDir string) (mountState, error) {
	if _, ok := fusefs.FindMount(abs); !ok {
		return mountFree, checkMountDir(abs)
	}
	// Ours: made by this cluster's up, or by `nacre mount` of this
	// cluster's MGS (its daemon's record says which).
	rec, rerr := fusefs.ReadRecord(stateDir, abs)
	mgs, merr := MGSAddr(clusterDir)
	sameMGS := rerr == nil && merr == nil && sharesAddr(rec.MGS, mgs)
	ours := recordedMount(clusterDir) == abs || sameMGS
	if fusefs.MountDead(abs) {
		if ours {
			return mountDeadOurs, nil
		}
		return 0, fmt.Errorf("%s is a dead mount (its daemon is gone): unmount it first (nacre umount %s)", abs, abs)
	}
	if sameMGS && fusefs.Alive(rec.Pid) {
		return mountLiveOurs, nil
	}
	return 0, fmt.Errorf("%s is already a mount point: unmount it first (nacre umount %s) or mount somewhere else", abs, abs)
}

// sharesAddr says whether two MGS address lists ("HOST:PORT,...") have an
// address in common.
func sharesAddr(a, b string) bool {
	for _, x := range strings.Split(a, ",") {
		for _, y := range strings.Split(b, ",") {
			if x != "" && strings.TrimSpace(x) == strings.TrimSpace(y) {
				return true
			}
		}
	}
	return false
}

// checkMountDir accepts a mount point that is a directory, or that can
// be made one: its nearest existing ancestor is a directory.
func checkMountDir(abs string) error {
	for p := abs; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		switch {
		case err == nil && fi.IsDir():
			return nil
		case err == nil && p == abs:
			return fmt.Errorf("--mount %s is not a directory: give a directory to mount at (it is made if missing)", abs)
		case err == nil:
			return fmt.Errorf("--mount %s cannot be made: %s is not a directory; give a directory to mount at", abs, p)
		case !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR):
			return fmt.Errorf("--mount %s: %w", abs, err)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// recordedMount is where this cluster's `nacre up --mount` mounted it
// last ("" if nowhere).
func recordedMount(clusterDir string) string {
	b, err := os.ReadFile(filepath.Join(clusterDir, mountFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// unmountLocal unmounts what `nacre up --mount` mounted; a busy mount is
// detached and its connection aborted, since the servers are going away.
func unmountLocal(clusterDir, stateDir string, out io.Writer) {
	dir := recordedMount(clusterDir)
	if dir == "" {
		return
	}
	if _, ok := fusefs.FindMount(dir); ok {
		err := fusefs.Umount(dir, fusefs.UmountOptions{StateDir: stateDir})
		if err != nil {
			err = fusefs.Umount(dir, fusefs.UmountOptions{Force: true, StateDir: stateDir})
		}
		if err != nil {
			fmt.Fprintf(out, "unmount %s: %v\n", dir, err)
			return
		}
		fmt.Fprintf(out, "unmounted %s\n", dir)
	}
	os.Remove(filepath.Join(clusterDir, mountFile))
}
