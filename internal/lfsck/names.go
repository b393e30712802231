package lfsck

import (
	"hash/maphash"

	"nacre/internal/fid"
)

// nameMatch pairs directory entries with linkEA entries: an entry adds
// +1 under the hash of (parent, name, child, type), a linkEA entry -1; what
// is left at the end is uncertain and goes to the trace. Each pending hash
// keeps the local key of the object it came from, so phase 2 can find the
// name again.
//
// Matching in one table slowed the scan as the tree grew (-27 % from 0.1M
// to 2M files, docs/benchmarks.md): a PopD tree's directories come first
// in key order, so nearly every pair waits for its other half, the table
// outgrows the CPU caches and each name costs two cache misses. Instead
// the pairs are appended, in order, to one of 256 partitions by hash and
// folded a partition at a time, through one scratch table small enough to
// stay in cache; what a partition leaves pending is kept as a short list
// until the next fold. Order within a hash is kept, so the result is the
// same as folding one at a time. Buffers are fixed-size chunks, reused
// after a fold: growing slices and one table per partition had allocated
// 587 MB per run at 2 million files.
type nameMatch struct {
	parts    [nameParts]namePart
	buffered int
	foldAt   int
	left     int // pairs left pending by the last fold
	folds    int
	scratch  pendTable
	free     [][]nameOp
	seed     maphash.Seed
	buf      []byte
}

const (
	namePartShift = 56
	nameParts     = 1 << (64 - namePartShift)
	// nameFoldAt is the fewest buffered pairs (16 bytes each: 64 MiB) that
	// make a fold before the end of the scan; a fold also waits until
	// there are at least as many as it must re-read pending, so that a
	// huge tree with most pairs pending costs no more than twice the
	// appends (not one re-read of everything pending per 4 million).
	nameFoldAt = 1 << 22
	nameChunk  = 2048 // pairs per buffer chunk (32 KiB)
)

// namePart is one partition: the chunks of pairs not yet folded (the last
// one being filled) and the pairs left pending by the folds so far.
type namePart struct {
	chunks [][]nameOp
	left   []pendEntry
}

type pendEntry struct {
	h uint64
	p pend
}

// nameOp is a buffered pair; the low bit of h (always set in a hash) is
// cleared for a linkEA entry (-1).
type nameOp struct{ h, src uint64 }

type pend struct {
	src uint64
	n   int32
}

func newNameMatch() *nameMatch {
	return &nameMatch{seed: maphash.MakeSeed(), foldAt: nameFoldAt}
}

func (nm *nameMatch) hash(parent fid.FID, name []byte, child fid.FID, typ uint8) uint64 {
	b := nm.buf[:0]
	var f [fid.Size]byte
	parent.Put(f[:])
	b = append(b, f[:]...)
	child.Put(f[:])
	b = append(b, f[:]...)
	b = append(b, typ)
	b = append(b, name...)
	nm.buf = b
	return maphash.Bytes(nm.seed, b) | 1 // 0 marks a free slot
}

// entry records a directory entry with hash h, found in object src.
func (nm *nameMatch) entry(h, src uint64) { nm.push(nameOp{h, src}) }

// claim records a linkEA entry with hash h, found in object src.
func (nm *nameMatch) claim(h, src uint64) { nm.push(nameOp{h &^ 1, src}) }

func (nm *nameMatch) push(op nameOp) {
	p := &nm.parts[op.h>>namePartShift]
	n := len(p.chunks)
	if n == 0 || len(p.chunks[n-1]) == nameChunk {
		var c []nameOp
		if k := len(nm.free); k > 0 {
			c, nm.free = nm.free[k-1], nm.free[:k-1]
		} else {
			c = make([]nameOp, 0, nameChunk)
		}
		p.chunks = append(p.chunks, c)
		n++
	}
	p.chunks[n-1] = append(p.chunks[n-1], op)
	if nm.buffered++; nm.buffered >= nm.foldAt && nm.buffered >= nm.left {
		nm.fold()
	}
}

