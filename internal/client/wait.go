package client

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/version"
)

// Wait is a call that waits for a server that does not answer yet: what
// Config.OnWait is told, so that a command can say what it waits for
// (seed 004: "commands may succeed when you think they are hanging").
type Wait struct {
	Op     string    // the call: "lookup", "read", "hello"
	Server string    // "MDT0000", "OST0001", "the MGS"
	Addr   string    // the server's address
	Since  time.Time // when the call began
	Until  time.Time // when it gives up
	Cause  string    // why the last attempt failed, short (ShortCause)
}

// String is the notice a command prints: "waiting for MDT0000 at
// 127.0.0.1:4000 (lookup): connection refused; since 10:00:01, giving up
// at 10:00:31".
func (w Wait) String() string {
	at := ""
	if w.Addr != "" {
		at = " at " + w.Addr
	}
	return fmt.Sprintf("waiting for %s%s (%s): %s; since %s, giving up at %s",
		w.Server, at, w.Op, w.Cause, w.Since.Format(time.TimeOnly), w.Until.Format(time.TimeOnly))
}

// Notices of a wait: the first once a call has waited waitFirstNotice,
// then one every waitNoticeEvery while it goes on.
const (
	waitFirstNotice = time.Second
	waitNoticeEvery = 5 * time.Second
)

// waitNotes rate-limits the notices of one call's wait.
type waitNotes struct {
	c    *Client
	told time.Time
}

// note tells Config.OnWait of w, if the call has waited long enough and
// was not told of it just now.
func (n *waitNotes) note(w Wait) {
	if n.c.cfg.OnWait == nil || time.Since(w.Since) < waitFirstNotice {
		return
	}
	if !n.told.IsZero() && time.Since(n.told) < waitNoticeEvery {
		return
	}
	n.told = time.Now()
	n.c.cfg.OnWait(w)
}

// mgsWait bounds how long New waits for the MGS to answer.
const mgsWait = 10 * time.Second

// MGSWaitError is New giving up on an MGS that did not answer.
type MGSWaitError struct {
	Addr  string
	For   time.Duration
	Cause string // ShortCause of the last attempt
	Err   error
}

func (e *MGSWaitError) Error() string {
	waited := ""
	if e.For >= waitFirstNotice {
		waited = fmt.Sprintf("waited %.1fs; ", e.For.Seconds())
	}
	return fmt.Sprintf("cannot reach the MGS at %s: %s (%sis the cluster up? see `nacre status`)", e.Addr, e.Cause, waited)
}

func (e *MGSWaitError) Unwrap() error { return e.Err }

// hello says hello to the MGS, attempt after attempt until mgsWait
// passes, and tells OnWait while it waits. A FailFast client gives up at
// once when the MGS refuses the connection or its name does not resolve.
func (c *Client) hello(ctx context.Context) (*pb.HelloReply, error) {
	start := time.Now()
	until := start.Add(mgsWait)
	if d, ok := ctx.Deadline(); ok && d.Before(until) {
		until = d
	}
	notes := waitNotes{c: c}
	backoff := 50 * time.Millisecond
	req := &pb.HelloRequest{ProtocolVersion: version.Protocol, Fsname: c.cfg.Fsname, Who: "client"}
	for {
		// An attempt gets at most 2 s: a server that accepts and never
		// answers (another program on the port, a stopped process) is
		// retried, as one that refuses.
		end := time.Now().Add(2 * time.Second)
		if until.Before(end) {
			end = until
		}
		actx, cancel := context.WithDeadline(ctx, end)
		h, err := c.mgs.Hello(actx, req, grpc.WaitForReady(false))
		cut := actx.Err() != nil
		cancel()
		if err == nil {
			return h, nil
		}
		if code := errno.CodeOf(err); code == errno.FailedPrecondition || code == errno.Unimplemented {
			return nil, err
		}
		cause := ShortCause(err)
		if cut && ctx.Err() == nil {
			cause = noAnswerInTime
		}
		if ctx.Err() != nil || !time.Now().Add(backoff).Before(until) || (c.cfg.FailFast && refusedOrUnknown(err)) {
			return nil, &MGSWaitError{Addr: c.cfg.MGS, For: time.Since(start), Cause: cause, Err: err}
		}
		notes.note(Wait{Op: "connect", Server: "the MGS", Addr: c.cfg.MGS, Since: start, Until: until, Cause: cause})
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
		case <-t.C:
		}
		backoff = min(2*backoff, 500*time.Millisecond)
	}
}

// refusedOrUnknown: the server's host refuses the connection, or its name
// does not resolve; waiting changes neither soon.
func refusedOrUnknown(err error) bool {
	return ShortCause(err) == syscall.ECONNREFUSED.Error() || strings.Contains(err.Error(), "no such host")
}

// noteMDTWait tells of a call to the MDT of f that waits.
func (c *Client) noteMDTWait(n *waitNotes, op string, f fid.FID, since, until time.Time, cause error) {
	if c.cfg.OnWait == nil || cause == nil {
		return
	}
	w := Wait{Op: op, Since: since, Until: until, Cause: ShortCause(cause)}
	if m, err := c.mdtFor(f); err == nil {
		c.mu.Lock()
		w.Server, w.Addr = fmt.Sprintf("MDT%04x", m.index), m.addr
		c.mu.Unlock()
	} else {
		w.Server = "the MDT of " + f.String()
	}
	n.note(w)
}
