package lfsck

import (
	"context"
	"encoding/binary"
	"errors"
	"sort"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
)

// The layout check: every layout slot of every regular file is compared
// with its OST object's record (PFID, stripe, owner). The scan queues one
// check per slot on its OST's queue; a queue goes out as one RPC of up to
// 4096 objects, sorted by object id, carrying only a digest of the record
// each object should hold, so an OST answers with one ordered iteration
// and sends back only what differs. At most `window` checks are in flight
// (Lustre's async window): the scan waits when the window is full, until
// half of it has drained. Two RPCs per OST at most are in flight.
//
// Checkpoints must not pass work in flight: every file with checks in
// flight is an entry of a FIFO in scan order; the checkpoint position is
// the first entry not finished, and the figures of everything from that
// entry on are held back (they are counted again when the scan resumes).

type checkItem struct {
	ost    uint32
	slot   uint32
	seq    uint64
	oid    uint64
	digest uint64
	ent    *entry
}

// expected is the record the slot's object should hold, from the file's
// current record.
func expected(f fid.FID, ino *pb.Inode, it *checkItem) objrec.Rec {
	l := ino.Layout
	return objrec.Rec{Seq: it.seq, Oid: it.oid, Parent: f, StripeIndex: it.slot, StripeSize: l.StripeSize,
		StripeCount: uint32(len(l.Objects)), Gen: l.Generation, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid}
}

type entry struct {
	local     uint64
	fid       fid.FID
	remaining int
	done      bool // popped from the FIFO
	delta     figs
}

// figs is a sparse tally: the few figures one object or one file in
// flight moves (a full tally each would cost more than the scan).
type figs struct {
	n    int
	comp [12]uint8
	slot [12]uint8
	val  [12]uint64
	full *tally // once more kinds of figures than the list holds
}

func (f *figs) add(comp uint32, slot int, n uint64) {
	if f.full != nil {
		f.full[comp][slot] += n
		return
	}
	for i := 0; i < f.n; i++ {
		if f.comp[i] == uint8(comp) && f.slot[i] == uint8(slot) {
			f.val[i] += n
			return
		}
	}
	if f.n == len(f.comp) {
		f.full = &tally{}
		f.into(f.full)
		f.full[comp][slot] += n
		return
	}
	f.comp[f.n], f.slot[f.n], f.val[f.n] = uint8(comp), uint8(slot), n
	f.n++
}

// into adds f to t.
func (f *figs) into(t *tally) {
	if f.full != nil {
		t.add(f.full)
		return
	}
	for i := 0; i < f.n; i++ {
		t[f.comp[i]][f.slot[i]] += f.val[i]
	}
}

// outOf subtracts f from t.
func (f *figs) outOf(t *tally) {
	if f.full != nil {
		t.sub(f.full)
		return
	}
	for i := 0; i < f.n; i++ {
		t[f.comp[i]][f.slot[i]] -= f.val[i]
	}
}

// addFigs adds g to f.
func (f *figs) addFigs(g *figs) {
	if g.full != nil {
		for c := range g.full {
			for s, v := range g.full[c] {
				if v != 0 {
					f.add(uint32(c), s, v)
				}
			}
		}
		return
	}
	for i := 0; i < g.n; i++ {
		f.add(uint32(g.comp[i]), int(g.slot[i]), g.val[i])
	}
}

type objFigures struct {
	local uint64
	figs
}

// ostQueue collects one OST's checks column by column, as the request
// carries them; a full queue is handed to its sender as it is.
type ostQueue struct {
	idx     uint32
	b       *batch
	sending int
}

type batch struct {
	oids, digests []uint64
	items         []itemRef
}

type itemRef struct {
	ent  *entry
	slot uint32
	seq  uint64
}

func (b *batch) len() int { return len(b.oids) }

// Batches are recycled: allocating and zeroing a few hundred kilobytes per
// RPC showed in the profile.
var batchPool sync.Pool

