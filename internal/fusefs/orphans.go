package fusefs

import (
	"context"
	"time"

	"nacre/internal/fault"
	"nacre/internal/fid"
)

// Unlinks and renames of open files.
//
// An unlink or a rename that replaces a file sends the MDT the FIDs open
// here, and the MDT keeps the removed object as an orphan if its FID is
// among them; the last close here then releases it (ReleaseOrphans). The
// kernel sends a release asynchronously after close(2), so it can reach
// the daemon while such a request is in flight: `rm -rf` closes a
// directory and removes it at once. Deciding at that release would be
// wrong either way: before the MDT applies the removal there is no orphan
// to release yet, and after it the mount would not know to release one.
// So a release of a FID in the open list of a request in flight leaves the
// decision to that request, which on its return releases the FIDs that
// were closed meanwhile and that it may have made orphans. Without this,
// the orphan stayed on the MDT (a directory with its old link count and no
// name, which the checker reported as an nlink inconsistency).

type flights struct {
	n        map[fid.FID]int  // requests in flight whose open list holds the FID
	closed   map[fid.FID]bool // closed for the last time while one was
	orphaned map[fid.FID]bool // a request or the close says it may be an orphan now
}

func newFlights() flights {
	return flights{n: map[fid.FID]int{}, closed: map[fid.FID]bool{}, orphaned: map[fid.FID]bool{}}
}

// openForFlight lists the FIDs open here (openFIDs) for an unlink or
// rename about to be sent, and registers the request as in flight for
// them in the same critical section: a close after the list was taken is
// then always one that crossed the request. endFlight must follow, with
// the same list, whatever happens to the request.
func (fs *FS) openForFlight() []fid.FID {
	fs.mu.Lock()
	open := fs.openFIDsLocked()
	for _, f := range open {
		fs.flights.n[f]++
	}
	fs.mu.Unlock()
	if len(open) > 0 {
		// Tests widen the window in which a close can cross the request.
		fault.Hit("fuse.remove.inflight")
	}
	return open
}

// closedInFlight is called, with fs.mu held, at the last close of f (file
// or directory) with the orphan mark it had. It reports whether a request
// in flight takes over the decision to release f.
func (fs *FS) closedInFlight(f fid.FID, orphan bool) bool {
	if fs.flights.n[f] == 0 {
		return false
	}
	fs.flights.closed[f] = true
	if orphan {
		fs.flights.orphaned[f] = true
	}
	return true
}

// endFlight is called when the request registered with open returned: made
// lists the FIDs it may have made orphans (the unlinked object whose
// link count reached zero; for a rename, every FID of the list, as the
// reply does not say which it replaced). The FIDs still open here are
// marked, to be released at their last close; those closed meanwhile
// are released now.
func (fs *FS) endFlight(open, made []fid.FID) {
	fs.mu.Lock()
	for _, f := range made {
		if fs.flights.n[f] > 0 {
			fs.flights.orphaned[f] = true
		}
	}
	var release []fid.FID
	var chans []chan struct{}
	for _, f := range open {
		if fs.flights.n[f]--; fs.flights.n[f] > 0 {
			continue
		}
		delete(fs.flights.n, f)
		closed, orphaned := fs.flights.closed[f], fs.flights.orphaned[f]
		delete(fs.flights.closed, f)
		delete(fs.flights.orphaned, f)
		if !orphaned {
			continue
		}
		if of := fs.files[f]; of != nil {
			of.orphan = true
		}
		if od := fs.dirs[f]; od != nil {
			od.orphan = true
		}
		if !closed || fs.files[f] != nil || fs.dirs[f] != nil {
			continue // opened again, or not closed: its last close releases it
		}
		if fs.opening[f] > 0 {
			fs.inherit[f] = true // the open under way takes it over
			continue
		}
		ch := make(chan struct{})
		fs.releasing[f] = ch
		release = append(release, f)
		chans = append(chans, ch)
	}
	fs.mu.Unlock()
	if len(release) == 0 {
		return
	}
	if fs.sess != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := fs.sess.ReleaseOrphans(ctx, release); err != nil {
			fs.log.Warn("release files closed while their unlink or rename was in flight", "fids", release, "err", err)
		}
		cancel()
	}
	fs.mu.Lock()
	for i, f := range release {
		delete(fs.releasing, f)
		close(chans[i])
	}
	fs.mu.Unlock()
}
