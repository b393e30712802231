package lfsck

import (
	"context"
	"encoding/binary"
	"math/bits"
	"sync"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
)

// Range summaries: how the layout check avoids a message per stripe.
//
// A check per stripe, even batched (queue.go), costs the MDT an encoding
// and a queued digest per stripe and each OST a lookup per object, so the
// check's time grows with the number of OSTs. Instead the scan only
// records, for every stripe of its own sequence, the digest of the record
// its OST object should hold (objrec.SumDigest), with the file, in a
// dense table per OST indexed by object id. Meanwhile every OST
// summarises its objects (one ordered iteration each, from the start of
// phase 1, in parallel with the scan): which ids exist, which are
// uninitialized (no PFID yet: they match any expectation), and per block
// of 1024 ids the sum of the digests of the other records. When the scan
// is done (verify), the MDT adds up its own digests of the named objects
// that the OST says are initialized, block by block. Equal sums settle a
// block; a block whose sums differ, a named object the OST does not have,
// an object named twice, and the stripes of an OST that gave no summary
// are checked object by object, by the queue of queue.go, which re-reads
// the file before it counts anything (a change in flight is never
// repaired). So the MDT's work per stripe is a digest, two stores and a
// bit, and the OSTs' is one step of an iteration.
//
// Memory: 12 bytes per recorded stripe (pages of 65536 ids allocated as
// the ids appear), at most maxExpectBytes, and 8 per file: the table
// names a file by its place in a list of the run's files, 4 bytes
// instead of a local key and a slot. Stripes beyond it are queued object
// by object. The check of a stripe the summaries do not settle finds its
// slot in the file's layout (lookupCheck). Checkpoints: the table is
// rebuilt by the fast pass that already rebuilds the name pairs and the
// reference bitmap from the part of the scan before the checkpoint; the
// figures of verify are held back from checkpoints until it is done
// (ledger.freeze), so a stop during it makes the resumed run verify
// everything again and count it once.

const (
	sumSpan  = 1 << 16 // object ids per summary request and per table page
	sumBlock = 1 << 10 // object ids per sum
)

// maxExpectBytes bounds the table of expectations (about 89 million
// stripes); Tuning.NoSummaries turns the summaries off (every stripe is
// checked object by object).
const maxExpectBytes = 1 << 30

type expPage struct {
	dig  [sumSpan]uint64 // objrec.SumDigest of the expected record
	file [sumSpan]uint32 // the file naming it, by its place in expectations.files
	// has is bit i: id i has an expectation (dig[i] and file[i] are
	// valid), so that verify compares 64 ids with the summary's bitmaps
	// at once.
	has [sumSpan / 64]uint64
}

const expPageBytes = sumSpan*12 + sumSpan/8

// expects reports whether id i of the page has an expectation.
func (p *expPage) expects(i uint64) bool { return p.has[i/64]&(1<<(i%64)) != 0 }

// set records the expectation of id i.
func (p *expPage) set(i, dig uint64, file uint32) {
	p.dig[i], p.file[i] = dig, file
	p.has[i/64] |= 1 << (i % 64)
}

// setNew records the expectation of id i unless it has one already
// (false: named twice).
func (p *expPage) setNew(i, dig uint64, file uint32) bool {
	i %= sumSpan
	m := uint64(1) << (i % 64)
	if p.has[i/64]&m != 0 {
		return false
	}
	p.has[i/64] |= m
	p.dig[i], p.file[i] = dig, file
	return true
}

// maxTablePages bounds the table's pages per OST: ids from 2^32 on are
// checked object by object.
const maxTablePages = 1 << 16

// ostSums is one OST's summary pages, filled by its fetcher.
type ostSums struct {
	pages map[uint64]*pb.LfsckSummaryReply // by id/sumSpan
	done  bool                             // every page up to the last object is here
	err   error
}