func newBatch(n int) *batch {
	if v := batchPool.Get(); v != nil {
		b := v.(*batch)
		if cap(b.oids) >= n {
			return b
		}
	}
	return &batch{oids: make([]uint64, 0, n), digests: make([]uint64, 0, n), items: make([]itemRef, 0, n)}
}

func freeBatch(b *batch) {
	clear(b.items) // drop the entry pointers
	b.oids, b.digests, b.items = b.oids[:0], b.digests[:0], b.items[:0]
	batchPool.Put(b)
}

// item rebuilds the check of element i.
func (b *batch) item(ost uint32, i int) checkItem {
	ref := b.items[i]
	return checkItem{ost: ost, slot: ref.slot, seq: ref.seq, oid: b.oids[i], digest: b.digests[i], ent: ref.ent}
}

// sortByOid sorts the batch (it usually is sorted already: objects are
// assigned in creation order).
func (b *batch) sortByOid() {
	sorted := true
	for i := 1; i < len(b.oids); i++ {
		if b.oids[i] < b.oids[i-1] {
			sorted = false
			break
		}
	}
	if !sorted {
		sort.Sort(b)
	}
}

func (b *batch) Len() int           { return len(b.oids) }
func (b *batch) Less(i, j int) bool { return b.oids[i] < b.oids[j] }
func (b *batch) Swap(i, j int) {
	b.oids[i], b.oids[j] = b.oids[j], b.oids[i]
	b.digests[i], b.digests[j] = b.digests[j], b.digests[i]
	b.items[i], b.items[j] = b.items[j], b.items[i]
}

type layoutChecker struct {
	r *run

	mu        sync.Mutex
	cond      *sync.Cond
	window    int
	inflight  int
	fifo      []*entry
	tail      *entry
	cur       objFigures // the object being scanned (its own figures)
	inObj     bool
	scanPos   uint64
	queues    map[uint32]*ostQueue
	order     []*ostQueue // the queues, for the flush after every file
	lastFlush time.Time
	advances  uint64 // calls of advance, to read the clock on some only
	wg        sync.WaitGroup
	// frozen: while summaries are verified (summary.go), checkpoints keep
	// the position and figures of the end of the scan.
	frozen    *tally
	frozenPos uint64
}

func newLayoutChecker(r *run, window int) *layoutChecker {
	if window <= 0 {
		window = defaultWindow
	}
	lc := &layoutChecker{r: r, window: window, queues: map[uint32]*ostQueue{}}
	lc.cond = sync.NewCond(&lc.mu)
	return lc
}

func (lc *layoutChecker) setWindow(w int) {
	lc.mu.Lock()
	lc.window = w
	lc.r.st.Params.Window = uint32(w)
	lc.cond.Broadcast()
	lc.mu.Unlock()
}

// begin starts the figures of the object at local: until end, they are
// its own (held back with its checks if it has any in flight).
func (lc *layoutChecker) begin(local uint64) {
	lc.mu.Lock()
	lc.cur.local, lc.cur.figs, lc.inObj = local, figs{}, true
	lc.mu.Unlock()
}

// end closes the object's figures: with no checks in flight they go with
// the last file that has some (they are after it in scan order).
func (lc *layoutChecker) end() {
	lc.mu.Lock()
	if lc.inObj && lc.tail != nil && !lc.tail.done {
		lc.tail.delta.addFigs(&lc.cur.figs)
	}
	lc.inObj = false
	lc.mu.Unlock()
}

// bump adds to a phase-1 figure of the object being scanned.
func (lc *layoutChecker) bump(comp uint32, slot int, n uint64) {
	lc.mu.Lock()
	lc.r.t1[comp][slot] += n
	switch {
	case lc.inObj:
		lc.cur.add(comp, slot, n)
	case lc.tail != nil && !lc.tail.done:
		lc.tail.delta.add(comp, slot, n)
	}
	lc.mu.Unlock()
}

