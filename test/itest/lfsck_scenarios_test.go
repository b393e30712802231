package itest

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/lfsck"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// scenarioKinds are injected together, one tree each.
var scenarioKinds = []string{"oi_stale", "dirent_fid", "dirent_missing", "linkea_missing", "nlink_less", "dir_nlink",
	"bad_type", "orphan", "lost_parent", "pfid_missing_parent", "owner", "lost_mdt_object", "ost_object_missing"}

var scenarioFlags = []string{"-o", "-c", "-C"}

// damageSet builds one tree per scenario kind under prefix and damages it.
func damageSet(t *testing.T, ctx context.Context, cl *testcluster.Cluster, c *client.Client, prefix string, bulk int) {
	t.Helper()
	if bulk > 0 {
		d, err := c.Mkdir(ctx, fid.Root, prefix+"bulk", 0o755)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < bulk; i++ {
			if _, _, err := c.Create(ctx, fid.FromPB(d.Fid), fmt.Sprintf("f%d", i), 0o644, client.CreateOpts{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, kind := range scenarioKinds {
		k, _ := fault.LookupKind(kind)
		tr := buildLTree(t, ctx, c, fmt.Sprintf("%s%02d", prefix, i))
		if out, err := cl.Run("fault", "inject", kind, "--path", tr.target(k)); err != nil {
			t.Fatalf("inject %s: %v\n%s", kind, err, out)
		}
	}
}

// counters lists every component's found/repaired counters.
func counters(r *lfsck.Report) string {
	var l []string
	for name, c := range r.Components {
		for k, v := range c.Counters {
			l = append(l, fmt.Sprintf("%s.%s=%d/%d", name, k, v.Inconsistent, v.Repaired))
		}
	}
	sort.Strings(l)
	return strings.Join(l, " ")
}

// TestLfsckStopResumeAndKill9EndLikeAnUninterruptedRun damages three
// identical sets of trees: the first is checked in one go; the second is
// stopped and resumed (from its checkpoints, with its saved parameters);
// during the third the MDS is killed with SIGKILL, and the restarted MDS
// resumes the check by itself. All three end with the same counters.
func TestLfsckStopResumeAndKill9EndLikeAnUninterruptedRun(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()

	damageSet(t, ctx, cl, c, "a", 0)
	quiesce(t, cl)
	want := counters(lfsckRun(t, cl, append([]string{"-r"}, scenarioFlags...)...))
	if !strings.Contains(want, "namespace.orphan=1/1") {
		t.Fatalf("uninterrupted run: %s", want)
	}

	// Stop and resume.
	damageSet(t, ctx, cl, c, "b", 600)
	quiesce(t, cl)
	if out, err := cl.Run("fault", "arm", "lfsck.scan.object=delay:2ms", "--target", "mdt0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	args := append([]string{"lfsck", "start", "-r", "--checkpoint-interval-ms", "100"}, scenarioFlags...)
	if out, err := cl.Run(args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	stops := 0
	for ; stops < 20; stops++ {
		time.Sleep(400 * time.Millisecond) // the run goes on between stops
		if out, err := cl.Run("lfsck", "stop"); err != nil {
			t.Fatalf("stop: %v\n%s", err, out)
		}
		r := lfsckQuery(t, cl)
		if r.Components["namespace"].Status == "completed" {
			break
		}
		if s := r.Components["namespace"].Status; s != "stopped" {
			t.Fatalf("after stop: %s", s)
		}
		out, err := cl.Run("lfsck", "start")
		if err != nil || !strings.Contains(out, "resumed") {
			t.Fatalf("resume: %v\n%s", err, out)
		}
	}
	if out, err := cl.Run("fault", "arm", "lfsck.scan.object=off", "--target", "mdt0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	got := counters(waitStatus(t, cl, "namespace", 60*time.Second, "completed"))
	if stops < 2 || got != want {
		t.Fatalf("after %d stops: %s\nuninterrupted: %s", stops, got, want)
	}

	// kill -9 in the middle, twice. The speed limit (saved with the
	// run's parameters, so the resumed run keeps it) holds the run long
	// enough that both kills land in it; each restarted MDS resumes the
	// run by itself from its last checkpoint.
	damageSet(t, ctx, cl, c, "c", 600)
	quiesce(t, cl)
	const crashSpeed = 800
	if out, err := cl.Run(append(append([]string{}, args...), "-s", fmt.Sprint(crashSpeed))...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	kills := 0
	for crash := 0; crash < 2; crash++ {
		time.Sleep(400 * time.Millisecond) // the run goes on between kills
		r := lfsckQuery(t, cl)
		ns := r.Components["namespace"]
		if !r.Running || (ns.Status != "scanning-phase1" && ns.Status != "scanning-phase2") {
			t.Fatalf("before kill -9 %d: the check is not running (%s): too fast to be killed", crash+1, summary(r))
		}
		ckpt := ns.LastCheckpointPosition
		// The query shows a checkpoint as it is proposed; once it shows
		// the next one (written every 100 ms), that one is in the store
		// and the kill comes after it.
		wait.For(t, 10*time.Second, "the checkpoint after the one seen", func() bool {
			return lfsckQuery(t, cl).Components["namespace"].LastCheckpoint != ns.LastCheckpoint
		})
		cl.Kill("mdt0", syscall.SIGKILL) // returns once the process is gone
		kills++
		cl.Restart()
		// Until the restarted MDT leads and resumes the run, the query
		// shows the killed run as crashed (not running).
		r = waitRunningOr(t, cl, "namespace", 30*time.Second, "completed")
		ns = r.Components["namespace"]
		t.Logf("after kill -9 %d: %s, resumed at %d (checkpoint seen before the kill: %d)", crash+1, ns.Status, ns.LatestStartPosition, ckpt)
		if ns.LatestStartPosition == 0 || ns.LatestStartPosition < ckpt {
			t.Fatalf("after kill -9 %d the run started at %d, not at its checkpoint (%d or later)", crash+1, ns.LatestStartPosition, ckpt)
		}
		if r.Params.SpeedLimit != crashSpeed {
			t.Fatalf("after kill -9 %d the run resumed with speed limit %d, not its own (%d)", crash+1, r.Params.SpeedLimit, crashSpeed)
		}
	}
	if kills != 2 {
		t.Fatalf("%d kills", kills)
	}
	got = counters(waitStatus(t, cl, "namespace", 60*time.Second, "completed"))
	if got != want {
		t.Fatalf("after kill -9: %s\nuninterrupted: %s", got, want)
	}

	// A graceful stop of the MDS pauses the check; it resumes at start.
	damageSet(t, ctx, cl, c, "d", 300)
	quiesce(t, cl)
	if out, err := cl.Run("fault", "arm", "lfsck.scan.object=delay:2ms", "--target", "mdt0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := cl.Run(args...); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	time.Sleep(400 * time.Millisecond) // the run gets going
	cl.Kill("mdt0", syscall.SIGTERM)   // returns once the process is gone
	if log, _ := os.ReadFile(filepath.Join(cl.TargetDir("mdt0"), "serve.log")); !strings.Contains(string(log), `"status":"paused"`) {
		t.Fatal("the MDS did not pause the check when it stopped")
	}
	cl.Restart()
	got = counters(waitStatus(t, cl, "namespace", 60*time.Second, "completed"))
	if got != want {
		t.Fatalf("after a pause: %s\nuninterrupted: %s", got, want)
	}
	if f, _ := found(lfsckRun(t, cl, append([]string{"-r"}, scenarioFlags...)...)); f != 0 {
		t.Fatal("a run after the repairs still finds inconsistencies")
	}
}

// TestLfsckUnderClientLoad runs real checks (every repair allowed) while
// clients create, write, rename, link and remove: nothing is found or
// repaired (an unlink or rename in flight is not an inconsistency).
func TestLfsckUnderClientLoad(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c := cl.Client(t)
	var dirs []fid.FID
	for i := 0; i < 4; i++ {
		d, err := c.Mkdir(context.Background(), fid.Root, fmt.Sprintf("load%d", i), 0o755)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, fid.FromPB(d.Fid))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	ops := 0
	for w := 0; w < 3; w++ {
		wc := cl.Client(t)
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for n := 0; ctx.Err() == nil; n++ {
				d, d2 := dirs[rng.Intn(4)], dirs[rng.Intn(4)]
				name := fmt.Sprintf("w%d.%d", w, rng.Intn(200))
				switch rng.Intn(5) {
				case 0, 1:
					ino, _, err := wc.Create(ctx, d, name, 0o644, client.CreateOpts{Layout: nil})
					if err == nil {
						f := wc.OpenInode(ino)
						f.WriteAt(ctx, []byte("some data"), 0)
						f.Close(ctx)
					}
				case 2:
					wc.Rename(ctx, d, name, d2, fmt.Sprintf("w%d.%d", w, rng.Intn(200)), 0)
				case 3:
					wc.Unlink(ctx, d, name)
				case 4:
					if ino, err := wc.Lookup(ctx, d, name); err == nil {
						wc.Link(ctx, fid.FromPB(ino.Fid), d2, fmt.Sprintf("l%d.%d", w, n))
					}
				}
				mu.Lock()
				ops++
				mu.Unlock()
			}
		}(w)
	}
	time.Sleep(time.Second) // the clients get going
	for i := 0; i < 5; i++ {
		r := lfsckRun(t, cl, "-r", "-o", "-c", "-C", "-s", "4000")
		if f, rp := found(r); f != 0 || rp != 0 {
			stop()
			wg.Wait()
			t.Fatalf("run %d under load: %s", i, summary(r))
		}
	}
	stop()
	wg.Wait()
	t.Logf("%d client operations during five checks", ops)
	if ops < 100 {
		t.Fatalf("only %d client operations", ops)
	}
	quiesce(t, cl)
	if r := lfsckRun(t, cl, "-r", "-o"); func() bool { f, _ := found(r); return f != 0 }() {
		t.Fatalf("after the load: %s", summary(r))
	}
}

// TestLfsckStopWithAnOSTDown: with an OST killed, the layout check skips
// its objects (partial, no orphan decisions for it) and stop returns at
// once.
func TestLfsckStopWithAnOSTDown(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	buildLTree(t, ctx, c, "t")
	cl.Kill("ost1", syscall.SIGKILL)
	// start --wait says the run did not complete (exit 1), after the report.
	out, err := cl.Run("lfsck", "start", "--wait", "--json", "-r", "-o", "-t", "layout")
	if err == nil || !strings.Contains(out, "layout partial on") {
		t.Fatalf("lfsck start --wait with OST1 down: %v, want exit 1 naming the partial layout check\n%s", err, out)
	}
	r := parseReport(t, out)
	lc := r.Components["layout"]
	if f, _ := found(r); f != 0 || lc.Status != "partial" || len(lc.IncompleteOSTs) == 0 {
		t.Fatalf("with OST1 down: %s %+v", summary(r), lc)
	}
	// The text query names what "partial" left out.
	if out, err := cl.Run("lfsck", "query"); err != nil || !strings.Contains(out, "not checked on OST0001") {
		t.Fatalf("lfsck query with OST1 down does not name it: %v\n%s", err, out)
	}
	// A run of another component leaves the layout check's "partial" and
	// its reason alone (it cleared the reason, not the status).
	lfsckRun(t, cl, "-t", "namespace")
	if out, err := cl.Run("lfsck", "query"); err != nil || !strings.Contains(out, "not checked on OST0001") {
		t.Fatalf("after a namespace run, lfsck query no longer says why the layout check is partial: %v\n%s", err, out)
	}
	// About a dozen objects: 300 ms each keeps the run going for seconds,
	// past a stop that a loaded machine takes a while to start.
	if out, err := cl.Run("fault", "arm", "lfsck.scan.object=delay:300ms", "--target", "mdt0"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if out, err := cl.Run("lfsck", "start", "-r", "-t", "layout"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	time.Sleep(300 * time.Millisecond) // the run gets going
	t0 := time.Now()
	if out, err := cl.Run("lfsck", "stop"); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Fatalf("stop took %v", d)
	}
	if s := lfsckQuery(t, cl).Components["layout"].Status; s != "stopped" {
		t.Fatalf("status after stop: %s", s)
	}
	cl.Run("fault", "arm", "lfsck.scan.object=off", "--target", "mdt0")
	cl.Restart()
	// Right after the restart the MDT may not reach OST1 yet (the run is
	// partial and start --wait exits 1): try again until it does.
	wait.NoErr(t, 20*time.Second, "an lfsck run that reaches every OST", func() error {
		out, err = cl.Run("lfsck", "start", "--wait", "--json", "-r", "-o")
		if err != nil && !strings.Contains(out, "partial on") {
			t.Fatalf("lfsck after the OST came back: %v\n%s", err, out)
		}
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	if f, _ := found(parseReport(t, out)); f != 0 {
		t.Fatal("inconsistencies after the OST came back")
	}
}

// buildRestoreTree makes what the restore scenarios back up: the checker
// tests' tree at /r and 200 files in /many (whose FID it returns).
func buildRestoreTree(t *testing.T, ctx context.Context, c *client.Client) (*ltree, fid.FID) {
	t.Helper()
	tr := buildLTree(t, ctx, c, "r")
	d, err := c.Mkdir(ctx, fid.Root, "many", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	df := fid.FromPB(d.Fid)
	for i := 0; i < 200; i++ {
		if _, _, err := c.Create(ctx, df, fmt.Sprintf("f%d", i), 0o644, client.CreateOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	return tr, df
}

// backupAndRestoreMDT stops the MDT, backs it up file by file and
// restores it from that backup, as seed 003's admin does (new local keys,
// a stale OI).
func backupAndRestoreMDT(t *testing.T, cl *testcluster.Cluster) {
	t.Helper()
	cl.Kill("mdt0", syscall.SIGTERM) // returns once the process is gone
	bak := filepath.Join(t.TempDir(), "mdt0.bak")
	if out, err := cl.Run("mdt", "backup", "--dir", cl.TargetDir("mdt0"), "--out", bak); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	if st, err := os.Stat(bak); err != nil || st.Size() == 0 {
		t.Fatalf("backup file: %v", err)
	}
	if out, err := cl.Run("mdt", "restore", "--dir", cl.TargetDir("mdt0"), "--from", bak); err != nil {
		t.Fatalf("restore: %v\n%s", err, out)
	}
}

// TestMDTBackupRestoreRebuildsTheOI is seed 003's restore scenario: an MDT
// is backed up file by file and restored with new local keys; at start
// the MDT finds its OI stale and rebuilds it with an OI scrub by itself;
// then every file reads back and the namespace and layout are consistent.
func TestMDTBackupRestoreRebuildsTheOI(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	tr, _ := buildRestoreTree(t, ctx, c)
	backupAndRestoreMDT(t, cl)
	cl.Restart()
	r := waitStatus(t, cl, "scrub", 60*time.Second, "completed")
	sc := r.Components["scrub"]
	if sc.Counters["stale"].Repaired < 200 {
		t.Fatalf("the OI scrub after restore: %s", summary(r))
	}
	t.Logf("OI scrub after restore: %s", summary(r))
	mustRead(t, ctx, c, "/r/f1", tr.data1)
	mustRead(t, ctx, c, "/r/e/only", tr.dataOnly)
	if _, err := c.Resolve(ctx, "/many/f199", true); err != nil {
		t.Fatal(err)
	}
	if f, _ := found(lfsckRun(t, cl, "-r", "-o")); f != 0 {
		t.Fatal("inconsistent after the restore and the scrub")
	}
}

// TestRestoredMDTServesAtOnce: right after a restored MDT starts, while
// its OI scrub has not started or runs (slowed here to last seconds),
// reads and changes succeed: the MDS waits for the rebuilt index instead
// of answering EIO with advice to run the scrub that is already running.
func TestRestoredMDTServesAtOnce(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	c := cl.Client(t)
	ctx := context.Background()
	tr, df := buildRestoreTree(t, ctx, c)
	backupAndRestoreMDT(t, cl)
	// About 10 ms per object: the scrub takes seconds.
	t.Setenv("NACRE_FAULTS", "lfsck.scan.object=delay:10ms")
	cl.Restart()
	start := time.Now()
	if _, err := c.Resolve(ctx, "/many/f199", true); err != nil {
		t.Fatalf("lookup right after the restored MDT started: %v", err)
	}
	mustRead(t, ctx, c, "/r/f1", tr.data1)
	if _, _, err := c.Create(ctx, df, "new", 0o644, client.CreateOpts{}); err != nil {
		t.Fatalf("create right after the restored MDT started: %v", err)
	}
	ents, err := c.ReadDirAll(ctx, df, true)
	if err != nil || len(ents) != 201 {
		t.Fatalf("listing right after the restored MDT started: %d entries, %v; want 201", len(ents), err)
	}
	t.Logf("first requests answered within %s of the start", time.Since(start).Round(time.Millisecond))
	r := waitStatus(t, cl, "scrub", 60*time.Second, "completed")
	if r.Components["scrub"].Counters["stale"].Repaired < 200 {
		t.Fatalf("the OI scrub after restore: %s", summary(r))
	}
}

// waitRunningOr polls until a check runs, or component has one of the
// statuses.
func waitRunningOr(t *testing.T, cl *testcluster.Cluster, component string, timeout time.Duration, statuses ...string) *lfsck.Report {
	t.Helper()
	var last *lfsck.Report
	wait.NoErr(t, timeout, fmt.Sprintf("a check running, or %s %v", component, statuses), func() error {
		out, err := cl.Run("lfsck", "query", "--json")
		if err != nil {
			return fmt.Errorf("lfsck query: %v", err)
		}
		last = parseReport(t, out)
		if last.Running || slices.Contains(statuses, last.Components[component].Status) {
			return nil
		}
		return fmt.Errorf("last: %v", last)
	})
	return last
}

// TestLfsckRepairsTheNlinkOfABusyDirectory: a directory whose nlink is
// wrong while clients keep making and removing subdirectories in it is
// repaired in one run. Before, the repair was conditioned on the
// directory's record at the scan, which the clients had always changed by
// the time it was applied: it was dropped, unreported, and the wrong
// count stayed.
func TestLfsckRepairsTheNlinkOfABusyDirectory(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	c := cl.Client(t)
	ctx := context.Background()
	busy, err := c.Mkdir(ctx, fid.Root, "busy", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	bf := fid.FromPB(busy.Fid)
	for i := 0; i < 20; i++ {
		if _, err := c.Mkdir(ctx, bf, fmt.Sprintf("s%d", i), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := cl.Run("fault", "inject", "dir_nlink", "--path", "/busy", "--yes"); err != nil {
		t.Fatalf("inject: %v\n%s", err, out)
	}
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		var err error
		for i := 0; err == nil; i++ {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			name := fmt.Sprintf("t%d", i)
			if _, err = c.Mkdir(ctx, bf, name, 0o755); err == nil {
				err = c.Rmdir(ctx, bf, name)
			}
		}
		done <- err
	}()
	// Slow enough that the busy directory changes between the scan and
	// the repair.
	r := lfsckRun(t, cl, "-r", "-t", "namespace", "-s", "40")
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the clients' mkdir and rmdir: %v", err)
	}
	if got := r.Components["namespace"].Counters["nlinks"]; got.Inconsistent != 1 || got.Repaired != 1 {
		t.Fatalf("with clients busy in the directory: want nlinks 1 found and repaired, got %s", summary(r))
	}
	ino, err := c.Getattr(ctx, bf)
	if err != nil || ino.Nlink != 22 {
		t.Fatalf("after the run, /busy has nlink %d (%v), want 22", ino.GetNlink(), err)
	}
	if again := lfsckRun(t, cl, "-r", "-t", "namespace"); func() bool { f, _ := found(again); return f != 0 }() {
		t.Fatalf("second run: %s", summary(again))
	}
}

// TestLfsckRebuildsAHardLinkedFileWithEveryName: a file with two names
// whose MDT object is lost is rebuilt, in one run, with both names in its
// linkEA and nlink 2: from its directory entries with -C, and from its OST
// objects into lost+found with -o (where its other name keeps naming it).
// Before, the rebuilt object had nlink 1 until a second run, and removing
// one name (the lost+found one an admin cleans up) destroyed the data the
// other still named.
func TestLfsckRebuildsAHardLinkedFileWithEveryName(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	data := patterned(70000, 7)
	for _, k := range []struct{ kind, flags string }{{"dangling", "-C"}, {"lost_mdt_object", "-o"}} {
		t.Run(k.kind, func(t *testing.T) {
			x, err := c.Mkdir(ctx, fid.Root, "x-"+k.kind, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			y, err := c.Mkdir(ctx, fid.Root, "y-"+k.kind, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			f := writeFile(t, ctx, c, fid.FromPB(x.Fid), "b", 2, data)
			if _, err := c.Link(ctx, f, fid.FromPB(y.Fid), "b2"); err != nil {
				t.Fatal(err)
			}
			if out, err := cl.Run("fault", "inject", k.kind, "--path", "/x-"+k.kind+"/b", "--yes"); err != nil {
				t.Fatalf("inject: %v\n%s", err, out)
			}
			r := lfsckRun(t, cl, "-r", "-o", "-c", k.flags)
			again := lfsckRun(t, cl, "-r", "-o", "-c", k.flags)
			if f, _ := found(again); f != 0 {
				t.Errorf("after one run with %s, a second finds %s", k.flags, summary(again))
			}
			ino, err := c.Resolve(ctx, "/y-"+k.kind+"/b2", true)
			if err == nil {
				ino, err = c.GetattrLinks(ctx, fid.FromPB(ino.Fid))
			}
			if err != nil {
				t.Fatalf("the second name after the run: %v (%s)", err, summary(r))
			}
			if ino.Nlink != 2 || len(ino.Links) != 2 {
				t.Fatalf("the rebuilt object has nlink %d and %d linkEA names, want 2 and 2 (%s)", ino.Nlink, len(ino.Links), summary(r))
			}
			// Remove the name that is not y/b2: the object stays.
			paths, err := c.Fid2Path(ctx, fid.FromPB(ino.Fid))
			var other string
			for _, p := range paths {
				if p != "/y-"+k.kind+"/b2" {
					other = p
				}
			}
			if err != nil || len(paths) != 2 || other == "" {
				t.Fatalf("fid2path of the rebuilt object: %q, %v; want two paths", paths, err)
			}
			if out, err := cl.Run("rm", other); err != nil {
				t.Fatalf("rm %s: %v\n%s", other, err, out)
			}
			out, err := cl.Run("cat", "/y-"+k.kind+"/b2")
			if err != nil {
				t.Fatalf("after rm %s, the other name: %v\n%s", other, err, out)
			}
			if k.kind == "lost_mdt_object" && out != string(data) {
				t.Fatalf("after rm %s, the other name reads %d bytes, not the file's %d", other, len(out), len(data))
			}
		})
	}
}

// TestLfsckARefusedRepairIsAFailure: a repair that apply refuses (here an
// adoption, with /.nacre/lost+found taken by a user's file) counts as
// found and failed, is logged, and with -e failout ends the run failed
// (exit 1). Before, the run said "completed", inconsistent 0, and nothing
// was logged. /.nacre itself is reserved: no client may make it.
func TestLfsckARefusedRepairIsAFailure(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 1})
	for _, args := range [][]string{{"mkdir", "/.nacre"}, {"put", "/etc/hostname", "/.nacre"}} {
		if out, err := cl.Run(args...); err == nil || !strings.Contains(out, "reserved") {
			t.Errorf("nacre %v: want a refusal saying /.nacre is reserved, got %v: %s", args, err, out)
		}
	}
	// The checker makes /.nacre/lost+found for a first orphan; the user
	// empties and removes it, and puts a file there.
	for _, cmd := range [][]string{
		{"put", "/etc/hostname", "/a"}, {"fault", "inject", "orphan", "--path", "/a", "--yes"},
		{"lfsck", "start", "-A", "-o", "--wait"},
	} {
		if out, err := cl.Run(cmd...); err != nil {
			t.Fatalf("nacre %v: %v\n%s", cmd, err, out)
		}
	}
	out, err := cl.Run("ls", "/.nacre/lost+found")
	if err != nil || len(strings.Fields(out)) != 1 {
		t.Fatalf("lost+found after the adoption: %v\n%s", err, out)
	}
	for _, cmd := range [][]string{
		{"rm", "-r", "/.nacre/lost+found"},
		{"put", "/etc/hostname", "/.nacre/lost+found"},
		{"put", "/etc/hostname", "/b"}, {"fault", "inject", "orphan", "--path", "/b", "--yes"},
	} {
		if out, err := cl.Run(cmd...); err != nil {
			t.Fatalf("nacre %v: %v\n%s", cmd, err, out)
		}
	}
	out, err = cl.Run("lfsck", "start", "-A", "-r", "-o", "-t", "namespace", "-e", "failout", "--wait", "--json")
	if err == nil {
		t.Fatalf("a refused adoption with -e failout: exit 0\n%s", out)
	}
	r := parseReport(t, out)
	ns := r.Components["namespace"]
	if ns.Status != "failed" || ns.Failed == 0 || ns.Counters["orphan"].Inconsistent != 1 || ns.Counters["orphan"].Repaired != 0 {
		t.Fatalf("with -e failout: want namespace failed, orphan 1 found 0 repaired, a failure; got %s failed=%d", summary(r), ns.Failed)
	}
	r = lfsckRun(t, cl, "-r", "-o", "-t", "namespace")
	ns = r.Components["namespace"]
	if ns.Status != "completed" || ns.Failed == 0 || ns.Counters["orphan"].Inconsistent != 1 {
		t.Fatalf("without failout: want completed with the failure counted; got %s failed=%d", summary(r), ns.Failed)
	}
	if log, _ := os.ReadFile(filepath.Join(cl.TargetDir("mdt0"), proc.LogFile)); !strings.Contains(string(log), "repair refused") || !strings.Contains(string(log), "/.nacre/lost+found is taken") {
		t.Errorf("the MDT's log does not say which repair was refused and why")
	}
}

// TestAChownReachesTheOSTObjects: a chown of a written and synced file
// gives its OST objects the new owner (as Lustre's MDT does), so the
// layout check finds nothing after it; with an OST down the chown still
// works at once, and the layout check repairs the owner that OST's object
// missed (MDT wins). The new owner survives a kill -9 of the OST. Before, the objects kept the old owner and a real run
// could not repair a synced object: a dry run reported inconsistent_owner
// and every real run said 0, run after run.
func TestAChownReachesTheOSTObjects(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	c := cl.Client(t)
	ctx := context.Background()
	chown := func(name string, uid uint32) {
		t.Helper()
		f, err := c.Lookup(ctx, fid.Root, name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Setattr(ctx, &pb.SetattrOp{Fid: f.Fid, Valid: uint32(pb.SetattrValid_SETATTR_UID | pb.SetattrValid_SETATTR_GID), Uid: uid, Gid: uid}); err != nil {
			t.Fatalf("chown %s: %v", name, err)
		}
	}
	for _, name := range []string{"a", "b"} {
		f := writeFile(t, ctx, c, fid.Root, name, 2, patterned(200<<10, 7))
		o := c.OpenInode(mustGetattr(t, ctx, c, f))
		if err := o.Sync(ctx); err != nil {
			t.Fatal(err)
		}
		o.Close(ctx)
	}
	chown("a", 1234)
	c.Settle() // the OSTs get the owner in the background
	if r := lfsckRun(t, cl, "-r", "-n", "-t", "layout"); func() bool { f, _ := found(r); return f != 0 }() {
		t.Fatalf("after a chown: %s", summary(r))
	}
	// The objects' new owner is durable.
	cl.Kill("ost1", syscall.SIGKILL)
	cl.Restart()
	if r := layoutOnceAllAnswer(t, cl, "-n"); func() bool { f, _ := found(r); return f != 0 }() {
		t.Fatalf("after a chown and a kill -9 of OST0001: %s", summary(r))
	}

	cl.Kill("ost1", syscall.SIGKILL)
	t0 := time.Now()
	chown("b", 4321)
	if d := time.Since(t0); d > 2*time.Second {
		t.Fatalf("a chown with an OST down took %v: it does not wait for the OSTs", d)
	}
	c.Settle()
	cl.Restart()
	want := func(r *lfsck.Report, found, repaired uint64) {
		t.Helper()
		if got := r.Components["layout"].Counters["inconsistent_owner"]; got.Inconsistent != found || got.Repaired != repaired {
			t.Fatalf("want inconsistent_owner %d found, %d repaired; got %s", found, repaired, summary(r))
		}
	}
	want(layoutOnceAllAnswer(t, cl, "-n"), 1, 0)
	want(lfsckRun(t, cl, "-r", "-t", "layout"), 1, 1)
	want(lfsckRun(t, cl, "-r", "-t", "layout"), 0, 0)
	mustRead(t, ctx, c, "/b", patterned(200<<10, 7))
}

// layoutOnceAllAnswer runs the layout check (with args) until it is not
// partial: right after a restart the MDT may not reach every OST yet.
func layoutOnceAllAnswer(t *testing.T, cl *testcluster.Cluster, args ...string) *lfsck.Report {
	t.Helper()
	var out string
	wait.NoErr(t, 20*time.Second, "a layout check that reaches every OST", func() error {
		var err error
		out, err = cl.Run(append([]string{"lfsck", "start", "--wait", "--json", "-r", "-t", "layout"}, args...)...)
		if err != nil && !strings.Contains(out, "partial on") {
			t.Fatalf("lfsck after the OST came back: %v\n%s", err, out)
		}
		if err != nil {
			return fmt.Errorf("%v\n%s", err, out)
		}
		return nil
	})
	return parseReport(t, out)
}
