package lfsck

import (
	"context"
	"sync"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
)

// The run's OSTs. An OST that does not answer is skipped, not failed
// (LU-19329): it is marked incomplete in the state, and the layout check
// leaves its orphans alone at the end (Lustre's LF_INCOMPLETE).

// ostConns caches the clients of the OSTs known now.
type ostConns struct {
	mu sync.Mutex
	m  map[uint32]OST
	at time.Time
}

// ostClient returns OST idx's client, from a map refreshed every second
// (asking the server for it on every batch costs more than the batch).
func (r *run) ostClient(idx uint32) OST {
	o := &r.osts
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || time.Since(o.at) > time.Second {
		o.m, o.at = r.env.OSTs(), time.Now()
	}
	return o.m[idx]
}

func (r *run) markIncomplete(idx uint32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.st.IncompleteOsts {
		if o == idx {
			return
		}
	}
	r.st.IncompleteOsts = append(r.st.IncompleteOsts, idx)
}

func (r *run) incomplete(idx uint32) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, o := range r.st.IncompleteOsts {
		if o == idx {
			return true
		}
	}
	return false
}

// ostRepair asks OST idx for one conditional repair of an object record;
// it reports whether the OST made it.
func (r *run) ostRepair(idx uint32, item *pb.LfsckObjRepair) (bool, error) {
	cli := r.env.OSTs()[idx]
	if cli == nil {
		return false, errno.Errorf(errno.Unavailable, "OST%04x is not up", idx)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.env.RPCTimeout)
	defer cancel()
	rep, err := cli.Repair(ctx, &pb.LfsckObjRepairRequest{Items: []*pb.LfsckObjRepair{item}})
	if err != nil {
		return false, err
	}
	return len(rep.Done) == 1 && rep.Done[0], nil
}

// askOST reads one object's record from its OST: nil if the OST returned
// none. ok is false when the OST is unknown or did not answer (it is then
// marked incomplete); err is errHalted when the run is stopping.
func (r *run) askOST(s stripe) (a *pb.ObjectAttr, ok bool, err error) {
	cli := r.env.OSTs()[s.ost]
	if cli == nil {
		r.markIncomplete(s.ost)
		return nil, false, nil
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.env.RPCTimeout)
	attrs, err := cli.GetObjects(ctx, []*pb.StripeObject{{Ost: s.ost, Seq: s.seq, Oid: s.oid}})
	cancel()
	if err != nil {
		if r.stopping() {
			return nil, false, errHalted
		}
		r.markIncomplete(s.ost)
		return nil, false, nil
	}
	if len(attrs) != 1 {
		return nil, true, nil
	}
	return attrs[0], true, nil
}