// bumpEnt adds to a figure of a file whose checks are in flight.
func (lc *layoutChecker) bumpEnt(e *entry, comp uint32, slot int, n uint64) {
	if e == nil {
		lc.bump(comp, slot, n)
		return
	}
	lc.mu.Lock()
	lc.r.t1[comp][slot] += n
	if !e.done {
		e.delta.add(comp, slot, n)
	}
	lc.mu.Unlock()
}

// advance records the scan position (the next local key to scan).
func (lc *layoutChecker) advance(pos uint64, final bool) {
	lc.mu.Lock()
	lc.scanPos = pos
	// The clock is read every 64 objects: once per object it was 3.5 % of
	// a namespace run's CPU.
	lc.advances++
	flush := final || (lc.advances%64 == 0 && time.Since(lc.lastFlush) > 100*time.Millisecond)
	if flush {
		lc.flushLocked(true)
	}
	lc.mu.Unlock()
}

// checkpointFigures returns the checkpoint position and phase-1 figures.
func (lc *layoutChecker) checkpointFigures() (uint64, tally) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if lc.frozen != nil {
		return lc.frozenPos, *lc.frozen
	}
	t := lc.r.t1
	pos := lc.scanPos
	if len(lc.fifo) > 0 {
		pos = lc.fifo[0].local
		for _, e := range lc.fifo {
			e.delta.outOf(&t)
		}
	}
	return pos, t
}

func (lc *layoutChecker) batchSize() int {
	n := len(lc.queues)
	if n == 0 {
		n = 1
	}
	b := lc.window / (2 * n)
	return max(1, min(8192, b))
}

// freeze holds the figures and the position back from checkpoints until
// thaw (summary.go, verify); the queue is drained.
func (lc *layoutChecker) freeze() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	t := lc.r.t1
	lc.frozen, lc.frozenPos = &t, lc.scanPos
}

func (lc *layoutChecker) thaw() {
	lc.mu.Lock()
	lc.frozen = nil
	lc.mu.Unlock()
}

// add queues the checks of one file.
func (lc *layoutChecker) add(local uint64, f fid.FID, checks []checkItem) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	e := &entry{local: local, fid: f, remaining: len(checks)}
	if lc.inObj && lc.cur.local == local {
		e.delta = lc.cur.figs
		lc.inObj = false
	}
	lc.fifo = append(lc.fifo, e)
	lc.tail = e
	// A file's stripes count as checked when queued: until the file pops
	// from the FIFO its figures are held back from checkpoints anyway.
	n := uint64(len(checks))
	lc.r.t1[Layout][tChecked] += n
	lc.r.t1[Layout][tStat+sStripes] += n
	e.delta.add(Layout, tChecked, n)
	e.delta.add(Layout, tStat+sStripes, n)
	for i := range checks {
		checks[i].ent = e
	}
	lc.enqueueLocked(checks)
}

// queue queues checks that summaries did not settle (summary.go): their
// stripes were counted when the scan recorded them. Each has an entry of
// its own; one whose file is gone is dropped.
func (lc *layoutChecker) queue(checks []checkItem) error {
	for i := range checks {
		it := checks[i : i+1]
		if !lc.r.lookupCheck(&it[0]) {
			continue
		}
		lc.mu.Lock()
		lc.fifo = append(lc.fifo, it[0].ent)
		lc.tail = it[0].ent
		lc.enqueueLocked(it)
		lc.mu.Unlock()
		if lc.r.stopping() {
			return errHalted
		}
	}
	return nil
}