// fold applies every buffered pair to what its partition left pending.
func (nm *nameMatch) fold() {
	if nm.buffered == 0 {
		return
	}
	t := &nm.scratch
	for i := range nm.parts {
		p := &nm.parts[i]
		if len(p.chunks) == 0 {
			continue
		}
		for _, e := range p.left {
			*t.find(e.h) = e.p
		}
		for _, c := range p.chunks {
			for _, op := range c {
				d := int32(-1)
				if op.h&1 != 0 {
					d = 1
				}
				t.add(op.h|1, d, op.src)
			}
			nm.free = append(nm.free, c[:0])
		}
		clear(p.chunks)
		p.chunks = p.chunks[:0]
		p.left = p.left[:0]
		t.drain(func(h uint64, v pend) { p.left = append(p.left, pendEntry{h, v}) })
	}
	nm.folds++
	nm.left = 0
	for i := range nm.parts {
		nm.left += len(nm.parts[i].left)
	}
	nm.buffered = 0
}

// pending is the number of pairs still waiting for their other half.
func (nm *nameMatch) pending() int {
	nm.fold()
	return nm.left
}

// each calls fn for every pending pair.
func (nm *nameMatch) each(fn func(h uint64, p pend)) {
	nm.fold()
	for i := range nm.parts {
		for _, e := range nm.parts[i].left {
			fn(e.h, e.p)
		}
	}
}

// add folds d into the pending count of h; src is the object it came from.
func (t *pendTable) add(h uint64, d int32, src uint64) {
	p := t.find(h)
	if p.n == 0 {
		p.src, p.n = src, d
		return
	}
	p.n += d
	if p.n == 0 {
		t.remove(h)
		return
	}
	if (p.n > 0) == (d > 0) {
		p.src = src
	}
}

// pendTable is an open-addressing hash table of pending pairs (linear
// probing, backward-shift deletion): cheaper than a Go map for the one
// insert and one delete every name costs.
type pendTable struct {
	keys []uint64
	vals []pend
	n    int
}

func (t *pendTable) slot(h uint64) int { return int(h>>7) & (len(t.keys) - 1) }

// find returns the entry of h, inserting an empty one if absent.
func (t *pendTable) find(h uint64) *pend {
	if (t.n+1)*2 > len(t.keys) {
		t.grow()
	}
	i := t.slot(h)
	for {
		switch t.keys[i] {
		case h:
			return &t.vals[i]
		case 0:
			t.keys[i] = h
			t.vals[i] = pend{}
			t.n++
			return &t.vals[i]
		}
		i = (i + 1) & (len(t.keys) - 1)
	}
}

func (t *pendTable) remove(h uint64) {
	if len(t.keys) == 0 {
		return
	}
	mask := len(t.keys) - 1
	i := t.slot(h)
	for t.keys[i] != h {
		if t.keys[i] == 0 {
			return
		}
		i = (i + 1) & mask
	}
	// Shift back the entries of the run that follows.
	for j := (i + 1) & mask; t.keys[j] != 0; j = (j + 1) & mask {
		home := t.slot(t.keys[j])
		if (j > i && (home <= i || home > j)) || (j < i && home <= i && home > j) {
			t.keys[i], t.vals[i] = t.keys[j], t.vals[j]
			i = j
		}
	}
	t.keys[i] = 0
	t.n--
}

func (t *pendTable) grow() {
	old, oldv := t.keys, t.vals
	size := max(1024, 2*len(old))
	t.keys, t.vals, t.n = make([]uint64, size), make([]pend, size), 0
	for i, k := range old {
		if k != 0 {
			*t.find(k) = oldv[i]
		}
	}
}

// drain calls fn for every pending pair and empties the table, keeping
// its size.
func (t *pendTable) drain(fn func(h uint64, p pend)) {
	if t.n == 0 {
		return
	}
	for i, k := range t.keys {
		if k != 0 {
			fn(k, t.vals[i])
			t.keys[i] = 0
		}
	}
	t.n = 0
}
