package lfsck

import (
	pb "nacre/api/nacrepb"
	"nacre/internal/kv"
)

// A run is a driver and its components, as Lustre's LFSCK is an engine
// and the lfsck_operations of its scrub, namespace and layout components.
// The driver (run, run.go) owns what the components share: the phases and
// the persisted state, the scan and its position, the figures exact at
// that position (ledger.go), pacing, the queue of repairs (repair.go) and
// the OST connections (osts.go). Each component owns its own state, what
// it records for phase 2 and for a resumed run, and its decisions:
//
//	oiScrub      scrub.go      the OI against the objects' own FIDs
//	nsCheck      namespace.go  directory entries against linkEAs and nlink
//	layoutCheck  layout.go     layouts against the OST objects' records
//
// The driver calls every component that is on, in that order, at each
// step of a run:
//
//	prep          phase 1 begins (also when resumed)
//	openWindow    the scan reads a window of objects from one snapshot
//	object        ... and each object in it (Lustre's exec_oit), also one
//	              the scan passes over (scanned.skipped)
//	closeWindow   ... and ends the window (last: the scan has read its
//	              last object, in a pass that is not a rebuild)
//	endScan       the scan has read every object: finish what it started
//	post          the repairs so far are applied: settle what waits for
//	              the whole scan
//	enterPhase2   record what phase 2 needs
//	phase2        the second phase (Lustre's double_scan)
//	settle        every component's phase 2 is done
//	checkpoint    a checkpoint records the state (under the driver's lock)
//	quit          the run ends, however it ends: wait for the work the
//	              component runs beside the driver
//
// A resumed run first rebuilds what phase 1 keeps in memory from the part
// of the scan before its checkpoint: the scan's rebuild pass (scanned.
// rebuild), in which components derive their state but check nothing and
// count nothing.
type component interface {
	id() uint32
	prep()
	openWindow(w *window) error
	closeWindow(last bool)
	object(so *scanned) error
	endScan() error
	post() error
	enterPhase2() error
	phase2() error
	settle() error
	checkpoint(st *pb.LfsckState)
	quit()
}

// window is one window of the phase-1 scan: the objects from local key
// pos on, read from one snapshot.
type window struct {
	snap    *kv.Snapshot
	pos     uint64
	rebuild bool
}

// scanned is one object of the phase-1 scan as the components see it.
type scanned struct {
	snap    *kv.Snapshot
	local   uint64
	v       []byte  // its record
	o       *object // decoded (unless garbage)
	rebuild bool    // the rebuild pass of a resumed run
	// Why the scan passes over the object, if it does: its record does
	// not decode (garbage), its check failed (failed, a fault injected),
	// or another object with its FID won an OI conflict (lost, decided
	// by the OI scrub, which sees objects first).
	garbage, failed, lost bool
}

// skipped reports whether the components pass over the object.
func (so *scanned) skipped() bool { return so.garbage || so.failed || so.lost }