// enqueueLocked puts checks on their OSTs' queues, sends full queues, and
// waits while the window is full.
func (lc *layoutChecker) enqueueLocked(checks []checkItem) {
	bs := lc.batchSize()
	for _, it := range checks {
		q := lc.queues[it.ost]
		if q == nil {
			q = &ostQueue{idx: it.ost}
			lc.queues[it.ost] = q
			lc.order = append(lc.order, q)
		}
		if q.b == nil {
			q.b = newBatch(bs)
		}
		q.b.oids = append(q.b.oids, it.oid)
		q.b.digests = append(q.b.digests, it.digest)
		q.b.items = append(q.b.items, itemRef{ent: it.ent, slot: it.slot, seq: it.seq})
	}
	lc.inflight += len(checks)
	lc.flushLocked(false)
	if lc.inflight >= lc.window {
		lc.flushLocked(true)
		for lc.inflight > lc.window/2 && !lc.r.stopping() {
			lc.cond.Wait()
			lc.flushLocked(true)
		}
	}
}

// flushLocked sends full queues (all non-empty ones with partial).
func (lc *layoutChecker) flushLocked(partial bool) {
	bs := lc.batchSize()
	for _, q := range lc.order {
		if q.b != nil && q.b.len() > 0 && q.sending < 2 && (q.b.len() >= bs || partial) {
			b := q.b
			q.b = nil
			q.sending++
			lc.wg.Add(1)
			go lc.send(q, b)
		}
	}
	if partial {
		lc.lastFlush = time.Now()
	}
}

// drain waits until every queued check is answered. A stop ends the
// checks in flight unanswered: then it returns errHalted, also once none
// is left in flight (the work they were is not done).
func (lc *layoutChecker) drain() error {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	for lc.inflight > 0 && !lc.r.stopping() {
		lc.flushLocked(true)
		lc.cond.Wait()
	}
	if lc.r.stopping() {
		return errHalted
	}
	return nil
}

// abort waits for the RPCs in flight (the run's context is cancelled):
// their files stay unfinished, so the checkpoint stays before them.
func (lc *layoutChecker) abort() {
	lc.r.cancel()
	lc.mu.Lock()
	lc.cond.Broadcast()
	lc.mu.Unlock()
	lc.wg.Wait()
}

