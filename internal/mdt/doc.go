// Package mdt is the metadata target: the MDT's store and its deterministic
// state machine. It has no network code; the metadata server (internal/mds)
// validates requests, proposes them as Commands to the target's Raft group,
// and the group calls Apply on every replica in log order.
//
// # Determinism
//
// Apply reads only the store and the Command. Everything that would differ
// between replicas is decided before the command is logged and carried in
// it (the timestamp, the OSTs to take objects from), or decided from
// replicated state (FIDs, local keys, which precreated object a file gets).
//
// # Key schema
//
// One pebble store per MDT (internal/kv). Keys are grouped by a leading byte
// so that each kind of record is one contiguous range, and the checker's
// full scan of objects is one sequential iteration:
//
//	"\x00identity"                          owner of the store (internal/target)
//	"\x00r" ...                              Raft state kept beside the log (internal/raftgroup: log format, address book, removed ids, replica id, snapshot marker; the log itself is in internal/raftlog's segments)
//	"\x01" name                               counters and singletons (metaKey):
//	    applied                                 last applied Raft index (u64)
//	    nextlocal                               next local object key (u64)
//	    fidseq                                  FID allocation state (seqState)
//	    pool/<ost u32>                          precreate pool of one OST (poolState)
//	    inodes                                  number of objects (u64)
//	"I" FID(16)                               OI: FID -> local key (u64)
//	"O" local(8)                              object: nacrepb.Inode (LMA = Inode.fid,
//	                                           linkEA = Inode.links, layout EA = Inode.layout)
//	"D" parentLocal(8) hash(8) name           directory entry -> child FID(16) + type(1) [+ flags(1): 1 = the
//	                                           child is on another MDT, a remote directory (dtx.go)]
//	"X" local(8) name                         extended attribute value
//	"R" client(8) request(8)                  reply cache: nacrepb.Reply
//	"U" ost(4) seq(8) oid(8)                  OST objects waiting to be destroyed
//	"P" FID(16)                               open-unlinked object (-> client, local key), kept until its last
//	                                           close (internal/mdt/open.go)
//	"T" txid(8)                               cross-MDT transaction: nacrepb.DtxRecord, a participant's
//	                                           intent or a coordinator's outcome (dtx.go)
//	"K" ...                                   checker state (internal/lfsck)
//
// Names in keys ("D", "X") are the name's bytes as given, not necessarily
// UTF-8; the protocol carries them in bytes fields. Integers are big-endian
// so that byte order is numeric order. Directory
// entries are ordered by a 63-bit hash of the name, which is also the
// readdir cookie: a cookie stays valid while other entries come and go.
//
// Local keys are deliberately not FIDs: the OI maps one to the other and
// each object records its own FID (LMA), so a file-level backup restored
// with new local keys can be repaired by rebuilding the OI (OI scrub).
//
// # Redundancy the checker relies on (DESIGN §3)
//
// Every name is stored twice: the directory entry (FID-in-dirent, with the
// type) and the child's linkEA (parent FID, name). nlink equals the number
// of names (directories: 2 + subdirectories). Every layout slot names an OST
// object whose attributes point back (PFID). Apply maintains all of these in
// one atomic batch per Raft entry batch.
package mdt
