package localcluster

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
)

// RunOptions are the options of `nacre up`: the cluster's, and what to do
// once it is up.
type RunOptions struct {
	Options
	// Detach returns once the cluster is ready, leaving it running and
	// unsupervised: a later `nacre up` on its directory may adopt it
	// (supervise it, and stop it on its own Ctrl-C). Otherwise Run
	// supervises it: it holds the directory's lock, so that another up
	// there is refused naming its pid, until ctx is done (Ctrl-C) or
	// every target process has exited, and then shuts the cluster down
	// (Shutdown).
	Detach bool
	// Self is how to run this binary again, in the hints printed
	// ("nacre", or "bin/nacre" when that is not on the PATH).
	Self string
	// Err receives the warnings of the shutdown.
	Err io.Writer
}

// Run is `nacre up`: it brings the cluster up (Up), says what runs and how
// to use it, and unless o.Detach supervises it until it is to stop. The
// writes to o.Out may fail (the reader of a pipe, such as tee, ended by
// the same Ctrl-C): the shutdown happens all the same.
func Run(ctx context.Context, o RunOptions) error {
	out := o.Out
	start := time.Now()
	// A failed up has stopped what it started, and only that.
	c, l, err := up(ctx, o.Options)
	if err != nil {
		return err
	}
	if o.Detach {
		l.release(false)
	} else {
		// Held until the cluster is stopped: a second up meanwhile would
		// adopt it and stop it on its own Ctrl-C.
		l.write(supervisingState)
		defer l.release(false)
	}
	fmt.Fprintf(out, "Nacre is up in %.1fs: %s, data in %s\n", time.Since(start).Seconds(), c.Summary(), o.Dir)
	self := o.Self
	tlsEnv := ""
	if c.TLSDir != "" {
		tlsEnv = fmt.Sprintf("  export NACRE_TLS_DIR=%s\n", c.TLSDir)
	}
	fmt.Fprintf(out, "Try:\n  export NACRE_MGS=%s\n%s  %s status\n  %s put /etc/services /services && %s ls -l /\n", c.MGS, tlsEnv, self, self, self)
	if o.Detach {
		fmt.Fprintf(out, "Stop it with: %s down --dir %s\n", self, o.Dir)
		if c.TLSDir != "" {
			// Before NACRE_MGS, which stays the last line.
			fmt.Fprintf(out, "NACRE_TLS_DIR=%s\n", c.TLSDir)
		}
		fmt.Fprintf(out, "NACRE_MGS=%s\n", c.MGS)
		return nil
	}
	fmt.Fprintln(out, "Press Ctrl-C to stop the cluster.")
	return supervise(ctx, o.Dir, o.MountState, out, o.Err, func() { l.write(stoppingState) })
}

// supervise waits until ctx is done or every target process of the
// cluster in dir has exited (`nacre down --dir` from another terminal:
// nothing is left to stop then), and shuts it down, calling stopping
// first.
func supervise(ctx context.Context, dir, stateDir string, out, errOut io.Writer, stopping func()) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			stopping()
			fmt.Fprintln(out, "\nstopping...")
			return Shutdown(dir, stateDir, out, errOut)
		case <-tick.C:
		}
		if Running(dir) == 0 {
			stopping()
			fmt.Fprintf(out, "every target process of %s has exited (stopped by nacre down, or died: see their serve.log); nacre up ends\n", dir)
			// Unmount what is left of --mount.
			return Shutdown(dir, stateDir, io.Discard, errOut)
		}
	}
}

// supervisorWait bounds how long `nacre down` waits for the `nacre up` on
// the cluster to end: a supervising up notices within a second that its
// targets are gone, and then unmounts what is left of its mount.
const supervisorWait = 15 * time.Second

// AwaitUp waits, once `nacre down` has stopped the cluster in dir
// (Shutdown), until the `nacre up` that holds the directory's lock (the
// one supervising the cluster, or still starting it) has ended, so that
// an up right after the down is not refused for it. It says which up
// ended on out; one that does not end in time (stopped with Ctrl-Z, say)
// gets a warning on errOut naming its pid.
func AwaitUp(dir string, out, errOut io.Writer) {
	h, held := LockHolder(dir)
	if !held {
		return
	}
	deadline := time.Now().Add(supervisorWait)
	for held && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
		_, held = LockHolder(dir)
	}
	if held {
		fmt.Fprintf(errOut, "nacre: warning: nacre up (pid %d) on %s has not ended %v after its cluster stopped (is it stopped, with Ctrl-Z?); a new nacre up there is refused until it ends: end it with `kill %d`\n",
			h.Pid, dir, supervisorWait, h.Pid)
		return
	}
	fmt.Fprintf(out, "nacre up (pid %d) on %s has ended\n", h.Pid, dir)
}

// OSTs is the number of OSTs of the cluster.
func (c *Cluster) OSTs() int {
	n := 0
	for _, t := range c.Targets {
		if strings.HasPrefix(t.Name, "OST") {
			n++
		}
	}
	return n
}

// Summary says what runs: "MGS ADDR, 1 MDT, 2 OSTs", with the replicas of
// a replicated cluster.
func (c *Cluster) Summary() string {
	mdt := "1 MDT"
	if m := c.MDTs(); m != 1 {
		mdt = fmt.Sprintf("%d MDTs", m)
	}
	if n := Replicas(c); n > 1 {
		if c.MDTs() == 1 {
			mdt += fmt.Sprintf(" (MGS and MDT: %d replicas each)", n)
		} else {
			mdt += fmt.Sprintf(" (MGS and each MDT: %d replicas)", n)
		}
	}
	osts := "1 OST"
	if n := c.OSTs(); n != 1 {
		osts = fmt.Sprintf("%d OSTs", n)
	}
	return fmt.Sprintf("MGS %s, %s, %s", c.MGS, mdt, osts)
}

// CheckMDTs refuses an MDT count a local cluster cannot have (`nacre up
// --mdts`).
func CheckMDTs(n int) error {
	switch {
	case n < 1:
		return fmt.Errorf("--mdts %d: a cluster needs at least 1 MDT (MDT0 holds the root directory; an existing cluster keeps the MDTs it has, and a larger --mdts adds MDTs)", n)
	case n > MaxLocalMDTs:
		return fmt.Errorf("--mdts %d: a local cluster runs each MDT as a process (each replica, with --replicas) on this machine; at most %d (a larger file system runs its MDTs on their own servers: nacre format --type mdt --index N and nacre serve)", n, MaxLocalMDTs)
	}
	return nil
}

// CheckOSTs refuses an OST count a cluster cannot have (`nacre up
// --osts`).
func CheckOSTs(n int) error {
	if n < 1 {
		return fmt.Errorf("--osts %d: a cluster needs at least 1 OST (an existing cluster keeps the OSTs it has; a larger --osts adds OSTs)", n)
	}
	return nil
}
