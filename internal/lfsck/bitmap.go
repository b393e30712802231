package lfsck

import "nacre/internal/fid"

// bitmap is a growable bit set of object ids.
type bitmap struct{ w []uint64 }

const maxBitmapOid = 1 << 32

func (b *bitmap) set(i uint64) {
	if i >= maxBitmapOid {
		return
	}
	for uint64(len(b.w)) <= i/64 {
		b.w = append(b.w, make([]uint64, len(b.w)+1)...)
	}
	b.w[i/64] |= 1 << (i % 64)
}

// testSet sets bit i and reports whether it was set already.
func (b *bitmap) testSet(i uint64) bool {
	was := b.test(i)
	b.set(i)
	return was
}

// testSetIn is testSet for an i within the bitmap's words (ok false:
// beyond them, call testSet), small enough to be inlined into the layout
// check's loop over stripes.
func (b *bitmap) testSetIn(i uint64) (was, ok bool) {
	if w := i / 64; w < uint64(len(b.w)) {
		old := b.w[w]
		b.w[w] = old | 1<<(i%64)
		return old>>(i%64)&1 != 0, true
	}
	return false, false
}

func (b *bitmap) test(i uint64) bool {
	if i/64 >= uint64(len(b.w)) {
		return false
	}
	return b.w[i/64]&(1<<(i%64)) != 0
}

// bytes returns bits [from, to) as bytes, LSB first (LfsckOrphansRequest).
func (b *bitmap) bytes(from, to uint64) []byte {
	out := make([]byte, (to-from+7)/8)
	for i := from; i < to; i++ {
		if b.test(i) {
			out[(i-from)/8] |= 1 << ((i - from) % 8)
		}
	}
	return out
}

// fidBitmap is a bit set of FIDs of normal sequences.
type fidBitmap map[uint64]*bitmap

func (m fidBitmap) set(f fid.FID) {
	if f.Ver != 0 || f.Oid >= fid.Width {
		return
	}
	b := m[f.Seq]
	if b == nil {
		b = &bitmap{}
		m[f.Seq] = b
	}
	b.set(uint64(f.Oid))
}

func (m fidBitmap) has(f fid.FID) bool {
	b := m[f.Seq]
	return b != nil && f.Ver == 0 && b.test(uint64(f.Oid))
}