type expectations struct {
	ly    *layoutCheck
	pages [][]*expPage // by OST index, then id/sumSpan
	n     int          // pages allocated
	max   int
	dup   map[uint32]map[uint64]bool // ids named twice: checked object by object
	// files are the local keys of the files the table names (expPage.file),
	// in the order the scan recorded them.
	files []uint64

	mu     sync.Mutex
	sums   map[uint32]*ostSums
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

// newExpectations returns the table of a run, or nil when summaries are
// off.
func newExpectations(ly *layoutCheck) *expectations {
	if ly.r.env.Tuning.NoSummaries {
		return nil
	}
	return &expectations{ly: ly, max: maxExpectBytes / expPageBytes,
		dup: map[uint32]map[uint64]bool{}, sums: map[uint32]*ostSums{}}
}

// page is OST ost's page of the table holding oid, nil if not allocated
// yet: small enough to be inlined into the scan's loop over stripes,
// which records into an existing page itself (expPage.setNew) and calls
// record for the rest.
func (e *expectations) page(ost uint32, oid uint64) *expPage {
	if int(ost) < len(e.pages) {
		if ps, pi := e.pages[ost], oid/sumSpan; pi < uint64(len(ps)) {
			return ps[pi]
		}
	}
	return nil
}

// fileOf is the number the table names the file at local by, added to
// files unless it is the last one there (the scan records a file's
// stripes together); false: no room.
func (e *expectations) fileOf(local uint64) (uint32, bool) {
	if n := len(e.files); n > 0 && e.files[n-1] == local {
		return uint32(n - 1), true
	}
	if uint64(len(e.files)) >= maxTableFiles {
		return 0, false
	}
	e.files = append(e.files, local)
	return uint32(len(e.files) - 1), true
}

// maxTableFiles bounds files (the numbers are 32 bits).
const maxTableFiles = 1<<32 - 1

// record notes that a stripe of file (fileOf) expects from object oid of
// OST ost the record of digest dig; false means it has no room (queue the
// stripe instead).
func (e *expectations) record(ost uint32, oid, dig uint64, file uint32) bool {
	pi := oid / sumSpan
	if ost >= 1<<16 || pi >= maxTablePages { // ids beyond 2^32: not worth a table
		return false
	}
	for int(ost) >= len(e.pages) {
		e.pages = append(e.pages, nil)
	}
	ps := e.pages[ost]
	if pi >= uint64(len(ps)) {
		ps = append(ps, make([]*expPage, pi+1-uint64(len(ps)))...)
		e.pages[ost] = ps
	}
	p := ps[pi]
	if p == nil {
		if e.n >= e.max {
			return false
		}
		p = new(expPage)
		ps[pi] = p
		e.n++
	}
	i := oid % sumSpan
	if p.expects(i) {
		// Named twice: both holders are checked object by object (the
		// scan queues the second one itself).
		e.markDup(ost, oid)
		return false
	}
	p.set(i, dig, file)
	return true
}

func (e *expectations) markDup(ost uint32, oid uint64) {
	m := e.dup[ost]
	if m == nil {
		m = map[uint64]bool{}
		e.dup[ost] = m
	}
	m[oid] = true
}

// fetch starts one goroutine per OST that asks it for summaries of every
// page of our sequence, in order, until it says there are no more objects.
func (e *expectations) fetch() {
	ctx, cancel := context.WithCancel(e.ly.r.ctx)
	e.cancel = cancel
	for idx, cli := range e.ly.r.env.OSTs() {
		s := &ostSums{pages: map[uint64]*pb.LfsckSummaryReply{}}
		e.mu.Lock()
		e.sums[idx] = s
		e.mu.Unlock()
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			for pi := uint64(0); ; {
				rep, err := (*pb.LfsckSummaryReply)(nil), fault.Hit("lfsck.layout.summary")
				if err == nil {
					rctx, rcancel := context.WithTimeout(ctx, e.ly.r.env.RPCTimeout)
					rep, err = cli.Summary(rctx, &pb.LfsckSummaryRequest{Seq: e.ly.r.seq, From: pi * sumSpan, Span: sumSpan, Block: sumBlock})
					rcancel()
				}
				e.mu.Lock()
				if err != nil {
					s.err = err
					e.mu.Unlock()
					return
				}
				if len(rep.Sums) != sumSpan/sumBlock || len(rep.Exists) != sumSpan/8 || len(rep.Uninitialized) != sumSpan/8 {
					s.err = errBadSummary
					e.mu.Unlock()
					return
				}
				s.pages[pi] = rep
				// Pages without objects are skipped (a page left out
				// reads as empty once done), and ids from 2^32 on are
				// never in the table (record): one object at a huge id
				// (garbage, or made by -c for a corrupt slot) once had
				// this loop fetch 2^30 pages.
				next := max(pi+1, rep.Next/sumSpan)
				if rep.Done || next >= maxTablePages {
					s.done = true
				}
				done := s.done
				e.mu.Unlock()
				if done {
					return
				}
				pi = next
			}
		}()
	}
}