func (lc *layoutChecker) send(q *ostQueue, b *batch) {
	defer lc.wg.Done()
	r := lc.r
	b.sortByOid()
	defer freeBatch(b)
	// Object ids go delta-encoded (mostly 1-byte varints).
	deltas := make([]uint64, len(b.oids))
	prev := uint64(0)
	for i, o := range b.oids {
		deltas[i], prev = o-prev, o
	}
	req := &pb.LfsckCheckRequest{Seq: r.ost, Oids: deltas, Digests: b.digests, Delta: true}
	cli := r.ostClient(q.idx)
	var rep *pb.LfsckCheckReply
	var err error
	if cli == nil {
		err = status.Errorf(codes.Unavailable, "OST%04x is not known or not up", q.idx)
	} else if err = fault.Hit("lfsck.layout.send"); err == nil {
		ctx, cancel := context.WithTimeout(r.ctx, r.env.RPCTimeout)
		rep, err = cli.Check(ctx, req)
		cancel()
	}
	complete := true
	switch {
	case err != nil && r.stopping():
		complete = false // stays unfinished: the checkpoint stays before it
	case err != nil:
		// A target that does not answer is skipped, not failed (LU-19329),
		// and its orphans are left alone at the end (incomplete).
		r.log.Warn("layout check: OST did not answer; its objects are skipped", "ost", q.idx, "objects", b.len(), "err", err)
		r.markIncomplete(q.idx)
		for _, it := range b.items {
			lc.bumpEnt(it.ent, Layout, tStat+sSkipped, 1)
		}
	default:
		for _, i := range rep.Missing {
			if int(i) < b.len() {
				it := b.item(q.idx, int(i))
				r.stripeMissing(&it)
			}
		}
		for j, i := range rep.Mismatched {
			if int(i) < b.len() && j < len(rep.Attrs) {
				it := b.item(q.idx, int(i))
				r.stripeMismatch(&it, rep.Attrs[j])
			}
		}
		if rep.Uninitialized > 0 {
			lc.bump(Layout, tStat+sUninitialized, rep.Uninitialized)
		}
	}
	lc.mu.Lock()
	q.sending--
	lc.inflight -= b.len()
	if complete {
		for _, it := range b.items {
			it.ent.remaining--
		}
		for len(lc.fifo) > 0 && lc.fifo[0].remaining == 0 {
			lc.fifo[0].done = true
			lc.fifo = lc.fifo[1:]
		}
		if lc.tail != nil && lc.tail.done {
			lc.tail = nil
		}
	}
	if !lc.r.stopping() {
		lc.flushLocked(lc.inflight < lc.window/2)
	}
	lc.cond.Broadcast()
	lc.mu.Unlock()
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

// freshSlot re-reads the file: it returns its record if slot still names
// the checked object (else the finding was a change in flight).
func (r *run) freshSlot(it *checkItem) (uint64, []byte, *pb.Inode, bool) {
	db := r.env.Target.DB()
	local, ino, err := r.lookup(db, it.ent.fid)
	if err != nil || ino.Layout == nil || int(it.slot) >= len(ino.Layout.Objects) {
		return 0, nil, nil, false
	}
	v, err := db.Get(mdt.ObjKey(local))
	if err != nil {
		return 0, nil, nil, false
	}
	s := ino.Layout.Objects[it.slot]
	if s.Ost != it.ost || s.Seq != it.seq || s.Oid != it.oid {
		return 0, nil, nil, false
	}
	return local, v, ino, true
}

// stripeMissing: a layout slot names an object the OST does not have.
func (r *run) stripeMissing(it *checkItem) {
	if r.st.Params.Orphan && r.st.Phase == 1 {
		if _, _, _, ok := r.freshSlot(it); ok {
			r.deferLost(it) // an orphan may claim the slot (lost.go)
		}
		return
	}
	r.danglingSlot(it, r.st.Params.CreateOstobj)
}

// danglingSlot reports a slot whose object is missing, or with create
// gives it a new, empty object.
func (r *run) danglingSlot(it *checkItem, create bool) {
	local, v, ino, ok := r.freshSlot(it)
	if !ok {
		return
	}
	r.found(Layout)
	key := stripeKey(it.ost, it.seq, it.oid)
	if !create {
		r.rep.add(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyDangling},
			Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(local), v)}, ReportKey: append([]byte{KLyDangling}, key...)})
		return
	}
	if r.dry {
		r.countDry(it.ent, Layout, KLyDangling)
		return
	}
	rec := expected(it.ent.fid, ino, it)
	done, err := r.ostRepair(it.ost, &pb.LfsckObjRepair{Seq: rec.Seq, Oid: rec.Oid, Create: true, Record: rec.Attr()})
	if err != nil {
		r.failed(Layout, 1, err)
		return
	}
	if done {
		r.rep.now(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyDangling}, RepairedElsewhere: true})
		r.rep.dataChanged(it.ent.fid) // the stripe reads as zeros now
	}
}

