package lfsck

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/mdt"
)

// ReportVersion is the version of the report's field names; it changes
// when a name changes (Lustre renamed its keys over time, §4).
const ReportVersion = 1

// Report is `nacre lfsck query --json`: the state of every component of
// one MDT's checker.
type Report struct {
	Version    int                         `json:"version"`
	MDT        uint32                      `json:"mdt"`
	Target     string                      `json:"target"`
	Running    bool                        `json:"running"`
	Params     ReportParams                `json:"params"`
	Components map[string]*ComponentReport `json:"components"`
}

// ReportParams are the parameters of the latest run.
type ReportParams struct {
	Types        []string `json:"types"`
	SpeedLimit   uint64   `json:"speed_limit"`
	AsyncWindow  uint32   `json:"async_window"`
	DryRun       bool     `json:"dry_run"`
	Orphan       bool     `json:"orphan"`
	CreateOSTObj bool     `json:"create_ostobj"`
	CreateMDTObj bool     `json:"create_mdtobj"`
	ErrorPolicy  string   `json:"error_policy"`
}

// Count is one kind's figures: found by the latest run, and repaired.
type Count struct {
	Inconsistent uint64 `json:"inconsistent"`
	Repaired     uint64 `json:"repaired"`
}

// ComponentReport is one component (scrub, namespace, layout).
type ComponentReport struct {
	Status       string            `json:"status"`
	Flags        []string          `json:"flags"`
	Param        []string          `json:"param"`
	Checked      uint64            `json:"checked"`
	Repaired     uint64            `json:"repaired"`
	Inconsistent uint64            `json:"inconsistent"`
	Failed       uint64            `json:"failed"`
	Counters     map[string]Count  `json:"counters"`
	Stats        map[string]uint64 `json:"stats"`

	CheckedPhase1 uint64 `json:"checked_phase1"`
	CheckedPhase2 uint64 `json:"checked_phase2"`
	FailedPhase1  uint64 `json:"failed_phase1"`
	FailedPhase2  uint64 `json:"failed_phase2"`
	SuccessCount  uint64 `json:"success_count"`

	LastCompleted  string `json:"last_completed_time,omitempty"`
	LatestStart    string `json:"latest_start_time,omitempty"`
	LastCheckpoint string `json:"last_checkpoint_time,omitempty"`

	LatestStartPosition       uint64 `json:"latest_start_position"`
	LastCheckpointPosition    uint64 `json:"last_checkpoint_position"`
	FirstFailurePosition      uint64 `json:"first_failure_position"`
	FirstInconsistentPosition uint64 `json:"first_inconsistent_position"`
	CurrentPosition           string `json:"current_position"`

	RunTimePhase1  float64  `json:"run_time_phase1"`
	RunTimePhase2  float64  `json:"run_time_phase2"`
	SpeedPhase1    float64  `json:"average_speed_phase1"`
	SpeedPhase2    float64  `json:"average_speed_phase2"`
	SpeedTotal     float64  `json:"average_speed_total"`
	RealTimeSpeed  float64  `json:"real_time_speed"`
	IncompleteOSTs []uint32 `json:"incomplete_osts,omitempty"`
}

type liveFigures struct {
	t1, t2     tally
	pos        uint64
	phase      uint32
	phaseT0    time.Time
	runBase    [4][2]int64
	lastCkpt   time.Time
	ckptCount  [4]uint64
	phase2Pos  []byte
	phase2Step uint32
	orphanPos  uint64
	incomplete []uint32
}

func (r *run) live() *liveFigures {
	t1, t2 := r.led.figures()
	r.mu.Lock()
	defer r.mu.Unlock()
	return &liveFigures{t1: t1, t2: t2, pos: r.led.at.Load(), phase: r.st.Phase, phaseT0: r.times.phaseT0, runBase: r.times.base,
		lastCkpt: r.times.lastCkpt, ckptCount: r.times.ckptCount, phase2Pos: r.st.Phase2Position, phase2Step: r.st.Phase2Step,
		orphanPos: r.layout.orphanAt.Load(), incomplete: append([]uint32(nil), r.st.IncompleteOsts...)}
}

