package mds

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// A store restored from a file-level backup starts with a stale object
// index: its OI entries lead to the objects' old places. The checker
// rebuilds it at once (the automatic OI scrub of internal/lfsck), which
// takes well under a second for a small MDT but has not started when the
// first requests arrive. Requests do not fail meanwhile, nor advise a
// scrub that is already under way: a mutation waits until the index is
// rebuilt (applied against a stale index it would record the error in
// the log), and a read that meets a stale entry waits for the scrub and
// is tried again. Lustre answers EINPROGRESS and its clients retry; here
// the MDS waits for them.

// oiWaitMax bounds how long a request waits for the OI to be rebuilt.
const oiWaitMax = 30 * time.Second

// oiRebuilding reports whether the store was restored from a file-level
// backup and its OI scrub has not finished. A restore happens with the
// target stopped, so once the mark is gone it stays gone.
func (s *Server) oiRebuilding() bool {
	if s.oiFresh.Load() {
		return false
	}
	_, err := s.t.DB().Get(mdt.KeyRestored)
	if errors.Is(err, kv.ErrNotFound) {
		s.oiFresh.Store(true)
		return false
	}
	return err == nil
}

// scrubbing reports whether the checker repairs the OI now.
func (s *Server) scrubbing() bool {
	c := s.Checker()
	return c != nil && c.Scrubbing()
}

// waitOI waits while the OI is being rebuilt: while the store is marked
// restored, and (all too) while a scrub runs.
func (s *Server) waitOI(ctx context.Context, alsoScrub bool) error {
	busy := func() bool { return s.oiRebuilding() || (alsoScrub && s.scrubbing()) }
	if !busy() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, oiWaitMax)
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for busy() {
		select {
		case <-ctx.Done():
			return &oiBusyError{label: s.id.Label(), waited: time.Since(start)}
		case <-s.stop:
			return &oiBusyError{label: s.id.Label(), waited: time.Since(start)}
		case <-tick.C:
		}
	}
	s.log.Info("request waited for the OI scrub", "waited", time.Since(start).Round(time.Millisecond))
	return nil
}

// oiBusyError is a request that gave up waiting for the OI scrub.
type oiBusyError struct {
	label  string
	waited time.Duration
}

func (e *oiBusyError) Error() string {
	return fmt.Sprintf("%s rebuilds its object index (OI scrub, `nacre lfsck status`): waited %s; try again when it ends: %s",
		e.label, e.waited.Round(time.Millisecond), syscall.EAGAIN)
}

func (e *oiBusyError) Unwrap() error { return syscall.EAGAIN }

// afterOI runs a read; if it meets a stale OI entry while the OI is being
// rebuilt, it waits for the rebuild and runs the read again.
func (s *Server) afterOI(ctx context.Context, read func() error) error {
	err := read()
	if !errors.Is(err, mdt.ErrStaleOI) || !(s.oiRebuilding() || s.scrubbing()) {
		return err
	}
	if werr := s.waitOI(ctx, true); werr != nil {
		return werr
	}
	return read()
}
