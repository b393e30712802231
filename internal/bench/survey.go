package bench

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jedib0t/go-pretty/v6/table"
	"github.com/jedib0t/go-pretty/v6/text"

	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/mdrpc"
)

// SurveyOptions configure `nacre bench survey` (Lustre's mds-survey).
type SurveyOptions struct {
	MGS      string
	MDT      uint32
	Threads  []int
	Files    int // files per thread count, split over the threads
	Progress io.Writer
	Timeline *Timeline
}

// SurveyRow is one thread count.
type SurveyRow struct {
	Threads int                `json:"threads"`
	Rates   map[string]float64 `json:"ops_per_sec"`
	MeanUs  map[string]float64 `json:"mean_us"`
}

// SurveyResult is the outcome of RunSurvey.
type SurveyResult struct {
	Benchmark string      `json:"benchmark"`
	Target    string      `json:"target"`
	Files     int         `json:"files"`
	Start     time.Time   `json:"start"`
	Ops       []string    `json:"ops"`
	Rows      []SurveyRow `json:"rows"`
}

var surveyOps = []string{"create", "lookup", "getattr", "setattr", "destroy"}

// surveyThread is one thread's direct connection to the MDT.
type surveyThread struct {
	c      *mdrpc.MDS
	client uint64
	req    uint64
	dir    fid.FID
}

func (t *surveyThread) mutate(ctx context.Context, cmd *pb.Command) error {
	t.req++
	cmd.ClientId, cmd.RequestId, cmd.AckedBelow, cmd.Cred = t.client, t.req, t.req, &pb.Cred{}
	r, err := t.c.Mutate(ctx, cmd)
	if err != nil {
		return err
	}
	return errno.NewErrno("survey", r.Errno, r.Message)
}

// RunSurvey drives one MDT directly over its metadata protocol — no
// client caches, no layouts on OSTs (files are made with a delayed
// layout), no FUSE — at growing thread counts, to find the server's own
// limit.
func RunSurvey(ctx context.Context, o SurveyOptions) (*SurveyResult, error) {
	if len(o.Threads) == 0 {
		o.Threads = []int{1, 2, 4, 8, 16, 32, 64}
	}
	if o.Files <= 0 {
		return nil, fmt.Errorf("--files must be at least 1")
	}
	st, err := cli.GetStatus(ctx, o.MGS, nil)
	if err != nil {
		return nil, err
	}
	addr := ""
	for _, t := range st.Targets {
		if t.Kind == "mdt" && t.Index == o.MDT && (t.Leader || addr == "") {
			addr = t.DataAddr
		}
	}
	if addr == "" {
		return nil, fmt.Errorf("MDT%04x is not registered with the MGS at %s (or has no metadata port)", o.MDT, o.MGS)
	}
	res := &SurveyResult{Benchmark: "survey", Target: fmt.Sprintf("%s-MDT%04x at %s", st.Fsname, o.MDT, addr), Files: o.Files, Start: time.Now(), Ops: surveyOps}
	if o.Timeline != nil {
		o.Timeline.Start(ctx)
		defer o.Timeline.Stop()
	}
	var rb [4]byte
	rand.Read(rb[:])
	for _, n := range o.Threads {
		if n <= 0 {
			return nil, fmt.Errorf("--threads: %d is not a thread count", n)
		}
		row, err := surveyRound(ctx, o, addr, st.Fsname, n, hex.EncodeToString(rb[:]))
		if err != nil {
			return res, err
		}
		res.Rows = append(res.Rows, row)
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, "threads %3d:", n)
			for _, op := range surveyOps {
				fmt.Fprintf(o.Progress, "  %s %.0f/s", op, row.Rates[op])
			}
			fmt.Fprintln(o.Progress)
		}
	}
	return res, nil
}