// Report describes the checker now.
func (c *Checker) Report() *Report {
	c.mu.Lock()
	st := proto.Clone(c.state).(*pb.LfsckState)
	r := c.cur
	c.mu.Unlock()
	var lv *liveFigures
	if r != nil {
		lv = r.live()
		st = r.snapshotState()
	}
	p := st.Params
	rep := &Report{Version: ReportVersion, MDT: c.env.Target.Identity().Index, Target: c.env.Target.Identity().Label(), Running: r != nil,
		Components: map[string]*ComponentReport{}}
	for _, comp := range Components {
		if p.Types&(1<<comp) != 0 {
			rep.Params.Types = append(rep.Params.Types, ComponentNames[comp])
		}
	}
	rep.Params.SpeedLimit, rep.Params.AsyncWindow = p.Speed, p.Window
	rep.Params.DryRun, rep.Params.Orphan, rep.Params.CreateOSTObj, rep.Params.CreateMDTObj = p.DryRun, p.Orphan, p.CreateOstobj, p.CreateMdtobj
	rep.Params.ErrorPolicy = "continue"
	if p.Failout {
		rep.Params.ErrorPolicy = "failout"
	}
	if r != nil {
		rep.Params.SpeedLimit = r.lim.get()
	}
	now := time.Now()
	for _, comp := range Components {
		cs := compState(st, comp)
		inRun := p.Types&(1<<comp) != 0
		cr := &ComponentReport{Status: StatusName(cs.Status), Flags: bitNames(cs.Flags, compFlagNames), Param: bitNames(cs.Param, paramNames),
			Counters: map[string]Count{}, Stats: map[string]uint64{},
			CheckedPhase1: cs.CheckedPhase1, CheckedPhase2: cs.CheckedPhase2, FailedPhase1: cs.FailedPhase1, FailedPhase2: cs.FailedPhase2,
			SuccessCount: cs.SuccessCount, LatestStartPosition: cs.LatestStartPosition, LastCheckpointPosition: cs.LastCheckpointPosition,
			FirstFailurePosition: cs.FirstFailurePosition, FirstInconsistentPosition: cs.FirstInconsistentPosition,
			LastCompleted: stamp(cs.LastCompletedNs), LatestStart: stamp(cs.LatestStartNs), LastCheckpoint: stamp(cs.LastCheckpointNs),
			RunTimePhase1: float64(cs.RunTimePhase1Ns) / 1e9, RunTimePhase2: float64(cs.RunTimePhase2Ns) / 1e9, CurrentPosition: "N/A"}
		for k, v := range cs.Stats {
			cr.Stats[k] = v
		}
		if lv != nil && inRun {
			cr.CheckedPhase1, cr.CheckedPhase2 = lv.t1[comp][tChecked], lv.t2[comp][tChecked]
			cr.FailedPhase1, cr.FailedPhase2 = lv.t1[comp][tFailed], lv.t2[comp][tFailed]
			for i, n := range statNames {
				if v := lv.t1[comp][tStat+i] + lv.t2[comp][tStat+i]; v != 0 {
					cr.Stats[n] = v
				}
			}
			run := lv.runBase[comp]
			ph := 0
			if lv.phase == 2 {
				ph = 1
			}
			if lv.phase != 0 {
				run[ph] += now.Sub(lv.phaseT0).Nanoseconds()
			}
			cr.RunTimePhase1, cr.RunTimePhase2 = float64(run[0])/1e9, float64(run[1])/1e9
			switch lv.phase {
			case 1:
				cr.CurrentPosition = fmt.Sprintf("object %d", lv.pos)
			case 2:
				cr.CurrentPosition = "phase 2: the trace of uncertain items"
				if lv.phase2Step > 0 || !r.on(Namespace) {
					cr.CurrentPosition = "phase 2: orphan OST objects"
					if op := lv.orphanPos; op != 0 {
						cr.CurrentPosition = fmt.Sprintf("phase 2: orphan OST objects, OST%04x object %d", op>>48, op&(1<<48-1))
					}
				}
			}
			if dt := now.Sub(lv.lastCkpt).Seconds(); dt > 0 {
				// This component's objects per second since the last
				// checkpoint.
				if n := lv.t1[comp][tChecked] + lv.t2[comp][tChecked]; n >= lv.ckptCount[comp] {
					cr.RealTimeSpeed = round1(float64(n-lv.ckptCount[comp]) / dt)
				}
			}
			if comp == Layout {
				cr.IncompleteOSTs = lv.incomplete
			}
		} else if comp == Layout {
			cr.IncompleteOSTs = st.IncompleteOsts
		}
		var extraFailed uint64
		cr.Counters, extraFailed = c.counts(comp, cs, inRun, p.DryRun, lv)
		cr.FailedPhase2 += extraFailed
		for _, cnt := range cr.Counters {
			cr.Inconsistent += cnt.Inconsistent
			cr.Repaired += cnt.Repaired
		}
		cr.Checked = cr.CheckedPhase1 + cr.CheckedPhase2
		cr.Failed = cr.FailedPhase1 + cr.FailedPhase2
		if cr.RunTimePhase1 > 0 {
			cr.SpeedPhase1 = round1(float64(cr.CheckedPhase1) / cr.RunTimePhase1)
		}
		if cr.RunTimePhase2 > 0 {
			cr.SpeedPhase2 = round1(float64(cr.CheckedPhase2) / cr.RunTimePhase2)
		}
		if t := cr.RunTimePhase1 + cr.RunTimePhase2; t > 0 {
			cr.SpeedTotal = round1(float64(cr.Checked) / t)
		}
		rep.Components[ComponentNames[comp]] = cr
	}
	return rep
}