// stripeMismatch: the OST object's record differs from what the layout
// says. The MDT is trusted (owner, PFID), unless another file's layout
// names the object too (multiply referenced).
func (r *run) stripeMismatch(it *checkItem, a *pb.ObjectAttr) {
	local, v, ino, ok := r.freshSlot(it)
	if !ok {
		return
	}
	got := objrec.FromAttr(a)
	want := expected(it.ent.fid, ino, it)
	kind := uint32(KLyUnmatched)
	switch {
	case got.Parent == want.Parent:
		kind = sameParentKind(got, want)
	case r.otherReferences(got.Parent, it):
		kind = KLyMultiRef
	}
	r.found(Layout)
	if kind == KLyMultiRef {
		// The object belongs to the file its PFID names; this file gets a
		// new, empty object in the slot (Lustre's rule; no data copy).
		r.rep.add(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyMultiRef},
			Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(local), v)},
			Muts:  []*pb.LfsckMut{{M: &pb.LfsckMut_NewStripe{NewStripe: &pb.LfsckNewStripe{Fid: it.ent.fid.PB(), Index: it.slot, Ost: it.ost}}}}})
		r.rep.dataChanged(it.ent.fid)
		return
	}
	if r.dry {
		r.countDry(it.ent, Layout, kind)
		return
	}
	var buf [96]byte
	expect := objrec.Digest(got.Append(buf[:0]))
	done, err := r.ostRepair(it.ost, &pb.LfsckObjRepair{Seq: want.Seq, Oid: want.Oid, Expect: expect, Record: want.Attr()})
	if err != nil {
		r.failed(Layout, 1, err)
		return
	}
	if done {
		r.rep.now(Layout, it.ent, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{kind}, RepairedElsewhere: true})
		return
	}
	// A client wrote the object after its check: the next run looks again.
	r.lay.bumpEnt(it.ent, Layout, tStat+sChanged, 1)
	r.log.Info("layout repair refused by the OST: the object changed since its check", "fid", it.ent.fid, "ost", it.ost, "object", want.Oid, "kind", KindNames[Layout][kind])
}

// sameParentKind names what differs between an object's record and the
// one its slot wants, when both name the same file.
func sameParentKind(got, want objrec.Rec) uint32 {
	switch {
	case got.StripeIndex != want.StripeIndex:
		return KLyStripeIdx
	case got.UID != want.UID || got.GID != want.GID || got.ProjID != want.ProjID:
		return KLyOwner
	}
	return KLyOthers
}

// otherReferences reports whether file f exists and its layout names the
// object of it (then the object is referenced twice).
func (r *run) otherReferences(f fid.FID, it *checkItem) bool {
	if f.IsZero() || f == it.ent.fid {
		return false
	}
	_, ino, err := r.lookup(r.env.Target.DB(), f)
	if err != nil || ino.Layout == nil {
		return false
	}
	for _, s := range ino.Layout.Objects {
		if s.Ost == it.ost && s.Seq == it.seq && s.Oid == it.oid {
			return true
		}
	}
	return false
}

func (r *run) ostRepair(idx uint32, item *pb.LfsckObjRepair) (bool, error) {
	cli := r.env.OSTs()[idx]
	if cli == nil {
		return false, status.Errorf(codes.Unavailable, "OST%04x is not up", idx)
	}
	ctx, cancel := context.WithTimeout(r.ctx, r.env.RPCTimeout)
	defer cancel()
	rep, err := cli.Repair(ctx, &pb.LfsckObjRepairRequest{Items: []*pb.LfsckObjRepair{item}})
	if err != nil {
		return false, err
	}
	return len(rep.Done) == 1 && rep.Done[0], nil
}

func stripeKey(ostIdx uint32, seq, oid uint64) []byte {
	k := binary.BigEndian.AppendUint32(nil, ostIdx)
	k = binary.BigEndian.AppendUint64(k, seq)
	return binary.BigEndian.AppendUint64(k, oid)
}

// countDry counts a finding of a dry run.
func (r *run) countDry(e *entry, comp, kind uint32) {
	if r.st.Phase == 2 {
		r.mu.Lock()
		r.t2[comp][tFound+int(kind)]++
		r.mu.Unlock()
		return
	}
	r.lay.bumpEnt(e, comp, tFound+int(kind), 1)
}

