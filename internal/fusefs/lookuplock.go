package fusefs

import (
	"context"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/fid"
)

// Names known missing: one MDS request per create instead of two.
//
// The kernel looks a name up before it creates it, so every create
// through the mount costs a lookup that finds nothing and then the
// create. In a directory where lookups keep finding nothing, the daemon
// takes the directory's lookup lock (internal/ldlm, lookuplock.go), lists
// the directory once, and from then on answers the lookup of a name that
// is not in the list itself; its own creates, removals and renames keep
// the list current. The MDS takes the lock back before it acknowledges a
// change that another client makes to the directory's names, and a
// session's end voids every lock, so a name another client made is never
// answered missing after that client was told it exists.
//
// A list is only trusted if no other client could have changed the
// directory's names between the request for the lock and the end of the
// listing: a revocation or a lost session moves the directory's
// generation, and a listing that saw it move is thrown away. Changes made
// through this mount meanwhile are noted with their outcome and laid over
// the listing, which may or may not have seen them. A change this mount
// made whose outcome is unknown (an error other than one that proves the
// name's state) drops the list, or the listing under way.
//
// The kernel is given the names it learns in such a directory (lookups,
// creates, links, READDIRPLUS) for lockedEntryTimeout instead of the
// mount's entry timeout: no other client changes them without a
// revocation, and a revocation (or the end of the session, or a change of
// unknown outcome) has the kernel drop those entries (EntryNotify). So a
// remove or an open through such a name sends no LOOKUP, and an open needs
// no check that the name still leads to its file (checkName). The
// invalidations go after the revocation is acknowledged: sent before, one
// could wait for the directory's lock that a create of this mount holds
// while the MDS has that create wait for another mount that waits for
// this one. So a revocation waits for them at most invalWait before it is
// acknowledged; until they land the kernel may use such a name as it may
// any name for the entry timeout, and an open through it is checked.
//
// Lookups that the MDS answers as the caller (no default_permissions:
// the lookup is the search-permission check) never use the lists, and a
// replicated MDT grants no lookup locks.

const (
	// lookupLockMisses is how many lookups in a directory the MDS answers
	// "missing" before the daemon takes the directory's lookup lock.
	lookupLockMisses = 2
	// lookupLockDirs bounds the directories tracked, lookupLockNames the
	// names held in all their lists.
	lookupLockDirs  = 1024
	lookupLockNames = 1 << 18
	// lookupLockQuiet is how long a directory whose lock was revoked (or
	// could not be taken) is left alone: two clients changing one
	// directory would otherwise pass the lock back and forth, each change
	// waiting for the other client's acknowledgement.
	lookupLockQuiet = time.Second
	// lookupLockRefused is how long a directory whose MDT grants no
	// lookup locks (a replicated one) is left alone.
	lookupLockRefused = time.Minute
	// lockedEntryTimeout is how long the kernel keeps a name given under
	// a lookup lock: bounded, so that a lost invalidation costs no more.
	lockedEntryTimeout = time.Minute
	// invalWait bounds how long a revocation waits for the kernel to
	// drop the entries it covered (see above).
	invalWait = 50 * time.Millisecond
)

// lookupLocks is the mount's directory lists, under their lookup locks.
// Its mutex is taken after fs.mu, never before.
type lookupLocks struct {
	dirs  map[fid.FID]*dirNames
	names int // in all complete lists
	// inval holds the kernel entries to invalidate once the lock that
	// covered them is gone (invalidateEntries sends them).
	inval []entryRef
}

// entryRef names kernel entries in one directory.
type entryRef struct {
	dir   fid.FID
	names []string
}

// dirNames is what the mount knows of one directory's names.
type dirNames struct {
	// gen moves with every event that may have changed the names in a
	// way this mount does not know.
	gen      uint64
	misses   int
	taking   bool      // a lock request and listing are under way
	quiet    time.Time // no new lock before
	complete bool      // names holds every name, under grant
	grant    uint64
	epoch    uint64 // the session epoch of grant (client.Session.LockValid)
	names    map[string]struct{}
	// own holds the outcomes of this mount's changes while a listing is
	// under way (taking): name -> present.
	own map[string]bool
	// long holds the names the kernel was given for lockedEntryTimeout.
	long map[string]struct{}
}

// listed looks name up in dir's list: known is true only if the list is
// complete under a valid lock, and present says whether name is in it.
// With note, a present name is recorded as given to the kernel for
// lockedEntryTimeout (entryLocked).
func (fs *FS) listed(dir fid.FID, name string, note bool) (known, present bool) {
	if fs.sess == nil || fs.noNameCache {
		return false, false
	}
	fs.llMu.Lock()
	d := fs.ll.dirs[dir]
	if d == nil || !d.complete {
		fs.llMu.Unlock()
		return false, false
	}
	_, present = d.names[name]
	epoch := d.epoch
	if present && note {
		if d.long == nil {
			d.long = map[string]struct{}{}
		}
		d.long[name] = struct{}{}
	}
	fs.llMu.Unlock()
	return fs.sess.LockValid(dir, epoch), present
}

