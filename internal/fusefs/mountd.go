package fusefs

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"nacre/internal/client"
)

// `nacre mount`: CheckMountPoint refuses a mount point a mount would
// stack on; StartDaemon starts the daemon (the binary again, with -f) and
// waits for its report on the ready pipe; RunDaemon is the daemon.

// CheckMountPoint refuses a mount point dir (as MountPath gives it) that
// is a mount already (a second mount would stack on the first, and one
// umount would leave the path still mounted) or not a directory; a
// directory that is not empty is mounted over with a warning to warn, as
// mount(8) does, but saying so: the files are not gone.
func CheckMountPoint(dir string, warn io.Writer) error {
	if _, ok := FindMount(dir); ok {
		if MountDead(dir) {
			return fmt.Errorf("%s is a dead mount (its daemon is gone): unmount it first (nacre umount %s)", dir, dir)
		}
		return fmt.Errorf("%s is already a mount point: unmount it first (nacre umount %s)", dir, dir)
	}
	if st, err := os.Stat(dir); err != nil {
		return fmt.Errorf("mount point: %w", err)
	} else if !st.IsDir() {
		return fmt.Errorf("mount point %s is not a directory", dir)
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		fmt.Fprintf(warn, "warning: %s is not empty: what it holds is hidden while Nacre is mounted over it, and comes back at unmount\n", dir)
	}
	return nil
}

// StartDaemon starts the mount daemon, bin with args, in a new session
// with its output appended to logPath, hands it the ready pipe as file
// descriptor 3, and waits for it to report the mount ready (nil) or why
// it failed. What the daemon waits for meanwhile (a server that does not
// answer) goes to notices, one line each (nil: nowhere).
func StartDaemon(bin string, args []string, logPath string, notices io.Writer) error {
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	d := exec.Command(bin, args...)
	d.Stdin = nil
	d.Stdout, d.Stderr = logf, logf
	d.ExtraFiles = []*os.File{w}
	d.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := d.Start(); err != nil {
		w.Close()
		return err
	}
	w.Close()
	go d.Wait()
	var msg []byte
	sc := bufio.NewScanner(io.LimitReader(r, 1<<20))
	for sc.Scan() {
		if w, ok := strings.CutPrefix(sc.Text(), waitPrefix); ok {
			if notices != nil {
				fmt.Fprintf(notices, "nacre: %s\n", w)
			}
			continue
		}
		msg = append(append(msg, sc.Bytes()...), '\n')
	}
	if strings.TrimSpace(string(msg)) == "ok" {
		return nil
	}
	if len(msg) == 0 {
		msg = []byte("the mount daemon exited without a word; see " + logPath)
	}
	return fmt.Errorf("%s", strings.TrimSpace(string(msg)))
}

// Ready is the pipe a daemon started by StartDaemon reports on; a nil
// *Ready (a daemon run in the foreground by hand) reports nothing.
type Ready struct {
	mu sync.Mutex
	f  *os.File
}

// waitPrefix marks a line of the ready pipe that tells of a wait, not the
// daemon's last word.
const waitPrefix = "wait: "

// waiting tells the starter what the daemon waits for, until the mount is
// ready or failed.
func (r *Ready) waiting(w client.Wait) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintln(r.f, waitPrefix+w.String()) // a closed pipe: the mount is up already
}

// ReadyFD is the ready pipe at file descriptor fd (nil if fd is not
// positive).
func ReadyFD(fd int) *Ready {
	if fd <= 0 {
		return nil
	}
	return &Ready{f: os.NewFile(uintptr(fd), "ready")}
}

// Fail reports err and returns it.
func (r *Ready) Fail(err error) error {
	if r != nil {
		r.mu.Lock()
		fmt.Fprintln(r.f, err)
		r.f.Close()
		r.mu.Unlock()
	}
	return err
}

// ok reports the mount ready.
func (r *Ready) ok() {
	r.mu.Lock()
	fmt.Fprintln(r.f, "ok")
	r.f.Close()
	r.mu.Unlock()
}

// DaemonOptions configure RunDaemon.
type DaemonOptions struct {
	Dir     string        // the mount point, as MountPath gives it
	Mount   MountOptions  // the mount's options (Log is set to Log)
	Client  client.Config // the client's (Log is set to Log)
	Log     *slog.Logger  // the daemon's log
	LogFile string        // where it goes, for the record
	// StateDir is where the daemon records itself (StateDir).
	StateDir string
	Ready    *Ready    // reports the mount ready or failed; nil: print to Out
	Out      io.Writer // the message of a mount in the foreground
}

// RunDaemon is the mount daemon: it connects, mounts, records itself,
// serves until unmounted (or ctx is done: then it unmounts), and flushes.
func RunDaemon(ctx context.Context, o DaemonOptions) error {
	log := o.Log
	o.Mount.Log, o.Client.Log = log, log
	if o.Client.OnWait == nil {
		// The daemon's log, for its whole life; and, until the mount is
		// ready, the `nacre mount` that started it.
		o.Client.OnWait = func(w client.Wait) {
			log.Warn(w.String())
			o.Ready.waiting(w)
		}
	}
	c, err := client.New(ctx, o.Client)
	if err != nil {
		return o.Ready.Fail(err)
	}
	defer c.Close()
	m, err := MountFS(ctx, c, o.Dir, o.Mount)
	if err != nil {
		return o.Ready.Fail(err)
	}
	pid := os.Getpid()
	mgs, dir := o.Client.MGS, o.Dir
	if err := WriteRecord(o.StateDir, Record{Dir: dir, MGS: mgs, Pid: pid, Log: o.LogFile, Started: time.Now()}); err != nil {
		log.Warn("cannot record the mount (umount will not wait for this daemon)", "err", err)
	}
	defer RemoveRecord(o.StateDir, dir, pid)
	log.Info("mounted", "mgs", mgs, "fsname", c.Fsname(), "pid", pid)
	if o.Ready != nil {
		o.Ready.ok()
	} else {
		fmt.Fprintf(o.Out, "mounted %s (MGS %s) at %s, pid %d; stop with: nacre umount %s\n", c.Fsname(), mgs, dir, pid, dir)
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			log.Info("signal: unmounting")
			if err := m.Unmount(true); err != nil {
				log.Warn("unmount", "err", err)
			}
		case <-done:
		}
	}()
	m.Wait()
	close(done)
	log.Info("unmounted")
	return nil
}
