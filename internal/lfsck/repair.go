package lfsck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/mdt"
)

// repairer sends repairs (and reports) through the MDT's log in batches,
// one batch in flight while the scan goes on. A dry run sends nothing: it
// evaluates each repair's conditions against the current state, as apply
// would, and counts in memory.
type repairer struct {
	r *run

	mu      sync.Mutex
	batch   []*pb.LfsckRepair
	size    int
	pending sync.WaitGroup
	sem     chan struct{}
	err     error
	changed []fid.FID // files whose data queued repairs change (dataChanged)
	// reported: a dry run's reports counted, by component and key (each
	// is counted once per run).
	reported map[string]bool
}

const (
	repairBatchItems = 256
	repairBatchBytes = 256 << 10
)

func newRepairer(r *run) *repairer {
	return &repairer{r: r, sem: make(chan struct{}, 2), reported: map[string]bool{}}
}

// add queues a repair found for the work of entry e (nil: the object being
// scanned, or phase 2).
func (rp *repairer) add(comp uint32, e *entry, rep *pb.LfsckRepair) {
	if rp.r.dry {
		rp.evalDry(comp, e, rep)
		return
	}
	rp.mu.Lock()
	rp.batch = append(rp.batch, rep)
	rp.size += proto.Size(rep)
	full := len(rp.batch) >= repairBatchItems || rp.size >= repairBatchBytes
	var out []*pb.LfsckRepair
	if full {
		out, rp.batch, rp.size = rp.batch, nil, 0
	}
	rp.mu.Unlock()
	if out != nil {
		rp.send(rp.r.ctx, out)
	}
}

func (rp *repairer) send(ctx context.Context, batch []*pb.LfsckRepair) {
	rp.sem <- struct{}{}
	rp.pending.Add(1)
	go func() {
		defer rp.pending.Done()
		defer func() { <-rp.sem }()
		if err := rp.propose(ctx, batch); err != nil {
			rp.mu.Lock()
			if rp.err == nil {
				rp.err = err
			}
			rp.mu.Unlock()
		}
	}()
}

func (rp *repairer) propose(ctx context.Context, batch []*pb.LfsckRepair) error {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	rp.r.pac.own.Add(1)
	// The time of the repairs, for the objects they change or make (a
	// directory given back a name, an object adopted or re-created), as
	// the MDS stamps a client's command; without it apply set them to
	// 1970.
	rep, err := rp.r.env.Propose(cctx, &pb.Command{NowNs: time.Now().UnixNano(), Op: &pb.Command_LfsckRepair{LfsckRepair: &pb.LfsckRepairOp{Repairs: batch}}})
	if err != nil {
		return fmt.Errorf("propose %d repairs: %w", len(batch), err)
	}
	if rep.Errno != 0 && len(batch) > 1 {
		return fmt.Errorf("repairs: %s: %w", rep.Message, syscall.Errno(rep.Errno))
	}
	// Repairs apply refused (not as stale: something in the way, as a
	// name taken): each is a failure of its component, logged, and with
	// -e failout the end of the run. They were counted in the store
	// only, and the run ended "completed" with nothing in the log.
	for _, comp := range rep.LfsckFailed {
		if err := rp.r.repairFailed(comp, errors.New(rep.Message)); err != nil {
			return err
		}
	}
	return nil
}

// flush sends what is queued and waits until every repair sent is applied.
func (rp *repairer) flush() error { return rp.flushCtx(rp.r.ctx) }

func (rp *repairer) flushCtx(ctx context.Context) error {
	if rp.r.dry {
		return nil
	}
	rp.mu.Lock()
	out := rp.batch
	rp.batch, rp.size = nil, 0
	rp.mu.Unlock()
	if len(out) > 0 {
		rp.send(ctx, out)
	}
	rp.pending.Wait()
	rp.mu.Lock()
	err := rp.err
	rp.err = nil
	changed := rp.changed
	rp.changed = nil
	rp.mu.Unlock()
	// Repairs that failed may have applied all the same (a lost reply):
	// telling clients to look again costs nothing wrong.
	rp.r.invalidate(changed)
	if err != nil && (errors.Is(err, context.Canceled) || rp.r.stopping()) {
		return errHalted
	}
	return err
}

