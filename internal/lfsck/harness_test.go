package lfsck

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	pb "nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/layout"
	"nacre/internal/mdt"
	"nacre/internal/objrec"
	"nacre/internal/ost"
	"nacre/internal/target"
)

// harness is an MDT (in memory, commands applied without Raft) and OST
// stores (on disk), wired to a checker as an MDS wires them.
type harness struct {
	t     testing.TB
	db    *kv.DB
	tg    *mdt.Target
	d     *mdt.Direct
	osts  map[uint32]*ost.Store
	down  map[uint32]bool
	req   uint64
	ostN  []uint32
	quiet *slog.Logger
	// gate, if set, is called at the start of every OST call the checker
	// makes (call: "check", "summary", "orphans", "repair", "objects"):
	// tests hold a call there, or make it fail, to stop a run at a known
	// point. An error it returns is the call's.
	gate func(ctx context.Context, call string, ost uint32) error
	// beforePropose, if set, sees every command the checker proposes
	// before it is applied: tests change the store there, between a
	// decision and its apply.
	beforePropose func(cmd *pb.Command)
}

func newHarness(t testing.TB, nOST int) *harness { return newHarnessPool(t, nOST, 1024) }

func newHarnessPool(t testing.TB, nOST int, pool uint64) *harness {
	t.Helper()
	db, err := kv.OpenMem()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tg, err := mdt.Open(db, target.Identity{Fsname: "test", Kind: target.MDT}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, db: db, tg: tg, d: mdt.NewDirect(tg), osts: map[uint32]*ost.Store{}, down: map[uint32]bool{},
		quiet: slog.New(slog.NewTextHandler(io.Discard, nil))}
	for i := 0; i < nOST; i++ {
		h.ostN = append(h.ostN, uint32(i))
	}
	if err := h.d.Setup(fid.SeqNormal, h.ostN, fid.OSTSeq(0), pool); err != nil {
		t.Fatal(err)
	}
	for _, i := range h.ostN {
		dir := t.TempDir()
		id := target.Identity{Fsname: "test", Kind: target.OST, Index: i}
		if err := target.Format(dir, id); err != nil {
			t.Fatal(err)
		}
		st, err := ost.Open(dir, id, ost.Options{KV: kv.Options{FS: vfs.NewMem()}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		for from := uint64(1); from < 1+pool; {
			end, err := st.Precreate(fid.OSTSeq(0), from, 1+pool-from)
			if err != nil {
				t.Fatal(err)
			}
			from = end
		}
		h.osts[i] = st
	}
	return h
}

// localOST serves the checker's OST calls from a store.
type localOST struct {
	h   *harness
	idx uint32
}

func (o localOST) st(ctx context.Context, call string) (*ost.Store, error) {
	if o.h.gate != nil {
		if err := o.h.gate(ctx, call, o.idx); err != nil {
			return nil, err
		}
	}
	if o.h.down[o.idx] {
		return nil, fmt.Errorf("OST%04x is down: %w", o.idx, syscall.ECONNREFUSED)
	}
	return o.h.osts[o.idx], nil
}

func (o localOST) Check(ctx context.Context, req *pb.LfsckCheckRequest) (*pb.LfsckCheckReply, error) {
	st, err := o.st(ctx, "check")
	if err != nil {
		return nil, err
	}
	if req.Delta {
		for i := 1; i < len(req.Oids); i++ {
			req.Oids[i] += req.Oids[i-1]
		}
	}
	r, err := st.CheckObjects(req.Seq, req.Oids, req.Digests)
	if err != nil {
		return nil, err
	}
	return &pb.LfsckCheckReply{Missing: r.Missing, Mismatched: r.Mismatched, Attrs: r.Attrs, Uninitialized: r.Uninitialized}, nil
}

func (o localOST) Summary(ctx context.Context, req *pb.LfsckSummaryRequest) (*pb.LfsckSummaryReply, error) {
	st, err := o.st(ctx, "summary")
	if err != nil {
		return nil, err
	}
	sum, err := st.Summarize(req.Seq, req.From, req.Span, uint64(req.Block))
	if err != nil {
		return nil, err
	}
	return &pb.LfsckSummaryReply{Exists: sum.Exists, Uninitialized: sum.Uninit, Sums: sum.Sums, Done: sum.Done, Next: sum.Next}, nil
}

func (o localOST) Orphans(ctx context.Context, req *pb.LfsckOrphansRequest) (*pb.LfsckOrphansReply, error) {
	st, err := o.st(ctx, "orphans")
	if err != nil {
		return nil, err
	}
	objs, next, err := st.OrphanObjects(req.Seq, req.From, req.To, req.Referenced, int(req.Max))
	if err != nil {
		return nil, err
	}
	return &pb.LfsckOrphansReply{Objects: objs, Next: next}, nil
}

func (o localOST) Repair(ctx context.Context, req *pb.LfsckObjRepairRequest) (*pb.LfsckObjRepairReply, error) {
	st, err := o.st(ctx, "repair")
	if err != nil {
		return nil, err
	}
	done, err := st.RepairObjects(ost.RepairsOf(req.Items))
	if err != nil {
		return nil, err
	}
	return &pb.LfsckObjRepairReply{Done: done}, nil
}

func (o localOST) GetObjects(ctx context.Context, objs []*pb.StripeObject) ([]*pb.ObjectAttr, error) {
	st, err := o.st(ctx, "objects")
	if err != nil {
		return nil, err
	}
	ids := make([]fid.ObjID, len(objs))
	for i, s := range objs {
		ids[i] = fid.ObjID{Seq: s.Seq, Oid: s.Oid}
	}
	return st.GetObjects(ids)
}

func (h *harness) env() Env {
	return Env{Target: h.tg, Log: h.quiet, RPCTimeout: 5 * time.Second,
		Propose: func(ctx context.Context, cmd *pb.Command) (*pb.Reply, error) {
			if h.beforePropose != nil {
				h.beforePropose(cmd)
			}
			return h.d.Do(cmd)
		},
		OSTs: func() map[uint32]OST {
			m := map[uint32]OST{}
			for _, i := range h.ostN {
				m[i] = localOST{h, i}
			}
			return m
		}}
}

func (h *harness) do(op any) *pb.Reply {
	h.t.Helper()
	h.req++
	cmd := &pb.Command{ClientId: 9, RequestId: h.req}
	switch o := op.(type) {
	case *pb.CreateOp:
		o.Osts = h.ostN
		cmd.Op = &pb.Command_Create{Create: o}
	case *pb.LinkOp:
		cmd.Op = &pb.Command_Link{Link: o}
	case *pb.UnlinkOp:
		cmd.Op = &pb.Command_Unlink{Unlink: o}
	case *pb.RenameOp:
		cmd.Op = &pb.Command_Rename{Rename: o}
	case *pb.SetattrOp:
		cmd.Op = &pb.Command_Setattr{Setattr: o}
	default:
		h.t.Fatalf("op %T", op)
	}
	r, err := h.d.Do(cmd)
	if err != nil {
		h.t.Fatal(err)
	}
	return r
}

func (h *harness) mkdir(parent fid.FID, name string) fid.FID {
	h.t.Helper()
	r := h.do(&pb.CreateOp{Parent: parent.PB(), Name: []byte(name), Mode: syscall.S_IFDIR | 0o755})
	if r.Errno != 0 {
		h.t.Fatalf("mkdir %s: %s", name, r.Message)
	}
	return fid.FromPB(r.Inode.Fid)
}

// create makes a file of stripes stripes (64 KiB each) and writes data
// through its layout as a client would (recording the PFIDs).
func (h *harness) create(parent fid.FID, name string, stripes int, data []byte) fid.FID {
	h.t.Helper()
	r := h.do(&pb.CreateOp{Parent: parent.PB(), Name: []byte(name), Mode: syscall.S_IFREG | 0o644,
		Layout: &pb.Layout{StripeSize: 64 << 10, StripeCount: int32(stripes), StripeOffset: -1}})
	if r.Errno != 0 {
		h.t.Fatalf("create %s: %s", name, r.Message)
	}
	ino := r.Inode
	h.write(ino, data)
	if len(data) > 0 {
		h.do(&pb.SetattrOp{Fid: ino.Fid, Valid: uint32(pb.SetattrValid_SETATTR_SIZE), Size: uint64(len(data))})
	}
	return fid.FromPB(ino.Fid)
}

func (h *harness) write(ino *pb.Inode, data []byte) {
	l := ino.Layout
	for _, ch := range layout.Split(uint64(l.StripeSize), len(l.Objects), 0, uint64(len(data))) {
		o := l.Objects[ch.Stripe]
		meta := &bulk.ObjMeta{Parent: fid.FromPB(ino.Fid), StripeIndex: uint32(ch.Stripe), StripeSize: l.StripeSize,
			StripeCount: uint32(len(l.Objects)), LayoutGen: l.Generation, UID: ino.Uid, GID: ino.Gid, ProjID: ino.Projid, Valid: bulk.MetaAll}
		if err := h.osts[o.Ost].Write(fid.ObjID{Seq: o.Seq, Oid: o.Oid}, ch.ObjOff, data[ch.FileOff:ch.FileOff+ch.Len], meta); err != nil {
			h.t.Fatal(err)
		}
	}
}

// read reads a file's data from its objects (size from the objects).
func (h *harness) read(f fid.FID) ([]byte, error) {
	ino, err := h.tg.Getattr(f, false)
	if err != nil {
		return nil, err
	}
	l := ino.Layout
	if l == nil || len(l.Objects) == 0 {
		return nil, nil
	}
	sizes := make([]uint64, len(l.Objects))
	for i, o := range l.Objects {
		if o.Seq == 0 && o.Oid == 0 {
			continue
		}
		a, err := h.osts[o.Ost].GetObjects([]fid.ObjID{{Seq: o.Seq, Oid: o.Oid}})
		if err != nil {
			return nil, err
		}
		sizes[i] = a[0].Size
	}
	size := layout.FileSize(uint64(l.StripeSize), sizes)
	out := make([]byte, size)
	for _, ch := range layout.Split(uint64(l.StripeSize), len(l.Objects), 0, size) {
		o := l.Objects[ch.Stripe]
		if o.Seq == 0 && o.Oid == 0 {
			continue
		}
		if _, err := h.osts[o.Ost].Read(fid.ObjID{Seq: o.Seq, Oid: o.Oid}, ch.ObjOff, out[ch.FileOff:ch.FileOff+ch.Len]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (h *harness) lookup(parent fid.FID, name string) (fid.FID, error) {
	ino, err := h.tg.Lookup(parent, name, nil)
	if err != nil {
		return fid.FID{}, err
	}
	return fid.FromPB(ino.Fid), nil
}

// lpf lists lost+found: name -> FID.
func (h *harness) lpf() map[string]fid.FID {
	out := map[string]fid.FID{}
	ents, _, err := h.tg.Readdir(fid.LostFound, 0, 10000, false, nil)
	if err != nil {
		return out
	}
	for _, e := range ents {
		out[string(e.Name)] = fid.FromPB(e.Fid)
	}
	return out
}

func (h *harness) inject(kind string, f, parent fid.FID, name string, stripe uint32) {
	h.t.Helper()
	op, osts, err := h.tg.BuildFault(&pb.FaultInjectRequest{Kind: kind, Fid: f.PB(), Parent: parent.PB(), Name: []byte(name), Stripe: stripe})
	if err != nil {
		h.t.Fatalf("build fault %s: %v", kind, err)
	}
	for _, of := range osts {
		var rec *objrec.Rec
		if of.Rec != nil {
			r := objrec.FromAttr(of.Rec)
			rec = &r
		}
		if err := h.osts[of.OST].FaultObject(of.Kind, fid.ObjID{Seq: of.Obj.Seq, Oid: of.Obj.Oid}, rec); err != nil {
			h.t.Fatalf("fault %s on OST%d: %v", kind, of.OST, err)
		}
	}
	if op != nil {
		r, err := h.d.Do(&pb.Command{Op: &pb.Command_Fault{Fault: op}})
		if err != nil || r.Errno != 0 {
			h.t.Fatalf("fault %s: %v %v", kind, err, r)
		}
	}
}

// run runs the checker to its end and returns its report.
func (h *harness) run(c *Checker, req *pb.LfsckStartRequest) *Report {
	h.t.Helper()
	if _, err := c.Start(context.Background(), req); err != nil {
		h.t.Fatalf("start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.Wait(ctx); err != nil {
		h.t.Fatalf("wait: %v", err)
	}
	return c.Report()
}

// digests summarises the MDT store and every OST store.
func (h *harness) digests() string {
	h.t.Helper()
	var b strings.Builder
	d, n, err := kv.Digest(h.db)
	if err != nil {
		h.t.Fatal(err)
	}
	fmt.Fprintf(&b, "mdt %x/%d", d, n)
	for _, i := range h.ostN {
		d, n, err := h.osts[i].StoreDigest()
		if err != nil {
			h.t.Fatal(err)
		}
		fmt.Fprintf(&b, " ost%d %x/%d", i, d, n)
	}
	return b.String()
}

// totals sums found and repaired over every component.
func totals(r *Report) (found, repaired uint64) {
	for _, c := range r.Components {
		found += c.Inconsistent
		repaired += c.Repaired
	}
	return
}

func describe(r *Report) string {
	var b strings.Builder
	for _, name := range []string{"scrub", "namespace", "layout"} {
		c := r.Components[name]
		if c == nil {
			continue
		}
		fmt.Fprintf(&b, "%s[%s checked=%d failed=%d", name, c.Status, c.Checked, c.Failed)
		for k, v := range c.Counters {
			fmt.Fprintf(&b, " %s=%d/%d", k, v.Inconsistent, v.Repaired)
		}
		b.WriteString("] ")
	}
	return b.String()
}