// knownMissing reports whether name is known to be missing from dir.
func (fs *FS) knownMissing(dir fid.FID, name string) bool {
	known, present := fs.listed(dir, name, false)
	return known && !present
}

// knownPresent reports whether name is in dir's list, under a valid lock.
func (fs *FS) knownPresent(dir fid.FID, name string) bool {
	known, present := fs.listed(dir, name, false)
	return known && present
}

// lookupMissed notes that the MDS answered a lookup in dir "missing", and
// takes the directory's lock once that happens often enough.
func (fs *FS) lookupMissed(dir fid.FID) {
	if fs.sess == nil || fs.noNameCache {
		return
	}
	fs.llMu.Lock()
	defer fs.llMu.Unlock()
	d := fs.ll.dirs[dir]
	if d == nil {
		if len(fs.ll.dirs) >= lookupLockDirs {
			return
		}
		d = &dirNames{}
		fs.ll.dirs[dir] = d
	}
	if d.complete || d.taking || time.Now().Before(d.quiet) {
		return
	}
	d.misses++
	if d.misses < lookupLockMisses {
		return
	}
	if !fs.sess.LookupLocksServed(dir) {
		d.misses, d.quiet = 0, time.Now().Add(lookupLockRefused)
		return
	}
	d.misses, d.taking = 0, true
	go fs.takeLookupLock(dir, d, d.gen)
}

// takeLookupLock takes dir's lookup lock and lists it; the list is kept
// if d still tracks dir (a directory forgotten and tracked again starts
// over) and its generation is still gen.
func (fs *FS) takeLookupLock(dir fid.FID, d0 *dirNames, gen uint64) {
	ctx, cancel := context.WithTimeout(client.WithCred(context.Background(), &pb.Cred{}), 30*time.Second)
	defer cancel()
	grant, epoch, err := fs.sess.LookupLock(ctx, dir)
	var ents []*pb.DirEntry
	if err == nil {
		// A directory whose names would not fit beside the lists kept
		// is not listed to the end.
		fs.llMu.Lock()
		room := lookupLockNames - fs.ll.names
		fs.llMu.Unlock()
		if room <= 0 {
			err = client.ErrTooManyEntries
		} else {
			ents, err = fs.c.ReadDirUpTo(ctx, dir, false, room)
		}
	}
	fs.llMu.Lock()
	d := fs.ll.dirs[dir]
	if d != d0 {
		d = nil
	}
	keep := err == nil && d != nil && d.gen == gen && fs.ll.names+len(ents) <= lookupLockNames
	var own map[string]bool
	if d != nil {
		d.taking, own, d.own = false, d.own, nil
		if !keep {
			quiet := lookupLockQuiet
			if errno.CodeOf(err) == errno.FailedPrecondition {
				quiet = lookupLockRefused
			}
			d.quiet = time.Now().Add(quiet)
		}
	}
	if keep {
		d.names = make(map[string]struct{}, len(ents))
		for _, e := range ents {
			d.names[string(e.Name)] = struct{}{}
		}
		for name, present := range own {
			if present {
				d.names[name] = struct{}{}
			} else {
				delete(d.names, name)
			}
		}
		d.complete, d.grant, d.epoch = true, grant, epoch
		fs.ll.names += len(d.names)
	}
	fs.llMu.Unlock()
	if err != nil {
		fs.log.Debug("lookup lock not taken", "dir", dir, "err", err)
	}
	if !keep && grant != 0 {
		fs.releaseLookupLock(dir, grant)
	}
}

// releaseLookupLock gives a grant back in the background.
func (fs *FS) releaseLookupLock(dir fid.FID, grant uint64) {
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		fs.sess.ReleaseLookupLock(ctx, dir, grant)
	}()
}

// dropList forgets d's list (fs.llMu held) and returns its grant (0 if
// it had none).
func (fs *FS) dropList(dir fid.FID, d *dirNames) uint64 {
	d.gen++
	if len(d.long) > 0 {
		ref := entryRef{dir: dir}
		for name := range d.long {
			ref.names = append(ref.names, name)
		}
		fs.ll.inval = append(fs.ll.inval, ref)
		d.long = nil
	}
	if !d.complete {
		return 0
	}
	fs.ll.names -= len(d.names)
	d.complete, d.names = false, nil
	return d.grant
}

// invalidateEntries has the kernel drop the entries queued by dropList,
// and refs, waiting at most wait for it.
func (fs *FS) invalidateEntries(refs []entryRef, wait time.Duration) {
	fs.llMu.Lock()
	refs = append(refs, fs.ll.inval...)
	fs.ll.inval = nil
	fs.llMu.Unlock()
	if len(refs) == 0 || fs.srv == nil {
		return
	}
	done := make(chan struct{})
	defer func() {
		t := time.NewTimer(wait)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
	}()
	go func() {
		defer close(done)
		for _, r := range refs {
			fs.mu.Lock()
			n := fs.byFID[r.dir]
			var id uint64
			if n != nil {
				id = n.id
			}
			fs.mu.Unlock()
			if r.dir == fid.Root {
				id = rootID
			}
			if id == 0 {
				continue // the kernel forgot the directory, and its entries with it
			}
			for _, name := range r.names {
				fs.srv.EntryNotify(id, name)
			}
		}
	}()
}

