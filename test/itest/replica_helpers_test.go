package itest

import (
	"context"
	"crypto/sha256"
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

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/localcluster"
	"nacre/internal/raftgroup"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// Helpers of the replication tests (replica_*_test.go): a cluster whose
// MGS and MDT are three-replica Raft groups, each replica its own process
// (mgs-r1..3, mdt0-r1..3), a namespace workload that records what the
// servers acknowledged, and the checks run after failovers.

func startReplicated(t *testing.T, env ...string) *testcluster.Cluster {
	t.Helper()
	return testcluster.Start(t, testcluster.Options{OSTs: 2, Replicas: 3, Env: env})
}

// replicaAddr is the gRPC (and Raft) address of a replica's process.
func replicaAddr(t *testing.T, cl *testcluster.Cluster, name string) string {
	t.Helper()
	id, err := target.Load(cl.TargetDir(name))
	if err != nil {
		t.Fatal(err)
	}
	return id.Listen
}

// members asks one replica about its group (nil if it does not answer).
func members(addr string) *pb.RaftMembersReply {
	cc, err := grpcx.Dial(addr)
	if err != nil {
		return nil
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r, err := nacregrpc.NewRaftAdminClient(cc).Members(ctx, &pb.RaftMembersRequest{})
	if err != nil {
		return nil
	}
	return r
}

// replicaNames lists the replica directories of a group ("mdt0", "mgs").
func replicaNames(t *testing.T, cl *testcluster.Cluster, group string) []string {
	t.Helper()
	ds, err := filepath.Glob(filepath.Join(cl.Dir, group+"-r*"))
	if err != nil || len(ds) == 0 {
		t.Fatalf("no replicas of %s in %s", group, cl.Dir)
	}
	var out []string
	for _, d := range ds {
		out = append(out, filepath.Base(d))
	}
	sort.Strings(out)
	return out
}

// waitLeader waits until a replica of group other than the excluded ones
// leads (as the replicas themselves say) and returns its name.
func waitLeader(t *testing.T, cl *testcluster.Cluster, group string, exclude ...string) string {
	t.Helper()
	var best string
	wait.For(t, 20*time.Second, fmt.Sprintf("a leader of %s among the replicas (excluding %v)", group, exclude), func() bool {
		var term uint64
		for _, n := range replicaNames(t, cl, group) {
			if slices.Contains(exclude, n) {
				continue
			}
			if m := members(replicaAddr(t, cl, n)); m != nil && m.State == "leader" && m.Term >= term {
				best, term = n, m.Term
			}
		}
		return best != ""
	})
	return best
}

// isolate cuts a replica's process off from the other replicas (the
// raftgroup fault point), or heals it.
func isolate(t *testing.T, cl *testcluster.Cluster, name string, on bool) {
	t.Helper()
	cc, err := grpcx.Dial(replicaAddr(t, cl, name))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	action := "error"
	if !on {
		action = "off"
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := nacregrpc.NewFaultClient(cc).Arm(ctx, &pb.FaultArmRequest{Point: raftgroup.FaultIsolate, Action: action}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("arm %s on %s: %v", raftgroup.FaultIsolate, name, err)
	}
}

// opLog records when acknowledged operations completed, for the stall.
type opLog struct {
	mu    sync.Mutex
	done  []time.Time
	slow  time.Duration // the longest single operation
	slowW string
}

func (l *opLog) note(start time.Time, what string) {
	now := time.Now()
	l.mu.Lock()
	l.done = append(l.done, now)
	if d := now.Sub(start); d > l.slow {
		l.slow, l.slowW = d, what
	}
	l.mu.Unlock()
}

// stall is the longest time in [from, to] during which no operation
// completed.
func (l *opLog) stall(from, to time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := append([]time.Time(nil), l.done...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
	prev, worst := from, time.Duration(0)
	for _, x := range ts {
		if x.Before(from) {
			continue
		}
		if x.After(to) {
			break
		}
		worst = max(worst, x.Sub(prev))
		prev = x
	}
	return max(worst, to.Sub(prev))
}

// nsEntry is what the workload expects one name to be.
type nsEntry struct {
	dir   bool
	mode  uint32
	nlink uint32
	size  int
	sum   [32]byte
	key   string // names sharing an inode share the key
}

// nsWorker runs namespace operations on unique names in its own
// directory and keeps the model of what that directory must hold. Every
// operation must succeed: one executed twice (a retry that was not
// recognised) fails with EEXIST or ENOENT.
type nsWorker struct {
	c    *client.Client
	dir  fid.FID
	name string
	r    *rand.Rand
	log  *opLog

	mu    sync.Mutex
	model map[string]*nsEntry
	ops   map[string]int
}

func newNSWorker(t *testing.T, c *client.Client, name string, log *opLog) *nsWorker {
	t.Helper()
	ino, err := c.Mkdir(context.Background(), fid.Root, name, 0o755)
	if err != nil {
		t.Fatalf("mkdir %s: %v", name, err)
	}
	return &nsWorker{c: c, dir: fid.FromPB(ino.Fid), name: name, r: rand.New(rand.NewSource(int64(len(name)) * 7919)),
		log: log, model: map[string]*nsEntry{}, ops: map[string]int{}}
}

// run works until stop is closed; operations are never cancelled midway,
// so each one's outcome is known.
func (w *nsWorker) run(stop <-chan struct{}) error {
	ctx := context.Background()
	c := w.c
	do := func(what string, f func() error) error {
		start := time.Now()
		if err := f(); err != nil {
			return fmt.Errorf("%s/%s: %w", w.name, what, err)
		}
		w.log.note(start, w.name+"/"+what)
		w.mu.Lock()
		w.ops[strings.Fields(what)[0]]++
		w.mu.Unlock()
		return nil
	}
	set := func(n string, e *nsEntry) {
		w.mu.Lock()
		if e == nil {
			delete(w.model, n)
		} else {
			w.model[n] = e
		}
		w.mu.Unlock()
	}
	get := func(n string) *nsEntry {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.model[n]
	}
	prev := ""
	for i := 0; ; i++ {
		select {
		case <-stop:
			return nil
		default:
		}
		name := fmt.Sprintf("f%05d", i)
		var ino *pb.Inode
		sc := int32(1 + w.r.Intn(2))
		if err := do("create "+name, func() (err error) {
			ino, _, err = c.Create(ctx, w.dir, name, 0o644, client.CreateOpts{Exclusive: true, Layout: &pb.Layout{StripeCount: sc, StripeSize: 65536}})
			return
		}); err != nil {
			return err
		}
		e := &nsEntry{mode: 0o644, nlink: 1, key: name}
		set(name, e)
		if i%3 == 0 {
			data := make([]byte, 1+w.r.Intn(100000))
			w.r.Read(data)
			if err := do("write "+name, func() error {
				f := c.OpenInode(ino)
				if _, err := f.WriteAt(ctx, data, 0); err != nil {
					return err
				}
				return f.Close(ctx)
			}); err != nil {
				return err
			}
			e.size, e.sum = len(data), sha256.Sum256(data)
		}
		if i%2 == 0 {
			if err := do("setattr "+name, func() error {
				_, err := c.Setattr(ctx, &pb.SetattrOp{Fid: ino.Fid, Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o600})
				return err
			}); err != nil {
				return err
			}
			e.mode = 0o600
		}
		cur := name
		if i%4 == 1 {
			ln := fmt.Sprintf("l%05d", i)
			if err := do("link "+ln, func() error { _, err := c.Link(ctx, fid.FromPB(ino.Fid), w.dir, ln); return err }); err != nil {
				return err
			}
			e.nlink = 2
			set(ln, e)
		}
		if i%2 == 1 {
			rn := fmt.Sprintf("r%05d", i)
			if err := do("rename "+name+" "+rn, func() error { return c.Rename(ctx, w.dir, name, w.dir, rn, 0) }); err != nil {
				return err
			}
			set(name, nil)
			set(rn, e)
			cur = rn
		}
		if i%5 == 0 {
			dn := fmt.Sprintf("d%05d", i)
			if err := do("mkdir "+dn, func() error { _, err := c.Mkdir(ctx, w.dir, dn, 0o755); return err }); err != nil {
				return err
			}
			set(dn, &nsEntry{dir: true, mode: 0o755, nlink: 2, key: dn})
		}
		// Remove the previous file by one of its names.
		if prev != "" && i%3 != 2 {
			if pe := get(prev); pe != nil {
				if err := do("unlink "+prev, func() error { _, err := c.Unlink(ctx, w.dir, prev); return err }); err != nil {
					return err
				}
				set(prev, nil)
				pe.nlink--
			}
		}
		prev = cur
	}
}

// verify compares the directory with the model: names, types, modes,
// link counts and contents.
func (w *nsWorker) verify(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	w.mu.Lock()
	defer w.mu.Unlock()
	ents, err := c.ReadDirAll(ctx, w.dir, false)
	if err != nil {
		t.Fatalf("readdir %s: %v", w.name, err)
	}
	got := map[string]*pb.DirEntry{}
	for _, e := range ents {
		if n := string(e.Name); n == "." || n == ".." {
			continue
		}
		got[string(e.Name)] = e
	}
	for n := range got {
		if w.model[n] == nil {
			t.Errorf("%s/%s exists but was removed (or never acknowledged)", w.name, n)
		}
	}
	for n, e := range w.model {
		de := got[n]
		if de == nil {
			t.Errorf("%s/%s was acknowledged but is missing", w.name, n)
			continue
		}
		st, err := c.Stat(ctx, fid.FromPB(de.Fid))
		if err != nil {
			t.Errorf("stat %s/%s: %v", w.name, n, err)
			continue
		}
		if st.Mode&0o7777 != e.mode || st.Nlink != e.nlink || (st.Mode&syscall.S_IFMT == syscall.S_IFDIR) != e.dir {
			t.Errorf("%s/%s: mode %o nlink %d, want mode %o nlink %d dir %v", w.name, n, st.Mode, st.Nlink, e.mode, e.nlink, e.dir)
		}
		if !e.dir && e.size > 0 {
			data := readFileAll(t, ctx, c.OpenInode(st))
			if len(data) != e.size || sha256.Sum256(data) != e.sum {
				t.Errorf("%s/%s: %d bytes after failover, want %d (or different content)", w.name, n, len(data), e.size)
			}
		}
	}
}

// checkUniqueObjects walks the namespace: no FID and no OST object may be
// used by two different files (precreate pools and sequence grants across
// leader changes).
func checkUniqueObjects(t *testing.T, c *client.Client) {
	t.Helper()
	ctx := context.Background()
	fids := map[fid.FID]string{}
	objs := map[[3]uint64]string{}
	var walk func(dir fid.FID, path string)
	walk = func(dir fid.FID, path string) {
		ents, err := c.ReadDirAll(ctx, dir, false)
		if err != nil {
			t.Fatalf("readdir %s: %v", path, err)
		}
		for _, e := range ents {
			if n := string(e.Name); n == "." || n == ".." {
				continue
			}
			f := fid.FromPB(e.Fid)
			p := path + "/" + string(e.Name)
			ino, err := c.Getattr(ctx, f)
			if err != nil {
				t.Fatalf("getattr %s: %v", p, err)
			}
			if other, ok := fids[f]; ok {
				if ino.Nlink < 2 {
					t.Errorf("FID %s used by %s and %s", f, other, p)
				}
				continue // a hard link
			}
			fids[f] = p
			if ino.Mode&syscall.S_IFMT == syscall.S_IFDIR {
				walk(f, p)
				continue
			}
			if ino.Layout != nil {
				for _, o := range ino.Layout.Objects {
					k := [3]uint64{uint64(o.Ost), o.Seq, o.Oid}
					if other, ok := objs[k]; ok {
						t.Errorf("OST%04x object %#x:%d used by %s and %s", o.Ost, o.Seq, o.Oid, other, p)
					}
					objs[k] = p
				}
			}
		}
	}
	walk(fid.Root, "")
	t.Logf("namespace: %d objects, %d OST objects, all distinct", len(fids), len(objs))
}

// checkClean runs the checker (dry run) and fails on any inconsistency.
func checkClean(t *testing.T, cl *testcluster.Cluster) {
	t.Helper()
	r := lfsckRun(t, cl, "-n", "-r")
	if inc, _ := found(r); inc != 0 {
		t.Fatalf("lfsck found %d inconsistencies after the failovers: %s", inc, summary(r))
	}
	t.Logf("lfsck: clean (%s)", summary(r))
}

// waitStatusLeader waits until the MGS reports the given replica of MDT0
// as its leader (clients and tools route by it).
func waitStatusLeader(t *testing.T, c *client.Client, replica string) {
	t.Helper()
	var want uint64
	fmt.Sscanf(replica[strings.LastIndex(replica, "-r")+2:], "%d", &want)
	wait.For(t, 15*time.Second, fmt.Sprintf("the MGS to report %s as the leader", replica), func() bool {
		cfg, err := c.Config(context.Background())
		if err != nil {
			return false
		}
		return slices.ContainsFunc(cfg.Targets, func(ti *pb.TargetInfo) bool {
			return ti.Kind == pb.TargetKind_TARGET_MDT && ti.Leader && ti.ReplicaId == want
		})
	})
}

func pidOf(t *testing.T, cl *testcluster.Cluster, name string) int {
	pid, err := proc.ReadPid(cl.TargetDir(name))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// keepLogs copies every target's log (and extra files) out of the test's
// temporary directory, for a failure that needs the whole story.
func keepLogs(t *testing.T, cl *testcluster.Cluster, extra ...string) {
	dst, err := os.MkdirTemp("", "nacre-"+t.Name()+"-")
	if err != nil {
		return
	}
	dirs, _ := localcluster.Dirs(cl.Dir)
	for _, d := range dirs {
		if b, err := os.ReadFile(filepath.Join(d, proc.LogFile)); err == nil {
			os.WriteFile(filepath.Join(dst, filepath.Base(d)+".log"), b, 0o644)
		}
	}
	for _, f := range extra {
		if b, err := os.ReadFile(f); err == nil {
			os.WriteFile(filepath.Join(dst, filepath.Base(f)), b, 0o644)
		}
	}
	t.Logf("logs kept in %s", dst)
}

// aFollower is a replica of group other than leader.
func aFollower(t *testing.T, cl *testcluster.Cluster, group, leader string) string {
	t.Helper()
	for _, n := range replicaNames(t, cl, group) {
		if n != leader {
			return n
		}
	}
	t.Fatalf("%s has no replica besides its leader %s", group, leader)
	return ""
}

// nsWorkload is nsWorkers, each on a client of its own, running until
// finish; the test's end stops them if it comes first.
type nsWorkload struct {
	log  *opLog
	ws   []*nsWorker
	stop chan struct{}
	errs chan error
	wg   sync.WaitGroup
	once sync.Once
}

// startWorkload starts a worker per name on cl.
func startWorkload(t *testing.T, cl *testcluster.Cluster, names ...string) *nsWorkload {
	t.Helper()
	w := &nsWorkload{log: &opLog{}, stop: make(chan struct{}), errs: make(chan error, len(names))}
	for _, name := range names {
		w.ws = append(w.ws, newNSWorker(t, cl.Client(t), name, w.log))
	}
	for _, nw := range w.ws {
		w.wg.Go(func() { w.errs <- nw.run(w.stop) })
	}
	t.Cleanup(w.halt)
	return w
}

// workerNames are n worker names: wa, wb, ...
func workerNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "w" + string(rune('a'+i))
	}
	return names
}

func (w *nsWorkload) halt() {
	w.once.Do(func() { close(w.stop) })
	w.wg.Wait()
}

// finish stops the workers and fails the test on a worker's error.
func (w *nsWorkload) finish(t *testing.T) {
	t.Helper()
	w.halt()
	close(w.errs)
	for err := range w.errs {
		if err != nil {
			t.Fatalf("workload: %v", err)
		}
	}
}

// checkWaits logs what the workers did while what happened between start
// and end, and fails the test if one operation waited over maxStall.
func (w *nsWorkload) checkWaits(t *testing.T, what string, start, end time.Time) {
	t.Helper()
	l := w.log
	l.mu.Lock()
	n, slow, slowW := len(l.done), l.slow, l.slowW
	l.mu.Unlock()
	t.Logf("%d operations acknowledged; %s took %v; longest pause during it %v; slowest operation %v (%s)",
		n, what, end.Sub(start).Round(time.Millisecond), l.stall(start, end).Round(time.Millisecond), slow.Round(time.Millisecond), slowW)
	if slow > maxStall {
		t.Errorf("a client waited %v for one operation (%s); the bound is %v", slow, slowW, maxStall)
	}
}

// verify checks each worker's model against the namespace, and that no
// object is used twice.
func (w *nsWorkload) verify(t *testing.T, c *client.Client) {
	t.Helper()
	for _, nw := range w.ws {
		nw.verify(t, c)
	}
	checkUniqueObjects(t, c)
}
