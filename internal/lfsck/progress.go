package lfsck

import (
	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
)

// Progress is one component's figures for the server's metrics
// (nacre_lfsck_*, registered by the MDS). The totals count every run this
// checker made or resumed since it was created (the server's start):
// they never go back, so that rate() works across runs, unlike the
// per-run figures of Report, which a new run resets.
type Progress struct {
	Running  bool   // the component is part of the running check
	Phase    uint32 // 1 or 2 while running, else 0
	Position uint64 // phase-1 scan position: the local object key reached (running), else of the last checkpoint

	Checked      uint64
	Failed       uint64
	Inconsistent uint64 // found (a dry run's too)
	Repaired     uint64
}

// runFigures are one run's Progress counts per component.
type runFigures [4][nFigures]uint64

const (
	fChecked = iota
	fFailed
	fInconsistent
	fRepaired
	nFigures
)

// figuresOf computes the counts of the run described by st (and lv, its
// live figures, if it runs or ran in this process) for the components in
// the run, as Report reports them.
func (c *Checker) figuresOf(st *pb.LfsckState, lv *liveFigures) runFigures {
	var f runFigures
	p := st.Params
	for _, comp := range Components {
		if p.Types&(1<<comp) == 0 {
			continue
		}
		cs := compState(st, comp)
		counts, extraFailed := c.counts(comp, cs, true, p.DryRun, lv)
		if lv != nil {
			f[comp][fChecked] = lv.t1[comp][tChecked] + lv.t2[comp][tChecked]
			f[comp][fFailed] = lv.t1[comp][tFailed] + lv.t2[comp][tFailed]
		} else {
			f[comp][fChecked] = cs.CheckedPhase1 + cs.CheckedPhase2
			f[comp][fFailed] = cs.FailedPhase1 + cs.FailedPhase2
		}
		f[comp][fFailed] += extraFailed
		for _, n := range counts {
			f[comp][fInconsistent] += n.Inconsistent
			f[comp][fRepaired] += n.Repaired
		}
	}
	return f
}

// runEnded adds what run r counted to the totals (called by finish, with
// c.mu held; end are r's final figures).
func (c *Checker) runEnded(r *run, end runFigures) {
	for _, comp := range Components {
		if !r.on(comp) {
			continue
		}
		for i := range nFigures {
			v := c.done[comp][i]
			if end[comp][i] > r.base[comp][i] {
				v += end[comp][i] - r.base[comp][i]
			}
			v = max(v, c.shown[comp][i])
			c.done[comp][i], c.shown[comp][i] = v, v
		}
	}
}

// Progress returns the figures of every component (indexed by component
// number). It costs what a query costs (a few small reads of the store),
// nothing on the scan's path: metrics read it when they are scraped.
func (c *Checker) Progress() [4]Progress {
	c.mu.Lock()
	r := c.cur
	st := proto.Clone(c.state).(*pb.LfsckState)
	done := c.done
	c.mu.Unlock()
	var cur runFigures
	var lv *liveFigures
	if r != nil {
		lv = r.live()
		st = r.snapshotState()
		cur = c.figuresOf(st, lv)
	}
	var out [4]Progress
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, comp := range Components {
		cs := compState(st, comp)
		pr := &out[comp]
		pr.Position = cs.LastCheckpointPosition
		tot := done[comp]
		if r != nil && r.on(comp) {
			// A run whose phases are over (phase 0) records its end
			// before it leaves: it is no longer running.
			pr.Running, pr.Phase = lv.phase != 0, lv.phase
			if lv.phase == 1 {
				pr.Position = lv.pos
			} else {
				pr.Position = st.Position
			}
			for i := range nFigures {
				if cur[comp][i] > r.base[comp][i] {
					tot[i] += cur[comp][i] - r.base[comp][i]
				}
			}
		}
		// A stopped run's live figures may drop back to its checkpoint
		// (work in flight is redone on resume): totals never go back.
		for i := range nFigures {
			tot[i] = max(tot[i], c.shown[comp][i])
			c.shown[comp][i] = tot[i]
		}
		pr.Checked, pr.Failed, pr.Inconsistent, pr.Repaired = tot[fChecked], tot[fFailed], tot[fInconsistent], tot[fRepaired]
	}
	return out
}
