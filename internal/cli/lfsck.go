package cli

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"strings"

	"nacre/internal/lfsck/admin"
)

// LfsckStarted is what `nacre lfsck start --json` prints without --wait.
type LfsckStarted struct {
	Started []LfsckStartedMDT `json:"started"`
}

// LfsckStartedMDT is one MDT the checker was started on.
type LfsckStartedMDT struct {
	MDT     int    `json:"mdt"`
	Target  string `json:"target,omitempty"`
	Message string `json:"message"`
}

// LfsckStart starts the checker (admin.Start). With JSON, standard output
// is one JSON document: the final report with Wait (the MDTs' "started"
// messages go to standard error), else a LfsckStarted.
func LfsckStart(ctx context.Context, e Env, o admin.StartOptions) error {
	ae := admin.Env{MGS: e.MGS, Out: e.Out, Err: stderr(e)}
	if !o.JSON {
		return admin.Start(ctx, ae, o)
	}
	var msgs bytes.Buffer
	so := o
	so.Wait = false
	if err := admin.Start(ctx, admin.Env{MGS: e.MGS, Out: &msgs, Err: ae.Err}, so); err != nil {
		ae.Err.Write(msgs.Bytes()) // the MDTs started before the failure
		return err
	}
	lines := strings.Split(strings.TrimRight(msgs.String(), "\n"), "\n")
	if o.Wait {
		for _, l := range lines {
			if l != "" {
				ae.Err.Write([]byte(l + "\n"))
			}
		}
		// The report of the run just started: wait as Start does.
		return admin.WaitStarted(ctx, ae, o.MDT, o.All, true)
	}
	// admin.Start starts one MDT after the other in index order, one
	// message line each; the names come from the MGS.
	st, _ := GetStatus(ctx, e.MGS)
	var mdts []LfsckStartedMDT
	if !o.All {
		mdts = []LfsckStartedMDT{{MDT: o.MDT}}
	} else if st != nil {
		seen := map[uint32]bool{}
		for _, t := range st.Targets {
			if t.Kind == "mdt" && !seen[t.Index] {
				seen[t.Index] = true
				mdts = append(mdts, LfsckStartedMDT{MDT: int(t.Index)})
			}
		}
		sort.Slice(mdts, func(i, j int) bool { return mdts[i].MDT < mdts[j].MDT })
	}
	if len(mdts) != len(lines) {
		mdts = make([]LfsckStartedMDT, len(lines))
		for i := range mdts {
			mdts[i].MDT = -1 // unknown
		}
	}
	out := LfsckStarted{Started: []LfsckStartedMDT{}}
	for i, l := range lines {
		m := mdts[i]
		m.Message = l
		if st != nil && m.MDT >= 0 {
			m.Target = fmt.Sprintf("%s-MDT%04x", st.Fsname, m.MDT)
		}
		out.Started = append(out.Started, m)
	}
	return JSON(e.Out, out)
}