// counts are one component's inconsistencies found and repaired by kind,
// and the failures its repairs counted: a dry run's live (lv) or recorded
// figures, else the counters in the store. inRun: the component is part
// of the latest run.
func (c *Checker) counts(comp uint32, cs *pb.LfsckComponentState, inRun, dry bool, lv *liveFigures) (map[string]Count, uint64) {
	out := map[string]Count{}
	var failed uint64
	if inRun && dry {
		if lv != nil {
			for k, name := range KindNames[comp] {
				if f := lv.t1[comp][tFound+int(k)] + lv.t2[comp][tFound+int(k)]; f != 0 {
					out[name] = Count{Inconsistent: f}
				}
			}
		} else {
			for name, cnt := range cs.Counters {
				out[name] = Count{Inconsistent: cnt.Inconsistent, Repaired: cnt.Repaired}
			}
		}
		return out, 0
	}
	cnts, _ := mdt.LfsckCounters(c.env.Target.DB(), comp)
	for k, v := range cnts {
		if k == mdt.LfsckKindFailed {
			failed += v[0]
			continue
		}
		name := KindNames[comp][k]
		if name == "" {
			name = fmt.Sprintf("kind%d", k)
		}
		out[name] = Count{Inconsistent: v[0], Repaired: v[1]}
	}
	return out, failed
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

func stamp(ns int64) string {
	if ns == 0 {
		return ""
	}
	return time.Unix(0, ns).UTC().Format(time.RFC3339Nano)
}

// WriteText writes one component in the key: value style of Lustre's
// lfsck_namespace / lfsck_layout / oi_scrub files.
func WriteText(w io.Writer, name string, cr *ComponentReport) {
	kv := func(k string, v any) { fmt.Fprintf(w, "%s: %v\n", k, v) }
	kv("name", "lfsck_"+name)
	kv("version", ReportVersion)
	kv("status", cr.Status)
	kv("flags", strings.Join(cr.Flags, ","))
	kv("param", strings.Join(cr.Param, ","))
	for _, t := range []struct{ k, v string }{{"last_completed_time", cr.LastCompleted}, {"latest_start_time", cr.LatestStart}, {"last_checkpoint_time", cr.LastCheckpoint}} {
		if t.v == "" {
			kv(t.k, "N/A")
		} else {
			kv(t.k, t.v)
		}
	}
	kv("latest_start_position", cr.LatestStartPosition)
	kv("last_checkpoint_position", cr.LastCheckpointPosition)
	kv("first_failure_position", cr.FirstFailurePosition)
	kv("first_inconsistent_position", cr.FirstInconsistentPosition)
	kv("checked_phase1", cr.CheckedPhase1)
	kv("checked_phase2", cr.CheckedPhase2)
	kv("failed_phase1", cr.FailedPhase1)
	kv("failed_phase2", cr.FailedPhase2)
	kv("inconsistent", cr.Inconsistent)
	kv("repaired", cr.Repaired)
	names := make([]string, 0, len(cr.Counters))
	for n := range cr.Counters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := cr.Counters[n]
		kv(n+"_inconsistent", c.Inconsistent)
		kv(n+"_repaired", c.Repaired)
	}
	names = names[:0]
	for n := range cr.Stats {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		kv(n, cr.Stats[n])
	}
	kv("success_count", cr.SuccessCount)
	kv("run_time_phase1", fmt.Sprintf("%.1f seconds", cr.RunTimePhase1))
	kv("run_time_phase2", fmt.Sprintf("%.1f seconds", cr.RunTimePhase2))
	kv("average_speed_phase1", fmt.Sprintf("%.0f items/sec", cr.SpeedPhase1))
	kv("average_speed_phase2", fmt.Sprintf("%.0f items/sec", cr.SpeedPhase2))
	kv("average_speed_total", fmt.Sprintf("%.0f items/sec", cr.SpeedTotal))
	kv("real_time_speed", fmt.Sprintf("%.0f items/sec", cr.RealTimeSpeed))
	kv("current_position", cr.CurrentPosition)
	if len(cr.IncompleteOSTs) > 0 {
		kv("incomplete_osts", fmt.Sprint(cr.IncompleteOSTs))
	}
}