func surveyRound(ctx context.Context, o SurveyOptions, addr, fsname string, n int, tag string) (SurveyRow, error) {
	per := (o.Files + n - 1) / n
	ths := make([]*surveyThread, n)
	var idb [8]byte
	for i := range ths {
		rand.Read(idb[:])
		ths[i] = &surveyThread{c: mdrpc.NewMDS(addr, fsname, nil), client: binary.LittleEndian.Uint64(idb[:]) | 1}
	}
	defer func() {
		for _, t := range ths {
			t.c.Close()
		}
	}()
	base := fmt.Sprintf("nacre-survey-%s-%d", tag, n)
	setup := ths[0]
	r, err := setup.c.Mutate(ctx, &pb.Command{ClientId: setup.client, RequestId: 1 << 40, Cred: &pb.Cred{},
		Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte(base), Mode: syscall.S_IFDIR | 0o755, Exclusive: true}}})
	if err != nil || r.Errno != 0 {
		return SurveyRow{}, fmt.Errorf("make survey directory: %v %v", err, r.GetMessage())
	}
	baseFid := r.Inode.Fid
	for i, t := range ths {
		if err := t.mutate(ctx, &pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: baseFid, Name: fmt.Append(nil, "t", i), Mode: syscall.S_IFDIR | 0o755, Exclusive: true}}}); err != nil {
			return SurveyRow{}, err
		}
		lr, err := t.c.Lookup(ctx, &pb.LookupRequest{Parent: baseFid, Name: fmt.Append(nil, "t", i), Cred: &pb.Cred{}})
		if err != nil || lr.Errno != 0 {
			return SurveyRow{}, fmt.Errorf("survey setup lookup: %v", err)
		}
		t.dir = fid.FromPB(lr.Inode.Fid)
	}
	fids := make([][]*pb.FID, n)
	row := SurveyRow{Threads: n, Rates: map[string]float64{}, MeanUs: map[string]float64{}}
	for _, op := range surveyOps {
		if o.Timeline != nil {
			o.Timeline.SetPhase(fmt.Sprintf("%s x%d", op, n))
		}
		var total atomic.Int64
		var lat atomic.Int64
		var firstErr error
		var once sync.Once
		var wg sync.WaitGroup
		start := time.Now()
		for ti, t := range ths {
			wg.Add(1)
			go func(ti int, t *surveyThread) {
				defer wg.Done()
				if op == "create" {
					fids[ti] = make([]*pb.FID, per)
				}
				for i := 0; i < per && ctx.Err() == nil; i++ {
					t0 := time.Now()
					name := fmt.Append(nil, "f", i)
					var err error
					switch op {
					case "create":
						t.req++
						var r *pb.Reply
						r, err = t.c.Mutate(ctx, &pb.Command{ClientId: t.client, RequestId: t.req, AckedBelow: t.req, Cred: &pb.Cred{},
							Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: t.dir.PB(), Name: name, Mode: syscall.S_IFREG | 0o644, Exclusive: true, DelayLayout: true}}})
						if err == nil {
							err = errno.NewErrno("create", r.Errno, r.Message)
						}
						if err == nil {
							fids[ti][i] = r.Inode.Fid
						}
					case "lookup":
						var r *pb.Reply
						r, err = t.c.Lookup(ctx, &pb.LookupRequest{Parent: t.dir.PB(), Name: name, Cred: &pb.Cred{}})
						if err == nil {
							err = errno.NewErrno("lookup", r.Errno, r.Message)
						}
					case "getattr":
						var r *pb.Reply
						r, err = t.c.Getattr(ctx, &pb.GetattrRequest{Fid: fids[ti][i]})
						if err == nil {
							err = errno.NewErrno("getattr", r.Errno, r.Message)
						}
					case "setattr":
						err = t.mutate(ctx, &pb.Command{Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{Fid: fids[ti][i], Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o600}}})
					case "destroy":
						err = t.mutate(ctx, &pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: t.dir.PB(), Name: name}}})
					}
					if err != nil {
						once.Do(func() { firstErr = fmt.Errorf("survey %s with %d threads: %w", op, n, err) })
						return
					}
					lat.Add(int64(time.Since(t0)))
					total.Add(1)
					if o.Timeline != nil {
						o.Timeline.Add(1)
					}
				}
			}(ti, t)
		}
		wg.Wait()
		if firstErr != nil {
			return row, firstErr
		}
		if ctx.Err() != nil {
			return row, ctx.Err()
		}
		el := time.Since(start).Seconds()
		row.Rates[op] = round1(float64(total.Load()) / el)
		row.MeanUs[op] = round1(float64(lat.Load()) / float64(max(total.Load(), 1)) / 1e3)
	}
	for i, t := range ths {
		t.mutate(ctx, &pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: baseFid, Name: fmt.Append(nil, "t", i), Dir: true}}})
	}
	setup.mutate(ctx, &pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: fid.Root.PB(), Name: []byte(base), Dir: true}}})
	return row, nil
}

func round1(v float64) float64 { return float64(int64(v*10+0.5)) / 10 }

// PrintSurvey writes the survey as a table.
func PrintSurvey(w io.Writer, r *SurveyResult) {
	fmt.Fprintf(w, "MDS survey of %s, %d files per thread count (ops/s; mean µs in parentheses)\n", r.Target, r.Files)
	t := newTable(w)
	hdr := table.Row{"THREADS"}
	for _, op := range r.Ops {
		hdr = append(hdr, op)
	}
	t.AppendHeader(hdr)
	for _, row := range r.Rows {
		tr := table.Row{row.Threads}
		for _, op := range r.Ops {
			tr = append(tr, fmt.Sprintf("%.0f (%.0f)", row.Rates[op], row.MeanUs[op]))
		}
		t.AppendRow(tr)
	}
	var cc []table.ColumnConfig
	for i := 1; i <= len(hdr); i++ {
		cc = append(cc, table.ColumnConfig{Number: i, Align: text.AlignRight})
	}
	t.SetColumnConfigs(cc)
	t.Render()
}
