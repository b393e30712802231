package localcluster

import (
	"errors"
	"fmt"
	"io"
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

// mountLocal mounts the cluster at dir with the mount daemon of bin.
func mountLocal(bin, clusterDir, mgs, dir string, out io.Writer) error {
	abs, err := fusefs.MountPath(dir)
	if err != nil {
		return err
	}
	if _, ok := fusefs.FindMount(abs); ok {
		_, serr := os.Stat(abs)
		dead := errors.Is(serr, syscall.ENOTCONN)
		switch {
		case dead && recordedMount(clusterDir) == abs:
			// This cluster's own mount, whose daemon died with the
			// servers (a power cut, kill -9): it is of no use to anyone.
			if err := fusefs.Umount(abs, fusefs.UmountOptions{Force: true}); err != nil {
				return fmt.Errorf("%s is this cluster's mount from before, whose daemon is gone, and unmounting it failed: %w; run `nacre umount --force %s`", abs, err, abs)
			}
			fmt.Fprintf(out, "unmounted %s (its daemon was gone)\n", abs)
		case dead:
			return fmt.Errorf("%s is a dead mount (its daemon is gone): unmount it first (nacre umount %s)", abs, abs)
		default:
			return fmt.Errorf("%s is already a mount point: unmount it first (nacre umount %s) or mount somewhere else", abs, abs)
		}
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return err
	}
	cmd := exec.Command(bin, "mount", "--mgs", mgs, abs, "--log", filepath.Join(clusterDir, "mount.log"))
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mount at %s: %v: %s", abs, err, strings.TrimSpace(string(b)))
	}
	if err := os.WriteFile(filepath.Join(clusterDir, mountFile), []byte(abs+"\n"), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(out, "mounted at %s (log %s)\n", abs, filepath.Join(clusterDir, "mount.log"))
	return nil
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
func unmountLocal(clusterDir string, out io.Writer) {
	dir := recordedMount(clusterDir)
	if dir == "" {
		return
	}
	if _, ok := fusefs.FindMount(dir); ok {
		err := fusefs.Umount(dir, fusefs.UmountOptions{})
		if err != nil {
			err = fusefs.Umount(dir, fusefs.UmountOptions{Force: true})
		}
		if err != nil {
			fmt.Fprintf(out, "unmount %s: %v\n", dir, err)
			return
		}
		fmt.Fprintf(out, "unmounted %s\n", dir)
	}
	os.Remove(filepath.Join(clusterDir, mountFile))
}
