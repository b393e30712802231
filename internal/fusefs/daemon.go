package fusefs

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The mount daemon and `nacre umount`.
//
// `nacre mount` runs the file system in a daemon process (itself, started
// again with -f in its own session), waits until the daemon reports the
// mount ready through a pipe, and exits, as mount(8) does. The daemon
// records itself in a small JSON file under the state directory
// (StateDir: /run/nacre/mounts for root), which `nacre umount` reads to
// wait for the daemon to finish flushing after the unmount. The functions
// that read or write records take the state directory; "" is
// StateDir("").
//
// `nacre umount` unmounts with umount(2) (fusermount3 -u when not root).
// A busy mount is refused unless --lazy (detach now, go away at the last
// close) or --force (abort the FUSE connection: processes using the mount
// get ENOTCONN; then detach). When the daemon is gone (killed, crashed),
// umount aborts the dead connection and detaches the mount point, so no
// "transport endpoint is not connected" directory is left behind.

// Record describes a running mount daemon.
type Record struct {
	Dir     string    `json:"dir"`
	MGS     string    `json:"mgs"`
	Pid     int       `json:"pid"`
	Log     string    `json:"log,omitempty"`
	Started time.Time `json:"started"`
}

// StateDir is where mount records are kept: /run/nacre/mounts for root,
// else under runtimeDir (the user's $XDG_RUNTIME_DIR, which cmd/nacre
// reads) or, with none, under the temporary directory.
func StateDir(runtimeDir string) string {
	if os.Geteuid() == 0 {
		return "/run/nacre/mounts"
	}
	if runtimeDir != "" {
		return filepath.Join(runtimeDir, "nacre", "mounts")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("nacre-%d", os.Getuid()), "mounts")
}

// recordPath is the record of the daemon of mount point dir in stateDir
// ("": StateDir("")).
func recordPath(stateDir, dir string) string {
	if stateDir == "" {
		stateDir = StateDir("")
	}
	return filepath.Join(stateDir, url.PathEscape(dir)+".json")
}

// WriteRecord records this process as the daemon of r.Dir in stateDir.
func WriteRecord(stateDir string, r Record) error {
	p := recordPath(stateDir, r.Dir)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	b, _ := json.MarshalIndent(r, "", "  ")
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

// RemoveRecord removes dir's record in stateDir if it names pid.
func RemoveRecord(stateDir, dir string, pid int) {
	if r, err := ReadRecord(stateDir, dir); err == nil && r.Pid == pid {
		os.Remove(recordPath(stateDir, dir))
	}
}

// ReadRecord reads the record of the daemon serving dir from stateDir.
func ReadRecord(stateDir, dir string) (Record, error) {
	var r Record
	b, err := os.ReadFile(recordPath(stateDir, dir))
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// MountPath is the absolute path of mount point dir as the kernel shows it
// in mountinfo: its parent's symbolic links resolved, not dir itself,
// which may be a dead mount that cannot be looked at.
func MountPath(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if parent, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		abs = filepath.Join(parent, filepath.Base(abs))
	}
	return abs, nil
}

// Alive reports whether pid is a running (not zombie) process.
func Alive(pid int) bool {
	if pid <= 0 || syscall.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}

// abortConnection aborts the FUSE connection of a mount: pending and
// future requests fail with ENOTCONN.
func abortConnection(mi MountInfo) error {
	_, minor, ok := strings.Cut(mi.Dev, ":")
	if !ok {
		return fmt.Errorf("device %q", mi.Dev)
	}
	const ctl = "/sys/fs/fuse/connections"
	if _, ok := FindMount(ctl); !ok {
		// The FUSE control file system is usually mounted by systemd.
		if err := syscall.Mount("fusectl", ctl, "fusectl", 0, ""); err != nil {
			return fmt.Errorf("mount fusectl on %s: %w", ctl, err)
		}
	}
	return os.WriteFile(ctl+"/"+minor+"/abort", []byte("1"), 0o200)
}

// UmountOptions configure Umount.
type UmountOptions struct {
	Lazy  bool // detach a busy mount now; it goes at its last close
	Force bool // abort the connection first (users get ENOTCONN)
	// Wait bounds the wait for the daemon to finish (default 60 s).
	Wait time.Duration
	// StateDir holds the daemon's record (StateDir; "": StateDir("")).
	StateDir string
}

// Umount unmounts the Nacre mount at dir and waits for its daemon to
// exit. It frees the mount point of a daemon that died.
func Umount(dir string, o UmountOptions) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if o.Wait == 0 {
		o.Wait = 60 * time.Second
	}
	rec, recErr := ReadRecord(o.StateDir, dir)
	mi, mounted := FindMount(dir)
	if !mounted {
		if recErr == nil && !Alive(rec.Pid) {
			os.Remove(recordPath(o.StateDir, dir))
		}
		return fmt.Errorf("%s is not mounted", dir)
	}
	if !strings.HasPrefix(mi.FsType, "fuse") {
		return fmt.Errorf("%s is a %s mount, not Nacre", dir, mi.FsType)
	}
	alive := recErr == nil && Alive(rec.Pid)
	if recErr != nil {
		// No record: judge by the connection.
		alive = !MountDead(dir)
	}
	root := os.Geteuid() == 0
	if o.Force || !alive {
		// A dead daemon's connection hangs every user; abort it.
		abortConnection(mi)
	}
	switch {
	case !root:
		args := []string{"-u"}
		if o.Lazy || o.Force || !alive {
			args = append(args, "-z")
		}
		out, err := exec.Command("fusermount3", append(args, dir)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("fusermount3 %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	default:
		err := syscall.Unmount(dir, 0)
		if errors.Is(err, syscall.EBUSY) && (o.Lazy || o.Force || !alive) {
			err = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		if errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("umount %s: target is busy (files are open there); use --lazy to detach it now, or --force to abort it", dir)
		}
		if err != nil {
			return fmt.Errorf("umount %s: %w", dir, err)
		}
	}
	if recErr != nil {
		return nil
	}
	if !Alive(rec.Pid) {
		os.Remove(recordPath(o.StateDir, dir))
		return nil
	}
	if o.Lazy && !o.Force {
		return nil // the daemon goes at the last close
	}
	deadline := time.Now().Add(o.Wait)
	for Alive(rec.Pid) {
		if time.Now().After(deadline) {
			return fmt.Errorf("unmounted %s, but its daemon (pid %d) is still running after %s; see %s", dir, rec.Pid, o.Wait, rec.Log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.Remove(recordPath(o.StateDir, dir))
	return nil
}

// deadProbeWait bounds MountDead's wait for the daemon's answer.
const deadProbeWait = 2 * time.Second

// MountDead tells whether the FUSE mount at dir has lost its daemon. It
// asks with statfs(2), which the kernel always passes to the daemon:
// stat(2) is answered from the kernel's attribute cache for a second
// after the daemon died, so a mount killed a moment ago looked alive
// ("already a mount point") while ls said "transport endpoint is not
// connected". A daemon that has not answered within deadProbeWait still
// holds the connection (busy, or waiting for its servers): alive.
func MountDead(dir string) bool {
	done := make(chan error, 1)
	go func() {
		var st syscall.Statfs_t
		err := syscall.Statfs(dir, &st)
		for errors.Is(err, syscall.EINTR) {
			err = syscall.Statfs(dir, &st)
		}
		done <- err
	}()
	select {
	case err := <-done:
		return errors.Is(err, syscall.ENOTCONN) || errors.Is(err, syscall.ECONNABORTED)
	case <-time.After(deadProbeWait):
		return false
	}
}
