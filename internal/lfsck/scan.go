package lfsck

import (
	"syscall"
	"time"

	"nacre/internal/fault"
	"nacre/internal/kv"
	"nacre/internal/mdt"
)

// Phase 1: one sequential iteration of the object range in local-key
// order, each object given to every component that is on. Each window of
// the scan reads one pebble snapshot, refreshed every second, so that
// everything decided within a window is consistent; what spans windows
// (an entry and the linkEA of its child) is matched by hash and
// re-verified on fresh state in phase 2. The namespace check reads the
// directory entries of each directory in the same pass (entries are keyed
// by their directory's local key, so a second iterator advances in step).

const (
	windowTime    = time.Second
	windowObjects = 1 << 16
)

var (
	direntUpper = kv.PrefixEnd(mdt.DirentLower)
	objUpper    = kv.PrefixEnd(mdt.ObjLower)
	oiUpper     = kv.PrefixEnd(mdt.OILower)
)

const dtDir = uint8(syscall.S_IFDIR >> 12)

// scan checks the objects with local keys in [from, to) (to 0: all the
// rest). With rebuild it only re-derives what phase 1 keeps in memory (a
// resumed run's part before its checkpoint): no checks, no figures.
func (r *run) scan(from, to uint64, rebuild bool) error {
	db := r.env.Target.DB()
	pos := from
	o := object{ostSeq: newSeqField(r.seq)}
	for {
		if r.stopping() {
			return errHalted
		}
		w := &window{snap: db.NewSnapshot(), pos: pos, rebuild: rebuild}
		next, done, err := r.scanWindow(w, to, &o)
		w.snap.Close()
		if err != nil {
			return err
		}
		pos = next
		if done {
			if !rebuild {
				r.led.advance(pos)
			}
			return nil
		}
	}
}

func (r *run) scanWindow(w *window, to uint64, o *object) (pos uint64, done bool, err error) {
	pos = w.pos
	upper := objUpper
	if to != 0 {
		upper = mdt.ObjKey(to)
	}
	itO, err := w.snap.NewIter(mdt.ObjKey(pos), upper)
	if err != nil {
		return pos, false, err
	}
	defer itO.Close()
	opened := 0
	defer func() {
		// After the scan's last object (not in a rebuild, which stops at
		// its checkpoint), what the components' iterators have left is
		// beyond every object.
		last := done && err == nil && !w.rebuild && to == 0
		for _, c := range r.comps[:opened] {
			c.closeWindow(last)
		}
	}()
	for _, c := range r.comps {
		if err := c.openWindow(w); err != nil {
			return pos, false, err
		}
		opened++
	}
	t0 := time.Now()
	n := 0
	for valid := itO.First(); valid; valid = itO.Next() {
		local, ok := mdt.ObjLocal(itO.Key())
		if !ok {
			continue
		}
		if !w.rebuild {
			r.led.begin(local)
		}
		so := scanned{snap: w.snap, local: local, v: itO.Value(), o: o, rebuild: w.rebuild}
		err := r.object(&so)
		if !w.rebuild {
			r.led.end()
		}
		if err != nil {
			return local, false, err
		}
		pos = local + 1
		if !w.rebuild {
			r.led.advance(pos)
		}
		n++
		if n&63 == 0 {
			if !w.rebuild {
				if err := r.lim.wait(r.ctx, 64); err != nil {
					return pos, false, err
				}
			}
			if err := r.pac.pace(r.ctx); err != nil {
				return pos, false, err
			}
			if r.stopping() {
				return pos, false, errHalted
			}
			if !w.rebuild {
				if err := r.maybeCheckpoint(); err != nil {
					return pos, false, err
				}
			}
			if n >= windowObjects || time.Since(t0) >= windowTime {
				return pos, false, nil
			}
		}
	}
	if err := itO.Error(); err != nil {
		return pos, false, err
	}
	return pos, true, nil
}

// object gives one object to every component, in order.
func (r *run) object(so *scanned) error {
	if !so.rebuild {
		if err := fault.Hit("lfsck.scan.object"); err != nil {
			if err := r.failed(r.comps[0].id(), 1, err); err != nil {
				return err
			}
			// With -e continue the next object follows; this one is
			// passed over.
			so.failed = true
		}
	}
	// The OI scrub reports an object whose layout does not decode, so it
	// needs the stripes as much as the layout check does.
	if !so.failed && so.o.decodeSome(so.v, r.on(Layout) || r.on(Scrub)) != nil {
		so.garbage = true
	}
	for _, c := range r.comps {
		if err := c.object(so); err != nil {
			return err
		}
	}
	return nil
}