type summaryError string

func (e summaryError) Error() string { return string(e) }

const errBadSummary = summaryError("OST summary of the wrong shape")

// stop cancels the fetchers and waits for them.
func (e *expectations) stop() {
	if e.cancel != nil {
		e.cancel()
	}
	e.wg.Wait()
}

func bit(b []byte, i uint64) bool { return b[i/8]&(1<<(i%8)) != 0 }

// verify compares the table with the OSTs' summaries, once the scan and
// its queued checks are done, and checks object by object what they do
// not settle (see the top of this file).
func (e *expectations) verify() error {
	r, q := e.ly.r, e.ly.q
	e.wg.Wait()
	if r.stopping() {
		return errHalted
	}
	// Thawed by the caller once verify is done: a stop during it keeps the
	// figures and position of the end of the scan in every checkpoint.
	r.led.freeze()
	if err := fault.Hit("lfsck.layout.verify"); err != nil {
		return err
	}
	var uninit uint64
	var suspects []checkItem
	for i := range e.pages {
		idx := uint32(i)
		if len(e.pages[idx]) == 0 {
			continue
		}
		e.mu.Lock()
		s := e.sums[idx]
		e.mu.Unlock()
		whole := s == nil || s.err != nil
		if whole && s != nil {
			r.log.Warn("layout check: OST gave no summary; its objects are checked one by one", "ost", idx, "err", s.err)
		}
		dups := e.dup[idx]
		for pi, p := range e.pages[idx] {
			if p == nil {
				continue
			}
			var sum *pb.LfsckSummaryReply
			if !whole {
				sum = s.pages[uint64(pi)]
				if sum == nil && !s.done {
					whole = true // cannot happen once fetched to the end
				}
			}
			var n uint64
			suspects, n = e.verifyPage(idx, uint64(pi), p, sum, whole, dups, suspects)
			uninit += n
			if len(suspects) >= 4096 {
				if err := q.queue(suspects); err != nil {
					return err
				}
				suspects = suspects[:0]
			}
		}
	}
	if err := q.queue(suspects); err != nil {
		return err
	}
	if uninit > 0 {
		r.led.add(Layout, tStat+sUninitialized, uninit)
	}
	return q.drain()
}

// verifyPage compares page pi of OST idx's table with the OST's summary
// of it (nil: none) and appends the stripes to check object by object:
// every one with whole or named twice, those whose object is missing, and
// the written ones of a block whose sum differs. It returns the count of
// objects never written (they match, see CheckObjects).
func (e *expectations) verifyPage(idx uint32, pi uint64, p *expPage, sum *pb.LfsckSummaryReply, whole bool,
	dups map[uint64]bool, suspects []checkItem) ([]checkItem, uint64) {
	base := pi * sumSpan
	if whole || sum == nil || dups != nil {
		return e.verifyPageByID(idx, base, p, sum, whole, dups, suspects)
	}
	// 64 ids at a time: the table's bits against the summary's (both
	// LSB first), summing the digests of the written objects only:
	// cheaper than a look at each id (verifyPageByID; BenchmarkVerifyPage).
	const words = sumBlock / 64
	var uninit uint64
	for b := uint64(0); b < sumSpan/sumBlock; b++ {
		var got uint64
		for w := b * words; w < (b+1)*words; w++ {
			has := p.has[w]
			if has == 0 {
				continue
			}
			exists := binary.LittleEndian.Uint64(sum.Exists[w*8:])
			un := binary.LittleEndian.Uint64(sum.Uninitialized[w*8:])
			for m := has &^ exists; m != 0; m &= m - 1 {
				i := w*64 + uint64(bits.TrailingZeros64(m))
				suspects = append(suspects, e.item(idx, base+i, p, i))
			}
			uninit += uint64(bits.OnesCount64(has & exists & un))
			for m := has & exists &^ un; m != 0; m &= m - 1 {
				got += p.dig[w*64+uint64(bits.TrailingZeros64(m))]
			}
		}
		if got == sum.Sums[b] {
			continue
		}
		// A record differs: the block's written objects are checked one
		// by one (an object the OST has and the table does not is an
		// orphan, found by phase 2).
		for w := b * words; w < (b+1)*words; w++ {
			wr := p.has[w] & binary.LittleEndian.Uint64(sum.Exists[w*8:]) &^ binary.LittleEndian.Uint64(sum.Uninitialized[w*8:])
			for m := wr; m != 0; m &= m - 1 {
				i := w*64 + uint64(bits.TrailingZeros64(m))
				suspects = append(suspects, e.item(idx, base+i, p, i))
			}
		}
	}
	return suspects, uninit
}

