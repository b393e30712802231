package mdt

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync"
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

// DestroyQueue returns up to max OST objects waiting to be destroyed,
// in key order. It starts where the last call found the first object
// (or lower, where an apply queued one since): the queue's head is where
// destroyed objects leave their deletion marks, tens of thousands after
// a mass removal until a compaction drops them, and a scan from the
// start would walk them all several times a second.
func (t *Target) DestroyQueue(max int) ([]*pb.StripeObject, error) {
	from := t.dq.beginScan()
	first := queueEnd
	defer func() { t.dq.endScan(first) }()
	it, err := t.db.NewIter(from, queueEnd)
	if err != nil {
		return nil, err
	}
	defer it.Close()
	var out []*pb.StripeObject
	for it.First(); it.Valid() && len(out) < max; it.Next() {
		k := it.Key()
		if len(out) == 0 {
			first = append([]byte(nil), k...)
		}
		if len(k) != 21 {
			continue
		}
		out = append(out, &pb.StripeObject{
			Ost: binary.BigEndian.Uint32(k[1:]),
			Seq: binary.BigEndian.Uint64(k[5:]),
			Oid: binary.BigEndian.Uint64(k[13:]),
		})
	}
	if err := it.Error(); err != nil {
		first = from
		return nil, err
	}
	return out, nil
}

var (
	queueStart = []byte{pfxUnlink}
	queueEnd   = kv.PrefixEnd(queueStart)
)

// destroyQueueState is where DestroyQueue starts: low, below which
// nothing is queued. A scan moves it to the first key it found; an apply
// that queues an object below it moves it down (noteQueued, after the
// apply's commit), also while a scan runs (minQueued, taken into account
// when the scan ends: the scan's iterator may predate the commit). Only
// the Target writes the queue: commands, the checker's repairs and
// injected faults are all applies, a snapshot install goes through
// ReplaceState, and a restore from a backup runs with the server stopped.
type destroyQueueState struct {
	scan      sync.Mutex // one scan at a time
	mu        sync.Mutex
	low       []byte // nil: queueStart
	scanning  bool
	minQueued []byte // queued below low during a scan
}

// noteQueued records that an apply queued k (the least key it queued).
func (d *destroyQueueState) noteQueued(k []byte) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.low != nil && bytes.Compare(k, d.low) < 0 {
		d.low = k
	}
	if d.scanning && (d.minQueued == nil || bytes.Compare(k, d.minQueued) < 0) {
		d.minQueued = k
	}
}

func (d *destroyQueueState) beginScan() []byte {
	d.scan.Lock()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.scanning, d.minQueued = true, nil
	if d.low == nil {
		return queueStart
	}
	return d.low
}

// endScan records the first key the scan found (queueEnd: none).
func (d *destroyQueueState) endScan(first []byte) {
	defer d.scan.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	d.low = first
	if d.minQueued != nil && bytes.Compare(d.minQueued, first) < 0 {
		d.low = d.minQueued
	}
	d.scanning, d.minQueued = false, nil
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
