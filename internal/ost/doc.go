// Package ost is the object storage target: OST objects as sparse files
// on the local file system, and their attribute records in a pebble store
// next to them. No network: internal/oss serves a Store over gRPC and the
// bulk data protocol (a *Store is a bulk.Handler).
//
// # What an object is
//
// An object exists when its attribute record exists. The data file is
// created lazily by the first write or truncate, so precreating thousands
// of objects for the MDS (Lustre's precreate) costs one synced batch of
// small records and no file system work, and a create on the MDS never
// waits for an OST.
//
// The record holds the object's own id (as an LMA would: a record found
// under another key is corrupt) and, once the object is written through a
// layout, its parent file (PFID), stripe index, stripe size and count,
// layout generation and owner, like Lustre's filter_fid. The first write,
// truncate or setattr that carries a PFID records it; later writes leave
// it alone. The layout checker compares these PFIDs with the MDT's layouts
// (DESIGN.md §3).
//
// # Store keys (pebble, under target.StoreDir)
//
//	"\x00identity"                  owner of the store (internal/target.CheckStore)
//	'o' seq(8, BE) oid(8, BE)       attribute record: nacrepb.ObjectAttr, marshalled,
//	                                with seq, oid, PFID, layout and owner fields only
//	                                (size, blocks, mtime and exists are never stored)
//	'l' seq(8, BE)                  LAST_ID of seq: highest oid created (8 bytes, BE)
//	'n'                             number of objects (8 bytes, BE)
//	'e'                             the epoch record (JSON, epoch.go): what
//	                                acknowledged, unsynced writes survive
//
// Big-endian ids make the records of one sequence one contiguous, ordered
// key range: Precreate, Cleanup and the checker's scans are sequential
// iterations over exactly the range they need.
//
// # Data files
//
//	<dir>/objects/<seq hex>/<oid%256, 2 hex digits>/<oid hex>
//
// e.g. objects/100000000/2a/2a. The 256 buckets per sequence keep
// directories small. Holes are holes in the file (pread returns zeros),
// PUNCH is fallocate(PUNCH_HOLE|KEEP_SIZE).
//
// # Durability
//
// Precreate, Cleanup and Destroy commit synced batches. Writes and the
// record updates they cause (the first PFID) are not synced by themselves:
// Sync(obj) fdatasyncs the object's file, fsyncs its bucket directory if
// it gained a file since, and syncs the store's WAL if any record changed
// since the last WAL sync (concurrent Syncs share pebble's group commit).
// Destroy unlinks the files and fsyncs their directories before it deletes
// the records, so a crash can leave an empty object (destroyed again by a
// retry or by Cleanup), never a data file that no record owns.
//
// Errors carry their errno: ENOENT for a missing object, ENOSPC and EIO
// as the local file system reported them, EIO for a corrupt record.
package ost
