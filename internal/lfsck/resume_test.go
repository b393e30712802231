package lfsck

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/mdt"
	"nacre/internal/ost"
)

// severalKinds are injected together into one aged tree.
var severalKinds = []string{"oi_missing", "oi_stale", "dirent_fid", "dirent_missing", "linkea_missing", "linkea_extra",
	"nlink_less", "dir_nlink", "bad_type", "orphan", "lost_parent", "pfid_missing_parent", "owner", "stripe_index",
	"lost_mdt_object", "ost_object_missing", "multiple_reference", "dangling"}

// agedDamaged builds an aged tree (bulk files, then renamed across
// directories, unlinked, hard-linked, chmodded, and directories made and
// removed, so that local keys have holes and entries point across the
// tree; plus one small tree per kind) and damages each small tree with
// its kind.
func agedDamaged(h *harness, bulk int) {
	base := h.mkdir(fid.Root, "aged")
	var dirs []fid.FID
	for d := 0; d < 3; d++ {
		dir := h.mkdir(base, fmt.Sprintf("bulk%d", d))
		dirs = append(dirs, dir)
		for i := 0; i < bulk/3; i++ {
			h.create(dir, fmt.Sprintf("f%d", i), 1+i%2, nil)
		}
	}
	ok := func(r *pb.Reply) {
		h.t.Helper()
		if r.Errno != 0 {
			h.t.Fatalf("aging: %s", r.Message)
		}
	}
	for d, dir := range dirs {
		for i := 0; i < bulk/3; i++ {
			name := []byte(fmt.Sprintf("f%d", i))
			switch {
			case i%5 == 0:
				ok(h.do(&pb.RenameOp{SrcParent: dir.PB(), SrcName: name, DstParent: dirs[(d+1)%3].PB(), DstName: []byte(fmt.Sprintf("m%d-%d", d, i))}))
			case i%5 == 1:
				ok(h.do(&pb.UnlinkOp{Parent: dir.PB(), Name: name}))
			case i%7 == 2:
				f, err := h.lookup(dir, string(name))
				if err != nil {
					h.t.Fatal(err)
				}
				ok(h.do(&pb.LinkOp{Fid: f.PB(), Parent: dirs[(d+2)%3].PB(), Name: []byte(fmt.Sprintf("l%d-%d", d, i))}))
			case i%11 == 3:
				f, err := h.lookup(dir, string(name))
				if err != nil {
					h.t.Fatal(err)
				}
				ok(h.do(&pb.SetattrOp{Fid: f.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o600}))
			}
		}
		tmp := h.mkdir(dir, "tmp")
		h.create(tmp, "x", 1, nil)
		ok(h.do(&pb.UnlinkOp{Parent: tmp.PB(), Name: []byte("x")}))
		ok(h.do(&pb.UnlinkOp{Parent: dir.PB(), Name: []byte("tmp"), Dir: true}))
	}
	for i, name := range severalKinds {
		k, _ := fault.LookupKind(name)
		tr := buildTreeAt(h, base, fmt.Sprintf("t%02d", i))
		injectInto(h, tr, k)
	}
}

var allRepairs = &pb.LfsckStartRequest{Types: []string{"all"}, Orphan: true, CreateMdtobj: true, CreateOstobj: true}

func fullReq(speed uint64) *pb.LfsckStartRequest {
	r := proto.Clone(allRepairs).(*pb.LfsckStartRequest)
	r.Reset_ = true
	r.CheckpointIntervalMs = 50
	if speed > 0 {
		r.Speed = &speed
	}
	return r
}

