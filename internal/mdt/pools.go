package mdt

import (
	"encoding/binary"
	"fmt"
	"syscall"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/kv"
)

// The internal commands below are proposed by the MDS leader itself; they
// keep the replicated record of precreate pools, FID sequences and the
// destroy queue, so that a new leader never hands out an object or a FID
// twice.

func (x *txn) poolExtend(op *pb.PoolExtendOp) (*pb.Reply, error) {
	p := x.t.pools[op.Ost]
	if p == nil || p.Seq != op.Seq {
		// Extending a pool that was never reset would skip the orphan
		// cleanup; the leader always resets first.
		return nil, errf(syscall.EINVAL, "extend pool of OST%04x: no pool for sequence %#x", op.Ost, op.Seq)
	}
	if op.End > p.End {
		p.End = op.End
		x.st.dirtyPools[op.Ost] = true
	}
	return &pb.Reply{}, nil
}

func (x *txn) poolReset(op *pb.PoolResetOp) (*pb.Reply, error) {
	p := x.t.pools[op.Ost]
	if p == nil {
		start := op.Start
		if start == 0 {
			start = 1
		}
		p = &PoolState{Seq: op.Seq, Next: start, End: start}
		x.t.pools[op.Ost] = p
	} else {
		p.End = p.Next
	}
	x.st.dirtyPools[op.Ost] = true
	return &pb.Reply{}, nil
}

func (x *txn) seqGrant(op *pb.SeqGrantOp) (*pb.Reply, error) {
	if op.End <= op.Start {
		return nil, errf(syscall.EINVAL, "empty sequence range [%#x, %#x)", op.Start, op.End)
	}
	s := &x.t.seq
	if s.Cur >= op.Start && s.Cur < op.End {
		return &pb.Reply{}, nil // already in use: a retried grant
	}
	// The MGS grants ranges in increasing order and the leader records
	// them in that order, so a new grant starts above the sequence in use
	// and above every range held. Anything else is a retry of a grant
	// already recorded (then it matches a range held) or a grant that
	// must not be used: one below the current sequence would hand out
	// its FIDs again.
	stale := op.Start <= s.Cur
	for _, r := range s.Ranges {
		if r[0] == op.Start && r[1] == op.End {
			return &pb.Reply{}, nil
		}
		if op.Start < r[1] {
			stale = true
		}
	}
	if stale {
		x.t.log.Warn("sequence grant ignored: it is not above the sequences this MDT holds (a stale retry, or a range granted twice)",
			"start", fmt.Sprintf("%#x", op.Start), "end", fmt.Sprintf("%#x", op.End), "current", fmt.Sprintf("%#x", s.Cur), "ranges", len(s.Ranges))
		return &pb.Reply{}, nil
	}
	s.Ranges = append(s.Ranges, [2]uint64{op.Start, op.End})
	x.st.dirtySeq = true
	return &pb.Reply{}, nil
}

func (x *txn) destroyDone(op *pb.DestroyDoneOp) (*pb.Reply, error) {
	for _, o := range op.Objects {
		x.b.Delete(unlinkKey(o.Ost, o.Seq, o.Oid))
	}
	return &pb.Reply{}, nil
}

// DestroyQueue returns up to max OST objects waiting to be destroyed.
func (t *Target) DestroyQueue(max int) ([]*pb.StripeObject, error) {
	lo := []byte{pfxUnlink}
	it, err := t.db.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*pb.StripeObject
	for it.First(); it.Valid() && len(out) < max; it.Next() {
		k := it.Key()
		if len(k) != 21 {
			continue
		}
		out = append(out, &pb.StripeObject{
			Ost: binary.BigEndian.Uint32(k[1:]),
			Seq: binary.BigEndian.Uint64(k[5:]),
			Oid: binary.BigEndian.Uint64(k[13:]),
		})
	}
	return out, it.Error()
}

// trimOldReplies drops cached replies older than the cut-off, of every
// client. Replies are only needed while their client may still retry.
func (x *txn) trimOldReplies(op *pb.TrimRepliesOp) (*pb.Reply, error) {
	lo := []byte{pfxReply}
	it, err := x.b.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		return nil, errf(syscall.EIO, "scan reply cache: %v", err)
	}
	var drop [][]byte
	for it.First(); it.Valid(); it.Next() {
		r := &pb.Reply{}
		if proto.Unmarshal(it.Value(), r) != nil || r.TimeNs < op.BeforeNs {
			drop = append(drop, append([]byte(nil), it.Key()...))
		}
	}
	it.Close()
	for _, k := range drop {
		x.b.Delete(k)
		if len(k) == 17 {
			client, req := binary.BigEndian.Uint64(k[1:]), binary.BigEndian.Uint64(k[9:])
			if ids := x.t.c.replies[client]; ids != nil {
				delete(ids, req)
				if len(ids) == 0 {
					delete(x.t.c.replies, client)
					delete(x.t.c.acks, client)
				}
			}
		}
	}
	return &pb.Reply{}, nil
}
