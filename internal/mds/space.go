package mds

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/layout"
	"nacre/internal/reserve"
)

// An OST that is nearly out of space or inodes gets no new objects while
// other OSTs have room, as Lustre's allocator skips an OST that reports
// ENOSPC. Without this, files kept landing on a full OST in their
// round-robin turn and every write to them failed with ENOSPC while the
// other OSTs stood empty. An OST reports as available only what clients
// may still write (its store's reserve taken out, package space); it
// counts as full here when that is below a margin, so that files placed
// on it just before still have room, and as usable again only at twice
// the margin, so that one freed object does not flip it back and forth.
const reserveInodes = 1024 // free inodes: a precreate round and then some

// fullMargin is the space an OST must have available for new objects.
func fullMargin(total uint64) uint64 { return reserve.FullMargin(total) }

// ostFull decides whether an OST counts as full, given whether it did
// before. Without a report the old verdict stands.
func ostFull(st *pb.Statfs, wasFull bool) bool {
	if st == nil || st.BytesTotal == 0 {
		return wasFull
	}
	limit, inodes := fullMargin(st.BytesTotal), uint64(reserveInodes)
	if wasFull {
		limit, inodes = 2*limit, 2*inodes
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
	return fmt.Sprintf("%s %sB of %sB available, %d inodes free", name, layout.FormatSize(o.statfs.BytesAvail), layout.FormatSize(o.statfs.BytesTotal), o.statfs.InodesFree)
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
	case *pb.Command_Create, *pb.Command_Tmpfile, *pb.Command_Link, *pb.Command_Setxattr, *pb.Command_SetLayout:
	default:
		return nil
	}
	// About what a new inode, its name and its link record take; the
	// store writes it through the Raft log, not through the guard.
	const inode = 1024
	err := s.space.Admit(inode)
	if err == nil {
		s.space.Done(inode)
		// The store's own files need inodes too (a device shared with
		// others can run out of them).
		err = s.space.AdmitFiles(0)
	}
	if fe, ok := errors.AsType[*reserve.FullError](err); ok {
		// The public message: no server paths.
		return errno.New(errno.ResourceExhausted, fe.Public())
	}
	if err != nil {
		return errno.New(errno.ResourceExhausted, err.Error())
	}
	if msg := s.fullReplica(); msg != "" {
		return errno.New(errno.ResourceExhausted, msg)
	}
	return nil
}

// fullReplica names another replica of this MDT whose device is down to
// its store's reserve, by its last heartbeat ("" if none is). Every
// replica applies the same entries: without this check only the leader's
// device counted, and a follower on a smaller or fuller one took new names
// until its log could not grow and it stopped, leaving the group one
// failure from unavailable. Now new names are refused while any replica
// that is up is short (etcd raises its NOSPACE alarm for the whole
// cluster in the same case); removals still go through. A replica that
// is down does not count: it catches up from a snapshot, whose size the
// reserve does not cover.
func (s *Server) fullReplica() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := slices.Sorted(maps.Keys(s.replicas))
	for _, id := range ids {
		ti := s.replicas[id]
		st := ti.Statfs
		if ti.State != "up" || st == nil || st.BytesTotal == 0 || st.BytesAvail >= fullMargin(st.BytesTotal) {
			continue
		}
		return fmt.Sprintf("%s replica %d is full: %sB available beyond its store's reserve on a %sB device; free space on that replica's device, or replace the replica (nacre replica replace)",
			s.id.Label(), id, layout.FormatSize(st.BytesAvail), layout.FormatSize(st.BytesTotal))
	}
	return ""
}

// qosImbalance is the difference of available space, in percent of the
// most, between the OSTs with the most and the least, above which new
// files are placed by space rather than in turn (Lustre's qos_threshold_rr,
// 17 % by default): round robin would fill the emptier OSTs' last bytes
// as fast as the others', and a file that then outgrows one of them fails
// with ENOSPC while others have room.
const qosImbalance = 17

// qosWeights returns the weights by which to place a new file's stripes
// on the ready OSTs, their available bytes, or nil if their space is
// balanced (or unknown for one of them): round robin then.
func (s *Server) qosWeights(ready []uint32) []uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	w := make([]uint64, len(ready))
	var most, least uint64 = 0, math.MaxUint64
	for i, o := range ready {
		st := s.osts[o].statfs
		if st == nil || st.BytesTotal == 0 {
			return nil
		}
		w[i] = st.BytesAvail
		most, least = max(most, w[i]), min(least, w[i])
	}
	if len(ready) < 2 || most == 0 || (most-least)*100 <= qosImbalance*most {
		return nil
	}
	return w
}

// weightedOrder orders osts for a new file: each next one drawn among
// those left with a chance proportional to its weight (randN(n) draws
// from [0, n)). The first stripes of a file go to the first OSTs.
func weightedOrder(osts []uint32, w []uint64, randN func(uint64) uint64) []uint32 {
	osts, w = slices.Clone(osts), slices.Clone(w)
	out := make([]uint32, 0, len(osts))
	for len(osts) > 0 {
		var total uint64
		for _, x := range w {
			total += x/4096 + 1 // in 4 KiB units, at least 1: never overflows, never all zero
		}
		r := randN(total)
		i := 0
		for ; i < len(w)-1; i++ {
			u := w[i]/4096 + 1
			if r < u {
				break
			}
			r -= u
		}
		out = append(out, osts[i])
		osts = slices.Delete(osts, i, i+1)
		w = slices.Delete(w, i, i+1)
	}
	return out
}
