package lfsck

import (
	"sync"
	"sync/atomic"

	"nacre/internal/fid"
)

// A run's figures, and the position phase 1 checkpoints at.
//
// A checkpoint records a position in the scan and the figures of every
// component for the objects before it, so that a resumed run counts each
// object once. Checkpoints must not pass work in flight: the layout check
// sends its checks to the OSTs while the scan goes on (queue.go), and a
// file whose checks are unanswered is not done. Every such file is an
// entry of a FIFO in scan order; the checkpoint position is the first
// entry not finished, and the figures of everything from that entry on,
// in every component, are held back (they are counted again when the
// scan resumes). The ledger keeps the figures and the FIFO under one
// lock, so that a checkpoint takes a position and the figures exact at it
// together.

// tally holds a run's figures per component: checked, failed, kinds found
// and repaired (dry runs; real runs count at apply), and statistics.
// Arrays add and subtract cheaply, which exact checkpoints need.
type tally [4][48]uint64

const (
	tChecked  = 0
	tFailed   = 1
	tFound    = 2  // + kind
	tRepaired = 18 // + kind
	tStat     = 34 // + stat
)

// Statistics (not inconsistencies).
const (
	sDirectories = iota
	sMultiLinked
	sFiles
	sStripes
	sUninitialized
	sSkipped
	sDirents
	sObjects
	sRebuilt
	sChanged // repairs an OST refused: the object changed since its check
	sRemote  // entries that lead to another MDT (paired by the check across MDTs)
	nStats
)

var statNames = []string{"directories", "multiple_linked_checked", "files", "stripes", "uninitialized_objects",
	"skipped", "dirents", "objects", "rebuild_scanned", "changed_before_repair", "remote_dirents"}

func (t *tally) add(o *tally) {
	for c := range t {
		for i := range t[c] {
			t[c][i] += o[c][i]
		}
	}
}

func (t *tally) sub(o *tally) {
	for c := range t {
		for i := range t[c] {
			t[c][i] -= o[c][i]
		}
	}
}

// ledger is the scan's position and the run's figures: phase 1's, exact
// at the checkpoint position, and phase 2's.
type ledger struct {
	at atomic.Uint64 // the object being scanned (reports, first failure)

	mu      sync.Mutex
	t1      tally // phase 1, live
	t2      tally // phase 2
	scanPos uint64
	fifo    []*entry   // files with work in flight, in scan order
	tail    *entry     // the last of them, until it is done
	cur     objFigures // the object being scanned (its own figures)
	inObj   bool
	// frozen: while the layout check verifies the OSTs' summaries after
	// the scan (summary.go), checkpoints keep the position and figures
	// of the end of the scan.
	frozen    *tally
	frozenPos uint64
}

// entry is a file with work in flight: its figures are held back until
// the work is done and every entry before it too.
type entry struct {
	local     uint64
	fid       fid.FID
	remaining int
	done      bool // popped from the FIFO
	delta     figs
}

// begin starts the figures of the object at local: until end, they are
// its own (held back with its work if it has any in flight).
func (l *ledger) begin(local uint64) {
	l.at.Store(local)
	l.mu.Lock()
	l.cur.local, l.cur.figs, l.inObj = local, figs{}, true
	l.mu.Unlock()
}

// end closes the object's figures: with no work in flight they go with
// the last file that has some (they are after it in scan order).
func (l *ledger) end() {
	l.mu.Lock()
	if l.inObj && l.tail != nil && !l.tail.done {
		l.tail.delta.addFigs(&l.cur.figs)
	}
	l.inObj = false
	l.mu.Unlock()
}

// advance records the scan position (the next local key to scan).
func (l *ledger) advance(pos uint64) {
	l.mu.Lock()
	l.scanPos = pos
	l.mu.Unlock()
}

// add adds to a phase-1 figure of the object being scanned.
func (l *ledger) add(comp uint32, slot int, n uint64) {
	l.mu.Lock()
	l.addLocked(comp, slot, n)
	l.mu.Unlock()
}

func (l *ledger) addLocked(comp uint32, slot int, n uint64) {
	l.t1[comp][slot] += n
	switch {
	case l.inObj:
		l.cur.add(comp, slot, n)
	case l.tail != nil && !l.tail.done:
		l.tail.delta.add(comp, slot, n)
	}
}

// addTo adds to a phase-1 figure of the work of file e (nil: of the
// object being scanned).
func (l *ledger) addTo(e *entry, comp uint32, slot int, n uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e == nil {
		l.addLocked(comp, slot, n)
		return
	}
	l.t1[comp][slot] += n
	if !e.done {
		e.delta.add(comp, slot, n)
	}
}

// add2 adds to a phase-2 figure.
func (l *ledger) add2(comp uint32, slot int, n uint64) {
	l.mu.Lock()
	l.t2[comp][slot] += n
	l.mu.Unlock()
}

// fail counts a failure of comp in phase (1 or 2). Failures are not held
// back with the work they belong to: they count when they happen.
func (l *ledger) fail(phase int, comp uint32) {
	l.mu.Lock()
	if phase == 1 {
		l.t1[comp][tFailed]++
	} else {
		l.t2[comp][tFailed]++
	}
	l.mu.Unlock()
}

// get is a phase's figure (phase 1 or 2).
func (l *ledger) get(phase int, comp uint32, slot int) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if phase == 1 {
		return l.t1[comp][slot]
	}
	return l.t2[comp][slot]
}

// open makes the object being scanned (at local, file f) a file with n
// items of work in flight: its figures so far go with it.
func (l *ledger) open(local uint64, f fid.FID, n int) *entry {
	e := &entry{local: local, fid: f, remaining: n}
	l.mu.Lock()
	if l.inObj && l.cur.local == local {
		e.delta = l.cur.figs
		l.inObj = false
	}
	l.fifo = append(l.fifo, e)
	l.tail = e
	l.mu.Unlock()
	return e
}

// push queues e, an entry of its own (one item of work, after the scan).
func (l *ledger) push(e *entry) {
	l.mu.Lock()
	l.fifo = append(l.fifo, e)
	l.tail = e
	l.mu.Unlock()
}

// finish notes that an item of work of each of es is done.
func (l *ledger) finish(es []*entry) {
	l.mu.Lock()
	for _, e := range es {
		e.remaining--
	}
	for len(l.fifo) > 0 && l.fifo[0].remaining == 0 {
		l.fifo[0].done = true
		l.fifo = l.fifo[1:]
	}
	if l.tail != nil && l.tail.done {
		l.tail = nil
	}
	l.mu.Unlock()
}

// checkpoint returns the checkpoint position and phase-1 figures.
func (l *ledger) checkpoint() (uint64, tally) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.frozen != nil {
		return l.frozenPos, *l.frozen
	}
	t := l.t1
	pos := l.scanPos
	if len(l.fifo) > 0 {
		pos = l.fifo[0].local
		for _, e := range l.fifo {
			e.delta.outOf(&t)
		}
	}
	return pos, t
}

// figures returns both phases' live figures.
func (l *ledger) figures() (t1, t2 tally) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t1, l.t2
}

// freeze holds the figures and the position back from checkpoints until
// thaw; the work in flight is done.
func (l *ledger) freeze() {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.t1
	l.frozen, l.frozenPos = &t, l.scanPos
}

func (l *ledger) thaw() {
	l.mu.Lock()
	l.frozen = nil
	l.mu.Unlock()
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
