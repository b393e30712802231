package lfsck

import (
	"context"
	"sort"
	"sync"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
)

// The layout check's object-by-object checks. A check per slot goes on
// its OST's queue; a queue goes out as one RPC of up to 8192 objects,
// sorted by object id, carrying only a digest of the record each object
// should hold (objrec), so an OST answers with one ordered iteration and
// sends back only what differs. At most `window` checks are in flight
// (Lustre's async window): the scan waits when the window is full, until
// half of it has drained. Two RPCs per OST at most are in flight. Every
// file with checks in flight is an entry of the ledger (ledger.go), so
// that checkpoints stay before it.

type checkItem struct {
	ost    uint32
	slot   uint32
	seq    uint64
	oid    uint64
	digest uint64
	ent    *entry
}

// checkQueue is the checks queued and in flight.
type checkQueue struct {
	ly *layoutCheck

	mu        sync.Mutex
	cond      *sync.Cond
	window    int
	inflight  int
	queues    map[uint32]*ostQueue
	order     []*ostQueue // the queues, for the flush after every file
	lastFlush time.Time
	ticks     uint64 // calls of tick, to read the clock on some only
	wg        sync.WaitGroup
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

// entries are the entries of the batch's checks.
func (b *batch) entries() []*entry {
	out := make([]*entry, len(b.items))
	for i, it := range b.items {
		out[i] = it.ent
	}
	return out
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

func newCheckQueue(ly *layoutCheck, window int) *checkQueue {
	if window <= 0 {
		window = defaultWindow
	}
	q := &checkQueue{ly: ly, window: window, queues: map[uint32]*ostQueue{}}
	q.cond = sync.NewCond(&q.mu)
	return q
}

func (q *checkQueue) setWindow(w int) {
	q.mu.Lock()
	q.window = w
	q.cond.Broadcast()
	q.mu.Unlock()
}

// tick is called after every object of the scan: queues partly filled
// go out every 100 ms.
func (q *checkQueue) tick() {
	q.mu.Lock()
	// The clock is read every 64 objects: once per object it was 3.5 % of
	// a namespace run's CPU.
	q.ticks++
	if q.ticks%64 == 0 && time.Since(q.lastFlush) > 100*time.Millisecond {
		q.flushLocked(true)
	}
	q.mu.Unlock()
}

// flush sends every queue, full or not.
func (q *checkQueue) flush() {
	q.mu.Lock()
	q.flushLocked(true)
	q.mu.Unlock()
}

func (q *checkQueue) batchSize() int {
	n := len(q.queues)
	if n == 0 {
		n = 1
	}
	b := q.window / (2 * n)
	return max(1, min(8192, b))
}

// add queues the checks of file f at local, the object being scanned.
func (q *checkQueue) add(local uint64, f fid.FID, checks []checkItem) {
	led := &q.ly.r.led
	e := led.open(local, f, len(checks))
	// A file's stripes count as checked when queued: until the file pops
	// from the FIFO its figures are held back from checkpoints anyway.
	n := uint64(len(checks))
	led.addTo(e, Layout, tChecked, n)
	led.addTo(e, Layout, tStat+sStripes, n)
	for i := range checks {
		checks[i].ent = e
	}
	q.mu.Lock()
	q.enqueueLocked(checks)
	q.mu.Unlock()
}

// queue queues checks that summaries did not settle (summary.go): their
// stripes were counted when the scan recorded them. Each has an entry of
// its own; one whose file is gone is dropped.
func (q *checkQueue) queue(checks []checkItem) error {
	ly := q.ly
	for i := range checks {
		it := checks[i : i+1]
		if !ly.lookupCheck(&it[0]) {
			continue
		}
		ly.r.led.push(it[0].ent)
		q.mu.Lock()
		q.enqueueLocked(it)
		q.mu.Unlock()
		if ly.r.stopping() {
			return errHalted
		}
	}
	return nil
}

// enqueueLocked puts checks on their OSTs' queues, sends full queues, and
// waits while the window is full.
func (q *checkQueue) enqueueLocked(checks []checkItem) {
	bs := q.batchSize()
	for _, it := range checks {
		oq := q.queues[it.ost]
		if oq == nil {
			oq = &ostQueue{idx: it.ost}
			q.queues[it.ost] = oq
			q.order = append(q.order, oq)
		}
		if oq.b == nil {
			oq.b = newBatch(bs)
		}
		oq.b.oids = append(oq.b.oids, it.oid)
		oq.b.digests = append(oq.b.digests, it.digest)
		oq.b.items = append(oq.b.items, itemRef{ent: it.ent, slot: it.slot, seq: it.seq})
	}
	q.inflight += len(checks)
	q.flushLocked(false)
	if q.inflight >= q.window {
		q.flushLocked(true)
		for q.inflight > q.window/2 && !q.ly.r.stopping() {
			q.cond.Wait()
			q.flushLocked(true)
		}
	}
}

// flushLocked sends full queues (all non-empty ones with partial).
func (q *checkQueue) flushLocked(partial bool) {
	bs := q.batchSize()
	for _, oq := range q.order {
		if oq.b != nil && oq.b.len() > 0 && oq.sending < 2 && (oq.b.len() >= bs || partial) {
			b := oq.b
			oq.b = nil
			oq.sending++
			q.wg.Add(1)
			go q.send(oq, b)
		}
	}
	if partial {
		q.lastFlush = time.Now()
	}
}

// drain waits until every queued check is answered. A stop ends the
// checks in flight unanswered: then it returns errHalted, also once none
// is left in flight (the work they were is not done).
func (q *checkQueue) drain() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	for q.inflight > 0 && !q.ly.r.stopping() {
		q.flushLocked(true)
		q.cond.Wait()
	}
	if q.ly.r.stopping() {
		return errHalted
	}
	return nil
}

// wait waits for the RPCs in flight (the run's context is cancelled:
// their files stay unfinished, so the checkpoint stays before them).
func (q *checkQueue) wait() {
	q.mu.Lock()
	q.cond.Broadcast()
	q.mu.Unlock()
	q.wg.Wait()
}

func (q *checkQueue) send(oq *ostQueue, b *batch) {
	defer q.wg.Done()
	ly := q.ly
	r := ly.r
	b.sortByOid()
	defer freeBatch(b)
	// Object ids go delta-encoded (mostly 1-byte varints).
	deltas := make([]uint64, len(b.oids))
	prev := uint64(0)
	for i, o := range b.oids {
		deltas[i], prev = o-prev, o
	}
	req := &pb.LfsckCheckRequest{Seq: r.seq, Oids: deltas, Digests: b.digests, Delta: true}
	cli := r.ostClient(oq.idx)
	var rep *pb.LfsckCheckReply
	var err error
	if cli == nil {
		err = errno.Errorf(errno.Unavailable, "OST%04x is not known or not up", oq.idx)
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
		r.log.Warn("layout check: OST did not answer; its objects are skipped", "ost", oq.idx, "objects", b.len(), "err", err)
		r.markIncomplete(oq.idx)
		for _, it := range b.items {
			r.led.addTo(it.ent, Layout, tStat+sSkipped, 1)
		}
	default:
		for _, i := range rep.Missing {
			if int(i) < b.len() {
				it := b.item(oq.idx, int(i))
				ly.stripeMissing(&it)
			}
		}
		for j, i := range rep.Mismatched {
			if int(i) < b.len() && j < len(rep.Attrs) {
				it := b.item(oq.idx, int(i))
				ly.stripeMismatch(&it, rep.Attrs[j])
			}
		}
		if rep.Uninitialized > 0 {
			r.led.add(Layout, tStat+sUninitialized, rep.Uninitialized)
		}
	}
	if complete {
		// Done in the ledger before the window sees it: once drain sees
		// nothing in flight, no file is left in the FIFO.
		r.led.finish(b.entries())
	}
	q.mu.Lock()
	oq.sending--
	q.inflight -= b.len()
	if !r.stopping() {
		q.flushLocked(q.inflight < q.window/2)
	}
	q.cond.Broadcast()
	q.mu.Unlock()
}