// verifyPageByID is verifyPage one id at a time, for the pages that are
// checked whole, have no summary or hold ids named twice.
func (e *expectations) verifyPageByID(idx uint32, base uint64, p *expPage, sum *pb.LfsckSummaryReply, whole bool,
	dups map[uint64]bool, suspects []checkItem) ([]checkItem, uint64) {
	var uninit uint64
	cands := make([]uint64, 0, sumBlock)
	for b := uint64(0); b < sumSpan/sumBlock; b++ {
		var got uint64
		cands = cands[:0]
		for i := b * sumBlock; i < (b+1)*sumBlock; i++ {
			if !p.expects(i) {
				continue
			}
			oid := base + i
			switch {
			case whole || dups[oid]:
				suspects = append(suspects, e.item(idx, oid, p, i))
			case sum == nil || !bit(sum.Exists, i):
				suspects = append(suspects, e.item(idx, oid, p, i))
			case bit(sum.Uninitialized, i):
				uninit++
			default:
				got += p.dig[i]
				cands = append(cands, i)
			}
		}
		if len(cands) == 0 && (sum == nil || sum.Sums[b] == 0) {
			continue
		}
		if sum == nil || got != sum.Sums[b] {
			for _, i := range cands {
				suspects = append(suspects, e.item(idx, base+i, p, i))
			}
		}
	}
	return suspects, uninit
}

// item is the object-by-object check of one recorded stripe, without its
// file's FID, its slot and its record's digest, which queue reads
// (lookupCheck).
func (e *expectations) item(ost uint32, oid uint64, p *expPage, i uint64) checkItem {
	return checkItem{ost: ost, seq: e.ly.r.seq, oid: oid, slot: slotUnknown, ent: &entry{local: e.files[p.file[i]], remaining: 1}}
}

// slotUnknown is the slot of a check queued by verify (the table keeps
// none): lookupCheck finds it in the file's layout.
const slotUnknown = ^uint32(0)

// lookupCheck completes a check queued by verify from the file as it is
// now: its FID, the slot naming the object (the first one: a file naming
// an object twice was queued by the scan for the second), and the digest
// of the record the object should hold. ok is false when the file is gone
// or no longer names the object (a change in flight, nothing to check).
func (ly *layoutCheck) lookupCheck(it *checkItem) bool {
	v, err := ly.r.env.Target.DB().Get(mdt.ObjKey(it.ent.local))
	if err != nil {
		return false
	}
	ino, err := decodeInode(v)
	if err != nil || ino.Fid == nil || ino.Layout == nil {
		return false
	}
	for i, s := range ino.Layout.Objects {
		if s.Ost == it.ost && s.Seq == it.seq && s.Oid == it.oid {
			it.slot = uint32(i)
			it.ent.fid = fid.FromPB(ino.Fid)
			rec := expected(it.ent.fid, ino, it)
			it.digest = objrec.RecordDigest(&rec)
			return true
		}
	}
	return false
}