// figures is what interrupted and uninterrupted runs must agree on.
func figures(r *Report) string {
	var lines []string
	for name, c := range r.Components {
		lines = append(lines, fmt.Sprintf("%s status=%s checked1=%d", name, c.Status, c.CheckedPhase1))
		for k, v := range c.Counters {
			lines = append(lines, fmt.Sprintf("%s.%s=%d/%d", name, k, v.Inconsistent, v.Repaired))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func uninterrupted(t *testing.T) string {
	h := newHarnessPool(t, 2, 4096)
	agedDamaged(h, agedBulk())
	rep := h.run(New(h.env()), fullReq(0))
	if f, _ := totals(rep); f < uint64(len(severalKinds)) {
		t.Fatalf("uninterrupted run found too little: %s", describe(rep))
	}
	return figures(rep)
}

// TestStopAndResumeEndLikeAnUninterruptedRun stops a slow run several
// times and resumes it; it must end with the figures of a run that was
// never stopped.
func TestStopAndResumeEndLikeAnUninterruptedRun(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	want := uninterrupted(t)
	h := newHarnessPool(t, 2, 4096)
	agedDamaged(h, agedBulk())
	c := New(h.env())
	ctx := context.Background()
	if _, err := c.Start(ctx, fullReq(1500)); err != nil {
		t.Fatal(err)
	}
	stops := 0
	for c.Running() {
		waitForProgress(t, c, 100)
		if _, err := c.Stop(ctx); err != nil {
			t.Fatal(err)
		}
		rep := c.Report()
		if rep.Components["namespace"].Status == "completed" {
			break
		}
		if s := rep.Components["namespace"].Status; s != "stopped" {
			t.Fatalf("after stop: status %s", s)
		}
		stops++
		if stops == 1 {
			// A dry run between stop and start is no reset: the stopped
			// run still resumes from its checkpoint.
			if _, err := c.Start(ctx, &pb.LfsckStartRequest{Types: []string{"all"}, DryRun: true}); err != nil {
				t.Fatal(err)
			}
			c.Wait(ctx)
			if s := c.Report().Components["namespace"].Status; s != "completed" {
				t.Fatalf("dry run between stop and start: status %s", s)
			}
		}
		req := proto.Clone(allRepairs).(*pb.LfsckStartRequest) // no reset: resume with the saved parameters
		msg, err := c.Start(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(msg, "resumed") {
			t.Fatalf("start after stop: %s", msg)
		}
	}
	c.Wait(ctx)
	if stops < 2 {
		t.Fatalf("only %d stops: the run was too fast to test resuming", stops)
	}
	t.Logf("%d stops", stops)
	if got := figures(c.Report()); got != want {
		t.Fatalf("after %d stops:\n%s\nuninterrupted:\n%s", stops, got, want)
	}
}

// checked is what c's run checked in every component, as its report
// shows it.
func checked(c *Checker) uint64 {
	var n uint64
	for _, cr := range c.Report().Components {
		n += cr.Checked
	}
	return n
}

// waitForProgress waits until c's run has checked n more items in all
// (or has ended).
func waitForProgress(t *testing.T, c *Checker, n uint64) {
	t.Helper()
	start := checked(c)
	waitFor(t, 30*time.Second, fmt.Sprintf("the run to check %d more items", n), func() bool {
		return !c.Running() || checked(c) >= start+n
	})
}

// crashSoon lets c's run go on for a hundred items, then abandons it
// without a checkpoint (as kill -9 would) and returns the checker of the
// restarted server.
func crashSoon(t *testing.T, h *harness, c *Checker) *Checker {
	t.Helper()
	waitForProgress(t, c, 100)
	if !c.Running() {
		t.Fatal("the run ended before the crash")
	}
	c.Abandon()
	return New(h.env())
}

// TestCrashResumeEndsLikeAnUninterruptedRun abandons the run without a
// checkpoint (as kill -9 would) twice and lets a new checker resume it.
func TestCrashResumeEndsLikeAnUninterruptedRun(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	want := uninterrupted(t)
	h := newHarnessPool(t, 2, 4096)
	agedDamaged(h, agedBulk())
	ctx := context.Background()
	c := New(h.env())
	if _, err := c.Start(ctx, fullReq(800)); err != nil {
		t.Fatal(err)
	}
	for crash := 0; crash < 2; crash++ {
		c = crashSoon(t, h, c)
		// As Lustre: a run whose server died shows as crashed until it
		// resumes (also when nothing resumes it: NACRE_LFSCK_NO_AUTO).
		if rep := c.Report(); rep.Running || rep.Components["namespace"].Status != "crashed" || rep.Components["layout"].Status != "crashed" {
			t.Fatalf("after the crash: running %v, namespace %s, layout %s; want crashed", rep.Running,
				rep.Components["namespace"].Status, rep.Components["layout"].Status)
		}
		if err := c.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		if !c.Running() {
			t.Fatal("the crashed run did not resume")
		}
	}
	c.Wait(ctx)
	if got := figures(c.Report()); got != want {
		t.Fatalf("after crashes:\n%s\nuninterrupted:\n%s", got, want)
	}
}

// TestNoFalseRepairsUnderLoad runs real checks (every repair allowed)
// while a client creates, writes, renames, links and removes: nothing is
// found, and nothing is changed. It runs four checks (two in the fast
// tier), and more until at least 200 operations ran alongside them.
func TestNoFalseRepairsUnderLoad(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	h := newHarnessPool(t, 2, 1<<14)
	base := h.mkdir(fid.Root, "load")
	var dirs []fid.FID
	for d := 0; d < 4; d++ {
		dirs = append(dirs, h.mkdir(base, fmt.Sprintf("d%d", d)))
	}
	files := sized(400, 2)
	for i := 0; i < files; i++ {
		h.create(dirs[i%4], fmt.Sprintf("f%d", i), 1+i%2, []byte("x"))
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ops, errs atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewSource(1))
		var mu sync.Mutex
		do := func(op any) *pb.Reply {
			mu.Lock()
			defer mu.Unlock()
			h.req++
			cmd := &pb.Command{ClientId: 77, RequestId: h.req}
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
			}
			r, err := h.d.Do(cmd)
			if err != nil {
				return &pb.Reply{Errno: int32(syscall.EIO)}
			}
			return r
		}
		n := 0
		for ctx.Err() == nil {
			d := dirs[rng.Intn(4)]
			d2 := dirs[rng.Intn(4)]
			name := fmt.Sprintf("w%d", rng.Intn(300))
			var r *pb.Reply
			switch rng.Intn(6) {
			case 0, 1:
				r = do(&pb.CreateOp{Parent: d.PB(), Name: []byte(fmt.Sprintf("n%d", n)), Mode: syscall.S_IFREG | 0o644,
					Layout: &pb.Layout{StripeSize: 64 << 10, StripeCount: 2, StripeOffset: -1}})
				if r.Errno == 0 {
					h.write(r.Inode, []byte("data"))
				}
				n++
			case 2:
				r = do(&pb.RenameOp{SrcParent: d.PB(), SrcName: []byte(fmt.Sprintf("n%d", rng.Intn(n+1))), DstParent: d2.PB(), DstName: []byte(name)})
			case 3:
				r = do(&pb.UnlinkOp{Parent: d.PB(), Name: []byte(name)})
			case 4:
				if ino, err := h.tg.Lookup(d, fmt.Sprintf("f%d", rng.Intn(files)), nil); err == nil {
					r = do(&pb.LinkOp{Fid: ino.Fid, Parent: d2.PB(), Name: []byte(fmt.Sprintf("l%d", n))})
				}
			case 5:
				r = do(&pb.UnlinkOp{Parent: d.PB(), Name: []byte(fmt.Sprintf("l%d", rng.Intn(n+1)))})
			}
			ops.Add(1)
			if r != nil && r.Errno != 0 {
				errs.Add(1)
			}
		}
	}()
	c := New(h.env())
	for i := 0; i < sized(4, 2) || ops.Load() < 200 && i < 40; i++ {
		rep := h.run(c, fullReq(3000))
		if f, _ := totals(rep); f != 0 {
			stop()
			wg.Wait()
			t.Fatalf("run %d under load found inconsistencies: %s", i, describe(rep))
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d client operations during the checks (%d failed as expected: names missing)", ops.Load(), errs.Load())
	if n := ops.Load(); n < 200 {
		t.Fatalf("only %d operations ran alongside the checker", n)
	}
	if f, _ := totals(h.run(c, fullReq(0))); f != 0 {
		t.Fatal("a clean run after the load finds inconsistencies")
	}
}

// TestGarbageNeverCrashesTheChecker fills the store with garbage under
// every key range; dry and real runs end (completed) without panicking.
func TestGarbageNeverCrashesTheChecker(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	h := newHarness(t, 2)
	tr := buildTree(h)
	rng := rand.New(rand.NewSource(2))
	junk := func(n int) []byte {
		b := make([]byte, n)
		rng.Read(b)
		return b
	}
	var sets []*pb.LfsckKV
	for _, p := range []byte{'O', 'I', 'D', 'X', 'U', 'P'} {
		for i := 0; i < 20; i++ {
			k := append([]byte{p}, junk(rng.Intn(30))...)
			sets = append(sets, &pb.LfsckKV{Key: k, Value: junk(rng.Intn(60))})
		}
	}
	// Objects that decode but say nonsense, and entries of real
	// directories naming garbage.
	for i := 0; i < 10; i++ {
		ino := &pb.Inode{Fid: &pb.FID{Seq: rng.Uint64(), Oid: rng.Uint32()}, Mode: rng.Uint32(), Nlink: rng.Uint32(),
			Links:  []*pb.LinkEntry{{Parent: &pb.FID{Seq: rng.Uint64()}, Name: []byte(fmt.Sprintf("%x", junk(5)))}},
			Layout: &pb.Layout{StripeSize: rng.Uint32(), Objects: []*pb.StripeObject{{Ost: rng.Uint32(), Seq: rng.Uint64(), Oid: rng.Uint64()}}}}
		sets = append(sets, &pb.LfsckKV{Key: mdt.ObjKey(uint64(1000 + i)), Value: mdt.MarshalInode(ino)})
		local, _, _ := newLookup(h, tr.d)
		sets = append(sets, &pb.LfsckKV{Key: mdt.DirentKey(local, fmt.Sprintf("junk%d", i)), Value: junk(rng.Intn(20))})
	}
	// The checker's own state and trace.
	sets = append(sets, &pb.LfsckKV{Key: mdt.KeyLfsckState, Value: junk(40)},
		&pb.LfsckKV{Key: append(mdt.LfsckTracePrefix(Namespace), junk(10)...), Value: junk(30)},
		&pb.LfsckKV{Key: append(mdt.LfsckTracePrefix(Layout), junk(10)...), Value: junk(20)})
	for _, kv := range sets {
		if _, err := h.d.Do(&pb.Command{Op: &pb.Command_Fault{Fault: &pb.FaultOp{Kind: "garbage", Change: &pb.LfsckRepair{
			Muts: []*pb.LfsckMut{{M: &pb.LfsckMut_Set{Set: kv}}}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	// An OST object of the MDT's sequence at a huge id: the summaries
	// once asked for every empty range below it and never finished.
	f1, err := h.tg.Getattr(tr.f1, false)
	if err != nil {
		t.Fatal(err)
	}
	s0 := f1.Layout.Objects[0]
	if done, err := h.osts[s0.Ost].RepairObjects([]ost.ObjRepair{{Obj: fid.ObjID{Seq: s0.Seq, Oid: 1 << 44}, Create: true}}); err != nil || !done[0] {
		t.Fatalf("make an object at id 2^44: %v, %v", done, err)
	}
	c := New(h.env())
	for _, dry := range []bool{true, false, false} {
		req := fullReq(0)
		req.DryRun = dry
		rep := h.run(c, req)
		for name, cr := range rep.Components {
			if cr.Status != "completed" && cr.Status != "partial" {
				t.Fatalf("dry=%v: %s ended %s: %s", dry, name, cr.Status, describe(rep))
			}
		}
		t.Logf("dry=%v: %s", dry, describe(rep))
	}
	// The real tree still reads back.
	if got, err := h.read(tr.f1); err != nil || len(got) != len(tr.data1) {
		t.Fatalf("f1 after garbage runs: %d bytes, %v", len(got), err)
	}
}

func newLookup(h *harness, f fid.FID) (uint64, *pb.Inode, error) {
	v, err := h.db.Get(mdt.OIKey(f))
	if err != nil {
		return 0, nil, err
	}
	var local uint64
	for _, b := range v {
		local = local<<8 | uint64(b)
	}
	return local, nil, nil
}

// TestStopCompletesWithAnOSTDown: an OST that does not answer makes the
// layout check skip its objects (partial), and stop always returns.
func TestStopCompletesWithAnOSTDown(t *testing.T) {
	h := newHarnessPool(t, 2, 4096)
	buildTree(h)
	populate(h, 2, sized(500, 4), 2)
	h.down[1] = true
	c := New(h.env())
	rep := h.run(c, fullReq(0))
	lc := rep.Components["layout"]
	if lc.Status != "partial" || lc.Stats["skipped"] == 0 || len(lc.IncompleteOSTs) != 1 {
		t.Fatalf("layout with OST1 down: %s %+v", describe(rep), lc)
	}
	if f, _ := totals(rep); f != 0 {
		t.Fatalf("an OST down is not an inconsistency: %s", describe(rep))
	}
	// A stop while the check waits on a hung OST returns at once.
	hung := newHeld(func(call string, _ uint32) bool { return call == "check" })
	h.gate = hung.gate
	if _, err := c.Start(context.Background(), fullReq(0)); err != nil {
		t.Fatal(err)
	}
	hung.wait(t, "the layout check never asked an OST")
	t0 := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("stop took %v", d)
	}
	if s := c.Report().Components["layout"].Status; s != "stopped" {
		t.Fatalf("status after stop: %s", s)
	}
}

// TestSpeedLimitHoldsAndChangesWhileRunning: the scan keeps to the limit
// (±30%, as Lustre's tests accept) and follows a new one at once.
func TestSpeedLimitHoldsAndChangesWhileRunning(t *testing.T) {
	h := newHarnessPool(t, 1, 4096)
	populate(h, 1, 3000, 1)
	c := New(h.env())
	req := fullReq(1000)
	req.Types = []string{"namespace"}
	if _, err := c.Start(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	// The rate is measured over a second, then half a second (half that
	// in the fast tier).
	span := time.Second
	if testing.Short() {
		span /= 2
	}
	time.Sleep(span)
	n1 := c.Report().Components["namespace"].Stats["objects"]
	fast := uint64(4000)
	if err := c.Set(&fast, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(span / 2)
	n2 := c.Report().Components["namespace"].Stats["objects"]
	c.Stop(context.Background())
	if want := 1000 * span.Seconds(); float64(n1) < 0.7*want || float64(n1) > 1.3*want {
		t.Fatalf("at 1000 objects/s, %d objects in %v", n1, span)
	}
	if d, want := n2-n1, 4000*span.Seconds()/2; float64(d) < 0.7*want || float64(d) > 1.3*want {
		t.Fatalf("at 4000 objects/s, %d objects in %v", d, span/2)
	}
}

// TestLeadershipNoticedAfterADryRunKeepsItsReport: the server tells the
// checker it leads up to 200 ms after it does (mds followLeader), and an
// admin's dry run can start and end before that. Resume must not replace
// the dry run's figures, kept in memory only, with the stored state (the
// report showed no objects checked: itest's base counts went wrong).
// Losing the leadership afterwards drops them: the next leader's store
// is what counts.
func TestLeadershipNoticedAfterADryRunKeepsItsReport(t *testing.T) {
	h := newHarness(t, 1)
	for i := 0; i < 20; i++ {
		h.create(fid.Root, fmt.Sprintf("f%02d", i), 1, []byte("x"))
	}
	ctx := context.Background()
	c := New(h.env())
	dry := h.run(c, &pb.LfsckStartRequest{Types: []string{"namespace"}, DryRun: true})
	objects := dry.Components["namespace"].Stats["objects"]
	if objects < 20 {
		t.Fatalf("the dry run checked %d objects, want at least 20", objects)
	}
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	after := c.Report().Components["namespace"]
	if after.Stats["objects"] != objects || after.Status != "completed" || !c.Report().Params.DryRun {
		t.Fatalf("after Resume the report shows %s, %d objects, dry run %v; want the dry run's completed, %d objects",
			after.Status, after.Stats["objects"], c.Report().Params.DryRun, objects)
	}
	c.Abandon()
	if got := c.Report().Components["namespace"].Stats["objects"]; got != 0 {
		t.Fatalf("after losing the leadership the report still shows the dry run's %d objects", got)
	}
}

// TestDryRunBeforeLeadershipNoticedStillResumesACrashedRun: a dry run
// started on a restarted server before its leadership was noticed does
// not hide the real run that was scanning when the server died.
func TestDryRunBeforeLeadershipNoticedStillResumesACrashedRun(t *testing.T) {
	t.Parallel() // arms no fault point (tiers_test.go)
	h := newHarnessPool(t, 2, 4096)
	agedDamaged(h, agedBulk())
	ctx := context.Background()
	c := New(h.env())
	if _, err := c.Start(ctx, fullReq(800)); err != nil {
		t.Fatal(err)
	}
	c = crashSoon(t, h, c)
	h.run(c, &pb.LfsckStartRequest{Types: []string{"namespace"}, DryRun: true})
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if !c.Running() {
		t.Fatal("the crashed run did not resume")
	}
	c.Stop(ctx)
}
