package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/layout"
	"nacre/internal/pki"
)

// DfRow is one row of `nacre df --json`. A target that is down has no
// space figures (all zero, no use_percent) and is not in the totals.
type DfRow struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	BytesTotal  uint64 `json:"bytes_total"`
	BytesUsed   uint64 `json:"bytes_used"`
	BytesAvail  uint64 `json:"bytes_avail"`
	UsePercent  *int   `json:"use_percent,omitempty"` // as df(1): used / (used + avail), rounded up
	InodesTotal uint64 `json:"inodes_total"`
	InodesUsed  uint64 `json:"inodes_used"`
	InodesFree  uint64 `json:"inodes_free"`
	State       string `json:"state"`
}

// DfJSON is `nacre df --json`.
type DfJSON struct {
	Fsname  string  `json:"fsname"`
	Targets []DfRow `json:"targets"`
	Total   DfRow   `json:"filesystem"`
}

// usePercent is df(1)'s and lfs df's Use%: used / (used + avail), rounded
// up, so that space reserved for root (in size, in neither used nor
// avail) does not hide a full target. nil when there is no figure.
func usePercent(used, avail uint64) *int {
	if used+avail == 0 {
		return nil
	}
	p := int((used*100 + used + avail - 1) / (used + avail))
	return &p
}

// dfTable computes df's rows and totals from the targets' status: data
// space summed over the OSTs, inodes over the MDTs, targets that are down
// shown without figures and left out of the totals.
func dfTable(fsname string, targets []TargetStatus) DfJSON {
	out := DfJSON{Fsname: fsname, Targets: []DfRow{}, Total: DfRow{Name: fsname, Kind: "filesystem", State: "up"}}
	down := 0
	stuck := map[string]bool{}
	for _, g := range leaderless(targets) {
		// A row of its own: none of its replicas is counted below.
		down++
		stuck[g.name] = true
		out.Targets = append(out.Targets, DfRow{Name: g.name, Kind: g.kind, State: g.state()})
	}
	for _, ts := range targets {
		if ts.Kind == "mgs" || (ts.ReplicaID != 0 && (!ts.Leader || stuck[ts.Name])) {
			continue // replicas of one target: count its leader only
		}
		r := DfRow{Name: ts.Name, Kind: ts.Kind, State: ts.State}
		if ts.State != "up" {
			down++
			out.Targets = append(out.Targets, r)
			continue
		}
		r.BytesTotal, r.BytesUsed, r.BytesAvail = ts.BytesTotal, ts.BytesUsed, ts.BytesAvail
		r.InodesTotal, r.InodesUsed, r.InodesFree = ts.InodesTotal, ts.InodesUsed, ts.InodesTotal-ts.InodesUsed
		r.UsePercent = usePercent(r.BytesUsed, r.BytesAvail)
		out.Targets = append(out.Targets, r)
		if ts.Kind == "ost" {
			out.Total.BytesTotal += r.BytesTotal
			out.Total.BytesUsed += r.BytesUsed
			out.Total.BytesAvail += r.BytesAvail
		} else {
			out.Total.InodesTotal += r.InodesTotal
			out.Total.InodesUsed += r.InodesUsed
			out.Total.InodesFree += r.InodesFree
		}
	}
	out.Total.UsePercent = usePercent(out.Total.BytesUsed, out.Total.BytesAvail)
	if down > 0 {
		out.Total.State = fmt.Sprintf("%d down", down)
	}
	return out
}

// Df prints space and inodes per target and for the file system, like
// `lfs df`.
func Df(ctx context.Context, e Env, asJSON bool) error {
	st, err := GetStatus(ctx, e.MGS, e.TLS)
	if err != nil {
		return err
	}
	for i, ts := range st.Targets {
		if ts.State == "up" && (ts.Kind == "mdt" || ts.Kind == "ost") && (ts.ReplicaID == 0 || ts.Leader) {
			// Ask the target itself: the MGS's copy is a heartbeat old.
			if s, err := targetStatfs(ctx, ts, e.TLS); err == nil {
				ts.BytesTotal, ts.BytesAvail, ts.BytesUsed = s.BytesTotal, s.BytesAvail, s.BytesTotal-s.BytesFree
				ts.InodesTotal, ts.InodesUsed = s.InodesTotal, s.InodesTotal-s.InodesFree
				st.Targets[i] = ts
			}
		}
	}
	out := dfTable(st.Fsname, st.Targets)
	if asJSON {
		return JSON(e.Out, out)
	}
	writeDf(e.Out, out)
	return nil
}

func writeDf(w io.Writer, out DfJSON) {
	t := newTable(w)
	t.AppendHeader([]any{"TARGET", "SIZE", "USED", "AVAIL", "USE%", "INODES", "IUSED", "IFREE", "STATE"})
	row := func(r DfRow, figures bool) {
		if !figures {
			t.AppendRow([]any{r.Name, "-", "-", "-", "-", "-", "-", "-", r.State})
			return
		}
		pct := "-"
		if r.UsePercent != nil {
			pct = fmt.Sprintf("%d%%", *r.UsePercent)
		}
		t.AppendRow([]any{r.Name, layout.FormatSize(r.BytesTotal), layout.FormatSize(r.BytesUsed), layout.FormatSize(r.BytesAvail), pct,
			r.InodesTotal, r.InodesUsed, r.InodesFree, r.State})
	}
	for _, r := range out.Targets {
		row(r, r.State == "up")
	}
	t.AppendSeparator()
	row(out.Total, true)
	t.Render()
}

func targetStatfs(ctx context.Context, ts TargetStatus, creds *pki.Creds) (*pb.Statfs, error) {
	cc, err := Dial(ts.Addr, creds)
	if err != nil {
		return nil, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	var r *pb.StatfsReply
	if ts.Kind == "mdt" {
		r, err = nacregrpc.NewMDSClient(cc).Statfs(ctx, &pb.StatfsRequest{})
	} else {
		r, err = nacregrpc.NewOSSClient(cc).Statfs(ctx, &pb.StatfsRequest{})
	}
	if err != nil {
		return nil, err
	}
	return r.Statfs, nil
}
