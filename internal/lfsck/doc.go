// Package lfsck is the online checker of one MDT (`nacre lfsck`), after
// Lustre's LFSCK and OI scrub: it finds and repairs inconsistencies
// between the redundant copies of the metadata while clients keep
// working. It runs in the MDS, on the leader of the MDT; the OSTs answer
// its questions about their objects (internal/ost, through the OST
// interface). docs/lfsck.md describes the commands, the inconsistencies
// and the rules by which each is repaired.
//
// # Components
//
// A check runs any of three components: the OI scrub (the object index
// against every object's own FID), the namespace check (directory entries
// against the objects' linkEAs and link counts) and the layout check (the
// files' layouts against the records of their OST objects). A run
// (run.go) is a driver and the components behind one interface
// (component.go), as Lustre's engine and its lfsck_operations: the driver
// owns the phases, the scan and its position, pacing, the queue of
// repairs and the OST connections; each component owns its own state and
// decisions.
//
// # Phases
//
// Phase 1 reads every object of the MDT once, in local-key order, and
// gives it to each component; what one object cannot settle (a name whose
// other half is elsewhere, an OST object's record) is matched or asked
// for as the scan goes, and what is still uncertain at its end is
// recorded for phase 2, which re-verifies it on fresh state. With -o,
// phase 2 also looks for the OST objects no layout names and adopts them.
//
// Decisions are made on snapshots while clients change the store. Every
// repair therefore carries the conditions it was decided on (the digests
// of the records it read) and is applied as a command through the MDT's
// log, which applies it only if they still hold: a change in flight is
// never repaired. A dry run evaluates the same conditions and counts what
// it would repair, changing nothing.
//
// # State
//
// The run's state (mdt.KeyLfsckState, a pb.LfsckState) is checkpointed
// through the log at intervals, at phase changes and at a stop: a stopped,
// paused or crashed run resumes from its last checkpoint, on this replica
// or on the next leader, and counts every object once. Phase 2's trace
// and the layout check's deferred slots are kept under the checker's
// trace prefixes; the counters of repairs are kept by apply. Report and
// Progress read it all for `nacre lfsck query` and the server's metrics.
//
// # The OSTs
//
// The layout check compares records by digest (internal/objrec, the
// contract between the checker and the OSTs): the OSTs summarise ranges of
// their objects, the checker sums what its layouts expect for the same
// ranges, and only ranges that differ are checked object by object.
package lfsck