// entryLocked reports whether the kernel may keep dir/name for
// lockedEntryTimeout (the name is in dir's list, under a valid lock), and
// notes that it does.
func (fs *FS) entryLocked(dir fid.FID, name string) bool {
	if fs.srv == nil {
		return false
	}
	known, present := fs.listed(dir, name, true)
	return known && present
}

// namesChanged records the outcome of a change this mount made to dir's
// names: name was added (add) or removed (!add) if err is nil. An error
// that proves the name's state keeps the list; any other drops it.
func (fs *FS) namesChanged(dir fid.FID, name string, add bool, err error) {
	if fs.sess == nil {
		return
	}
	fs.llMu.Lock()
	d := fs.ll.dirs[dir]
	if d == nil {
		fs.llMu.Unlock()
		return
	}
	present, sure := false, true
	switch {
	case err == nil && add, errnoIs(err, syscall.EEXIST):
		present = true
	case err == nil && !add, !add && errnoIs(err, syscall.ENOENT):
	default:
		sure = false
	}
	switch {
	case !sure:
		// The change may or may not have happened.
		if g := fs.dropList(dir, d); g != 0 {
			defer fs.releaseLookupLock(dir, g)
		}
	case d.taking:
		if d.own == nil {
			d.own = map[string]bool{}
		}
		d.own[name] = present
	case !d.complete:
	case present:
		if _, has := d.names[name]; has {
			break
		}
		if fs.ll.names >= lookupLockNames {
			if g := fs.dropList(dir, d); g != 0 {
				defer fs.releaseLookupLock(dir, g)
			}
			break
		}
		d.names[name] = struct{}{}
		fs.ll.names++
	default:
		if _, has := d.names[name]; has {
			delete(d.names, name)
			fs.ll.names--
		}
		delete(d.long, name) // the kernel dropped its entry itself
	}
	fs.llMu.Unlock()
	if !sure {
		fs.invalidateEntries(nil, 0) // from a request handler: the kernel holds the directory
	}
}

// RevokeLookup forgets the lists of dirs: the MDS took their locks back
// (the session's callback, acknowledged when it returns).
func (fs *FS) RevokeLookup(dirs []fid.FID) {
	fs.llMu.Lock()
	quiet := time.Now().Add(lookupLockQuiet)
	for _, dir := range dirs {
		if d := fs.ll.dirs[dir]; d != nil {
			fs.dropList(dir, d)
			d.misses, d.quiet = 0, quiet
		}
	}
	fs.llMu.Unlock()
	fs.invalidateEntries(nil, invalWait)
}

// lookupLocksLost forgets every list: the session they were granted in
// ended.
func (fs *FS) lookupLocksLost() {
	fs.llMu.Lock()
	for dir, d := range fs.ll.dirs {
		fs.dropList(dir, d)
	}
	fs.llMu.Unlock()
	fs.invalidateEntries(nil, 0)
}

// forgetDirNames stops tracking dir (the kernel forgot it) and gives its
// lock back.
func (fs *FS) forgetDirNames(dir fid.FID) {
	if fs.sess == nil {
		return
	}
	fs.llMu.Lock()
	d := fs.ll.dirs[dir]
	var g uint64
	if d != nil {
		d.long = nil // the kernel's entries went with the directory
		g = fs.dropList(dir, d)
		delete(fs.ll.dirs, dir)
	}
	fs.llMu.Unlock()
	if g != 0 {
		fs.releaseLookupLock(dir, g)
	}
}

// renamed records the outcome of a rename through this mount: the old
// name goes and the new one comes (both stay with RENAME_EXCHANGE); an
// error that proves nothing drops both directories' lists.
func (fs *FS) renamed(sp fid.FID, oldName string, dp fid.FID, newName string, flags uint32, err error) {
	if err != nil && !errnoIs(err, syscall.EEXIST) && !errnoIs(err, syscall.ENOENT) {
		fs.namesChanged(sp, oldName, false, err)
		fs.namesChanged(dp, newName, true, err)
		return
	}
	if err != nil {
		// EEXIST (RENAME_NOREPLACE) and ENOENT change nothing.
		return
	}
	if flags&(client.RenameExchange|client.RenameWhiteout) == 0 {
		fs.namesChanged(sp, oldName, false, nil)
	} else if flags&client.RenameWhiteout != 0 {
		fs.namesChanged(sp, oldName, true, nil) // the whiteout has the name now
	}
	fs.namesChanged(dp, newName, true, nil)
}

// SessionLost is the session's callback when a session with an MDT ends:
// the append tokens and lookup locks granted in it are void.
func (fs *FS) SessionLost(mdt uint32) {
	fs.lookupLocksLost()
	fs.AppendTokensLost(mdt)
}
