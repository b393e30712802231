package mdt

import (
	"fmt"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
)

// Direct applies commands to a Target synchronously, without Raft, as the
// log would: one entry per command, increasing indexes. Tests, tools that
// work on an offline MDT, and the checker's unit tests use it.
type Direct struct {
	T     *Target
	mu    sync.Mutex
	index uint64
	Now   func() time.Time
}

// NewDirect wraps t; indexes continue after the applied index.
func NewDirect(t *Target) *Direct {
	return &Direct{T: t, index: t.Applied(), Now: time.Now}
}

// Do stamps the command with the time and applies it.
func (d *Direct) Do(cmd *pb.Command) (*pb.Reply, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if cmd.NowNs == 0 {
		cmd.NowNs = d.Now().UnixNano()
	}
	data, err := proto.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	d.index++
	out, err := d.T.Apply([]Entry{{Index: d.index, Data: data}})
	if err != nil {
		return nil, err
	}
	if out[0] == nil {
		return nil, fmt.Errorf("no reply for index %d", d.index)
	}
	return out[0], nil
}

// Setup grants a FID sequence range and creates pools of n objects on each
// of osts, as the MDS does when it starts.
func (d *Direct) Setup(seqStart uint64, osts []uint32, ostSeq uint64, n uint64) error {
	if r, err := d.Do(&pb.Command{Op: &pb.Command_SeqGrant{SeqGrant: &pb.SeqGrantOp{Start: seqStart, End: seqStart + 16}}}); err != nil || r.Errno != 0 {
		return fmt.Errorf("seq grant: %v %v", err, r)
	}
	for _, o := range osts {
		if r, err := d.Do(&pb.Command{Op: &pb.Command_PoolReset{PoolReset: &pb.PoolResetOp{Ost: o, Seq: ostSeq, Start: 1}}}); err != nil || r.Errno != 0 {
			return fmt.Errorf("pool reset: %v %v", err, r)
		}
		if r, err := d.Do(&pb.Command{Op: &pb.Command_PoolExtend{PoolExtend: &pb.PoolExtendOp{Ost: o, Seq: ostSeq, End: 1 + n}}}); err != nil || r.Errno != 0 {
			return fmt.Errorf("pool extend: %v %v", err, r)
		}
	}
	return nil
}