// resolveDups settles OST objects that two layouts name and whose record
// has no PFID (never written), which the OST checks cannot see: the file
// with the lowest local key keeps the object, the others get new ones.
// Objects with a PFID were settled by the checks (multiply referenced).
func (r *run) resolveDups() error {
	if len(r.dups) == 0 {
		return nil
	}
	db := r.env.Target.DB()
	snap := db.NewSnapshot()
	defer snap.Close()
	type ref struct {
		local uint64
		f     fid.FID
		slot  uint32
		v     []byte
	}
	holders := map[stripe][]ref{}
	it, err := snap.NewIter(mdt.ObjLower, objUpper)
	if err != nil {
		return err
	}
	var o object
	for it.First(); it.Valid(); it.Next() {
		local, ok := mdt.ObjLocal(it.Key())
		if !ok || o.decode(it.Value()) != nil || !o.hasLayout || r.losers[local] {
			continue
		}
		for i, s := range o.layout.objs {
			if r.dups[s] {
				holders[s] = append(holders[s], ref{local, o.fid, uint32(i), append([]byte(nil), it.Value()...)})
			}
		}
	}
	err = it.Error()
	it.Close()
	if err != nil {
		return err
	}
	var keys []stripe
	for s := range holders {
		keys = append(keys, s)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ost != keys[j].ost {
			return keys[i].ost < keys[j].ost
		}
		return keys[i].oid < keys[j].oid
	})
	for _, s := range keys {
		hs := holders[s]
		if len(hs) < 2 {
			continue
		}
		a, ok, err := r.askOST(s)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		if a != nil && a.Parent != nil && !fid.FromPB(a.Parent).IsZero() {
			continue // the checks settled it
		}
		for _, h := range hs[1:] {
			r.found(Layout)
			r.rep.add(Layout, nil, &pb.LfsckRepair{Component: Layout, Kinds: []uint32{KLyMultiRef},
				Conds: []*pb.LfsckCond{condVal(mdt.ObjKey(h.local), h.v)},
				Muts:  []*pb.LfsckMut{{M: &pb.LfsckMut_NewStripe{NewStripe: &pb.LfsckNewStripe{Fid: h.f.PB(), Index: h.slot, Ost: s.ost}}}}})
			r.rep.dataChanged(h.f)
		}
	}
	return r.rep.flush()
}

// lookup finds an object by FID in r (through the dry run's OI
// corrections first): its local key and record.
func (r *run) lookup(rd interface {
	Get([]byte) ([]byte, error)
}, f fid.FID) (uint64, *pb.Inode, error) {
	local, ok := r.overlayLocal(f)
	if !ok {
		lv, err := rd.Get(mdt.OIKey(f))
		if err != nil {
			return 0, nil, errNoObject
		}
		if len(lv) != 8 {
			return 0, nil, errBadOI
		}
		local = binary.BigEndian.Uint64(lv)
	}
	v, err := rd.Get(mdt.ObjKey(local))
	if err != nil {
		return 0, nil, errNoObject
	}
	ino, err := decodeInode(v)
	if err != nil {
		return 0, nil, err
	}
	if fid.FromPB(ino.Fid) != f {
		return 0, nil, errBadOI
	}
	return local, ino, nil
}

var (
	errNoObject = errors.New("no such object")
	errBadOI    = errors.New("the OI entry is wrong (run the OI scrub)")
)

func (r *run) overlayLocal(f fid.FID) (uint64, bool) {
	r.omu.Lock()
	defer r.omu.Unlock()
	l, ok := r.overlay[f]
	return l, ok
}

func decodeInode(v []byte) (*pb.Inode, error) {
	ino := &pb.Inode{}
	if err := proto.Unmarshal(v, ino); err != nil {
		return nil, syscall.EIO
	}
	return ino, nil
}

// ostClient returns OST idx's client, from a map refreshed every second
// (asking the server for it on every batch costs more than the batch).
func (r *run) ostClient(idx uint32) OST {
	r.ostMu.Lock()
	defer r.ostMu.Unlock()
	if r.ostMap == nil || time.Since(r.ostAt) > time.Second {
		r.ostMap, r.ostAt = r.env.OSTs(), time.Now()
	}
	return r.ostMap[idx]
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
