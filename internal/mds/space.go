package mds

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "nacre/api/nacrepb"
	"nacre/internal/kv"
	"nacre/internal/layout"
	"nacre/internal/space"
)

// An OST that is nearly out of space or inodes gets no new objects while
// other OSTs have room, as Lustre's allocator skips an OST that reports
// ENOSPC. Without this, files kept landing on a full OST in their
// round-robin turn and every write to them failed with ENOSPC while the
// other OSTs stood empty. An OST refuses data writes below its store's
// reserve (package space); it counts as full here a margin above that, so
// that files placed on it just before still have room, and as usable
// again only at twice the margin, so that one freed object does not flip
// it back and forth.
const reserveInodes = 1024 // free inodes: a precreate round and then some

// fullMargin is how far above its reserve an OST counts as full.
func fullMargin(total uint64) uint64 { return max(total/1000, 4<<20) }

// ostFull decides whether an OST counts as full, given whether it did
// before. Without a report the old verdict stands.
func ostFull(st *pb.Statfs, wasFull bool) bool {
	if st == nil || st.BytesTotal == 0 {
		return wasFull
	}
	limit, inodes := space.Reserve(st.BytesTotal, kv.DefaultMemTableSize)+fullMargin(st.BytesTotal), uint64(reserveInodes)
	if wasFull {
		limit, inodes = limit+fullMargin(st.BytesTotal), 2*inodes
	}
	lowInodes := st.InodesTotal > 0 && st.InodesFree < inodes
	return st.BytesAvail < limit || lowInodes
}

// describeFull names a full OST and what it has left, for messages.
func describeFull(o *ostState) string {
	name := fmt.Sprintf("OST%04x", o.index)
	if o.statfs == nil {
		return name
	}
	return fmt.Sprintf("%s %sB of %sB free, %d inodes free", name, layout.FormatSize(o.statfs.BytesAvail), layout.FormatSize(o.statfs.BytesTotal), o.statfs.InodesFree)
}

// admitSpace refuses a command that adds to the namespace (a new name, an
// extended attribute, a layout) once the MDT's device is down to its
// store's reserve, with ENOSPC naming the MDT; removals, renames and
// attribute changes still go through, so that files can be removed to
// make room.
func (s *Server) admitSpace(cmd *pb.Command) error {
	if s.space == nil {
		return nil
	}
	switch cmd.Op.(type) {
	case *pb.Command_Create, *pb.Command_Link, *pb.Command_Setxattr, *pb.Command_SetLayout:
	default:
		return nil
	}
	// About what a new inode, its name and its link record take.
	if err := s.space.Admit(1024); err != nil {
		return status.Error(codes.ResourceExhausted, err.Error())
	}
	return nil
}