// dataChanged notes that a repair changes the data of file f: the clients
// are told to drop their cache of it at the next flush, once the repair
// applied, with the others in one call (not one wait for every client's
// answer per repaired file in the scan).
func (rp *repairer) dataChanged(f fid.FID) {
	if rp.r.dry {
		return
	}
	rp.mu.Lock()
	rp.changed = append(rp.changed, f)
	rp.mu.Unlock()
}

// invalidate has the clients drop what they cache of fs.
func (r *run) invalidate(fs []fid.FID) {
	if len(fs) == 0 || r.dry || r.env.Invalidate == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.env.Invalidate(ctx, fs)
}

// evalDry counts what a repair would find: its conditions are checked
// against the current state (the store is not changed).
func (rp *repairer) evalDry(comp uint32, e *entry, rep *pb.LfsckRepair) {
	r := rp.r
	db := r.env.Target.DB()
	if len(rep.ReportKey) > 0 {
		k := string(append([]byte{byte(comp)}, rep.ReportKey...))
		rp.mu.Lock()
		seen := rp.reported[k]
		rp.reported[k] = true
		rp.mu.Unlock()
		if seen {
			return
		}
	}
	if ok, err := mdt.CheckConds(db, rep.Conds); err != nil || !ok {
		return
	}
	// A recount that is the whole repair finds something only if the
	// count is wrong now; one that follows other changes just settles
	// the count after them (mdt's stage.dirNlink).
	if len(rep.Muts) > 0 {
		if d, ok := rep.Muts[0].M.(*pb.LfsckMut_DirNlink); ok && !dirNlinkWrong(db, fid.FromPB(d.DirNlink), r) {
			return
		}
	}
	for _, k := range rep.Kinds {
		r.countFound(e, comp, k)
	}
}

// dirNlinkWrong recounts a directory's subdirectory entries now.
func dirNlinkWrong(db getter, f fid.FID, r *run) bool {
	local, ino, err := r.lookup(db, f)
	if err != nil {
		return false
	}
	p := mdt.DirentPrefix(local)
	it, err := r.env.Target.DB().NewIter(p, nil)
	if err != nil {
		return false
	}
	defer it.Close()
	n := uint32(2)
	for it.SeekGE(p); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) < len(p) || string(k[:len(p)]) != string(p) {
			break
		}
		if _, typ, ok := mdt.DecodeDirent(it.Value()); ok && typ == dtDir {
			n++
		}
	}
	return ino.Nlink != n
}

// now sends one repair at once, outside the batch, and waits for it: for
// counting a repair already made on an OST, so that a stop or crash right
// after the OST change rarely loses its count.
func (rp *repairer) now(comp uint32, e *entry, rep *pb.LfsckRepair) {
	if rp.r.dry {
		rp.evalDry(comp, e, rep)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := rp.propose(ctx, []*pb.LfsckRepair{rep}); err != nil {
		rp.r.log.Warn("count a repair made on an OST", "err", err)
	}
}

// Conditions and changes of a repair (LfsckRepair): apply makes the
// changes only if every condition holds.

func condVal(k, v []byte) *pb.LfsckCond {
	return &pb.LfsckCond{Key: append([]byte(nil), k...), Digest: mdt.Digest(v)}
}

func condAbsent(k []byte) *pb.LfsckCond {
	return &pb.LfsckCond{Key: append([]byte(nil), k...), Absent: true}
}

func setMut(k, v []byte) *pb.LfsckMut {
	return &pb.LfsckMut{M: &pb.LfsckMut_Set{Set: &pb.LfsckKV{Key: append([]byte(nil), k...), Value: append([]byte(nil), v...)}}}
}

func delMut(k []byte) *pb.LfsckMut {
	return &pb.LfsckMut{M: &pb.LfsckMut_Del{Del: append([]byte(nil), k...)}}
}

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
