package itest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestReplicaMGSFailoverBetweenSequenceGrants: FID sequence grants go on
// across MGS leader changes and no range is ever granted twice.
//
// A real grant is 64 sequences of fid.Width (131,072) FIDs and the MDS asks
// again only below two sequences, so a test that creates a few hundred
// files sees no grant after the failover at all. Here the test-only knob
// NACRE_TEST_SEQ_GRANT=1/100000 (internal/mds/maintain.go) has the MDT0
// leader ask for one sequence on every tick of its maintenance loop
// (several grants a second), while clients keep creating files and
// directories. (The FIDs created all come from the first sequence, as a
// sequence holds fid.Width of them: the FLD, the stores and the logs are
// what show a range granted twice.)
// The MGS leader is killed with SIGKILL right after a grant (and, the
// second time, at a random point between two grants), twice; grants made
// by the new leaders must follow every earlier one. Every grant that any
// MGS replica logged as made, that the MDS logged as received, that a
// killed leader's store holds or that the FLD showed before a kill must be
// in the final FLD, once, with the same bounds; the FLD must not overlap
// itself; every MGS replica's own store must agree; and every FID created
// is distinct, inside a range of the FLD granted to MDT0.
func TestReplicaMGSFailoverBetweenSequenceGrants(t *testing.T) {
	cl := startReplicated(t, "NACRE_TEST_SEQ_GRANT=1/100000")
	c := cl.Client(t)
	ctx := context.Background()

	// known collects every range seen granted before the end, by where it
	// was seen; all must be in the final FLD.
	known := map[string][]*pb.SeqRange{}
	fld := func() []*pb.SeqRange {
		t.Helper()
		cfg, err := c.Config(ctx)
		if err != nil {
			t.Fatalf("configuration: %v", err)
		}
		return cfg.Fld
	}
	waitGrants := func(n int, why string) []*pb.SeqRange {
		t.Helper()
		var f []*pb.SeqRange
		wait.NoErr(t, 15*time.Second, fmt.Sprintf("%s: %d ranges in the FLD (sequence grants)", why, n), func() error {
			if f = fld(); len(f) < n {
				return fmt.Errorf("it has %d", len(f))
			}
			return nil
		})
		return f
	}

	cr := startCreators(t, cl, 4)
	f := waitGrants(len(fld())+5, "before the failovers")
	t.Logf("grants under way: %d ranges in the FLD", len(f))

	for round := 1; round <= 2; round++ {
		leader := waitLeader(t, cl, "mgs")
		// Kill it right after a grant appears (round 1), or at a random
		// point before the next one (round 2).
		n := len(fld())
		seen := waitGrants(n+1, "before the kill")
		if round == 2 {
			time.Sleep(time.Duration(rand.Intn(80)) * time.Millisecond)
		}
		cl.Kill(leader, syscall.SIGKILL)
		killedAt := time.Now()
		known[fmt.Sprintf("FLD before kill %d", round)] = seen
		// What the killed leader's own store holds (its last applies may be
		// lost with the process: they are redone from the Raft log).
		st := readMGSStore(t, cl.TargetDir(leader))
		known[fmt.Sprintf("store of %s, killed leader %d", leader, round)] = st.fld
		next := waitLeader(t, cl, "mgs", leader)
		high := max(maxEnd(seen), st.next)
		after := waitGrants(len(seen)+5, fmt.Sprintf("after kill %d", round))
		known[fmt.Sprintf("FLD after kill %d", round)] = after
		checkRanges(t, fmt.Sprintf("FLD after kill %d", round), after)
		old := map[uint64]int{}
		for _, r := range seen {
			old[r.Start]++
		}
		var newer, below int
		for _, r := range after {
			if old[r.Start] > 0 {
				old[r.Start]--
				continue
			}
			if r.Start >= high {
				newer++
			} else {
				below++
			}
		}
		t.Logf("round %d: MGS leader %s killed; %s leads; %v after the kill, %d new grants beyond %#x (the highest sequence known at the kill), %d below it; %d creates so far",
			round, leader, next, time.Since(killedAt).Round(time.Millisecond), newer, high, below, cr.count())
		if newer == 0 || below > 0 {
			t.Errorf("round %d: the new MGS leader's grants must all follow %#x, the end of the grants made before the failover", round, high)
		}
		if t.Failed() {
			t.FailNow()
		}
		cl.Restart() // the killed replica returns and catches up
	}
	waitGrants(len(fld())+3, "after the killed replicas returned")
	cr.stop(t)
	known["FLD at the end"] = fld()
	checkUniqueObjects(t, c)
	// The MDS goes on asking for grants until it stops: the reference is
	// the stores of the MGS replicas, read once every process stopped
	// (the MDTs first).
	cl.Stop()
	var final []*pb.SeqRange
	for _, name := range replicaNames(t, cl, "mgs") {
		st := readMGSStore(t, cl.TargetDir(name))
		checkRanges(t, "store of "+name, st.fld)
		if st.next != maxEnd(st.fld) {
			t.Errorf("%s: next sequence %#x, but its FLD ends at %#x", name, st.next, maxEnd(st.fld))
		}
		known["store of "+name] = st.fld
		if len(st.fld) > len(final) {
			final = st.fld // the replica that applied the most
		}
	}
	// The final FLD: no overlap, nothing below SeqNormal, all MDT0's.
	checkRanges(t, "final FLD", final)
	byStart := map[uint64]*pb.SeqRange{}
	for _, r := range final {
		if r.Mdt != 0 {
			t.Errorf("FLD range [%#x,%#x) for MDT%d; the cluster has only MDT0", r.Start, r.End, r.Mdt)
		}
		byStart[r.Start] = r
	}
	// Every grant made (MGS logs) or received (MDS logs), each once.
	mgsLog := grantsLogged(t, cl, "mgs", "sequence range granted")
	mdsLog := grantsLogged(t, cl, "mdt0", "FID sequences granted")
	known["MGS logs"], known["MDS logs"] = mgsLog, mdsLog
	for _, what := range []string{"MGS logs", "MDS logs"} {
		checkRanges(t, what, known[what])
	}
	// Everything seen granted, anywhere, is in the final FLD as it was.
	for what, rs := range known {
		for _, r := range rs {
			if f := byStart[r.Start]; f == nil || !proto.Equal(f, r) {
				t.Errorf("%s: range [%#x,%#x) for MDT%d is not in the final FLD (there: %v)", what, r.Start, r.End, r.Mdt, f)
			}
		}
	}
	t.Logf("%d ranges granted, %d logged by MGS leaders, %d received by the MDS: none twice, none overlapping", len(final), len(mgsLog), len(mdsLog))

	// Every FID created is distinct and in a range granted to MDT0.
	sort.Slice(final, func(i, j int) bool { return final[i].Start < final[j].Start })
	for f, name := range cr.fids {
		i := sort.Search(len(final), func(i int) bool { return final[i].End > f.Seq })
		if i == len(final) || final[i].Start > f.Seq || final[i].Mdt != 0 {
			t.Errorf("%s has FID %s, whose sequence no FLD range grants to MDT0", name, f)
		}
	}
	t.Logf("%d objects created, every FID distinct and in the FLD", len(cr.fids))
}

// creators create files (one stripe each) and directories in their own
// directories until stopped, recording every FID the MDT returned.
type creators struct {
	wg    sync.WaitGroup
	quit  chan struct{}
	once  sync.Once
	errs  chan error
	mu    sync.Mutex
	fids  map[fid.FID]string
	dupes []string
}

func startCreators(t *testing.T, cl *testcluster.Cluster, n int) *creators {
	t.Helper()
	cr := &creators{quit: make(chan struct{}), errs: make(chan error, n), fids: map[fid.FID]string{}}
	ctx := context.Background()
	for w := range n {
		c := cl.Client(t)
		dir := fmt.Sprintf("seq%d", w)
		ino, err := c.Mkdir(ctx, fid.Root, dir, 0o755)
		if err != nil {
			t.Fatalf("mkdir %s: %v", dir, err)
		}
		cr.note(fid.FromPB(ino.Fid), "/"+dir)
		parent := fid.FromPB(ino.Fid)
		cr.wg.Add(1)
		go func() {
			defer cr.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-cr.quit:
					cr.errs <- nil
					return
				default:
				}
				name := fmt.Sprintf("f%05d", i)
				var ino *pb.Inode
				var err error
				if i%4 == 3 {
					ino, err = c.Mkdir(ctx, parent, name, 0o755)
				} else {
					ino, _, err = c.Create(ctx, parent, name, 0o644, client.CreateOpts{Exclusive: true, Layout: &pb.Layout{StripeCount: 1, StripeSize: 65536}})
				}
				if err != nil {
					cr.errs <- fmt.Errorf("create /%s/%s: %w", dir, name, err)
					return
				}
				cr.note(fid.FromPB(ino.Fid), "/"+dir+"/"+name)
				time.Sleep(5 * time.Millisecond) // a few hundred creates a second in all
			}
		}()
	}
	// Should the test end early: stop before the clients close (cleanups
	// run last registered first) and the cluster stops.
	t.Cleanup(func() {
		cr.once.Do(func() { close(cr.quit) })
		cr.wg.Wait()
	})
	return cr
}

func (cr *creators) note(f fid.FID, name string) {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	if other, ok := cr.fids[f]; ok {
		cr.dupes = append(cr.dupes, fmt.Sprintf("FID %s given to %s and to %s", f, other, name))
		return
	}
	cr.fids[f] = name
}

func (cr *creators) count() int {
	cr.mu.Lock()
	defer cr.mu.Unlock()
	return len(cr.fids)
}

func (cr *creators) stop(t *testing.T) {
	t.Helper()
	cr.once.Do(func() { close(cr.quit) })
	cr.wg.Wait()
	close(cr.errs)
	for err := range cr.errs {
		if err != nil {
			t.Errorf("workload: %v", err)
		}
	}
	for _, d := range cr.dupes {
		t.Errorf("%s", d)
	}
	if t.Failed() {
		t.FailNow()
	}
}

// mgsStore is the sequence controller's state in one MGS replica's store
// (internal/mgs: "seq/next" u64 and "fld/" start(8) -> SeqRange).
type mgsStore struct {
	next uint64
	fld  []*pb.SeqRange
}

// readMGSStore reads the store of an MGS replica whose process is not
// running.
func readMGSStore(t *testing.T, dir string) mgsStore {
	t.Helper()
	if pid, err := proc.ReadPid(dir); err == nil && proc.Running(pid) {
		t.Fatalf("%s is served by pid %d: its store cannot be read", dir, pid)
	}
	// A killed process's leader thread is a zombie (not Running) a little
	// before its last thread is gone and the store's lock released.
	var db *kv.DB
	var err error
	wait.Poll(5*time.Second, func() bool {
		db, err = kv.Open(target.StoreDir(dir), kv.Options{ReadOnly: true, CacheSize: 1 << 20})
		return err == nil || !(errors.Is(err, syscall.EAGAIN) || strings.Contains(err.Error(), "temporarily unavailable"))
	})
	if err != nil {
		t.Fatalf("open the store of %s: %v", filepath.Base(dir), err)
	}
	defer db.Close()
	var st mgsStore
	if v, err := db.Get([]byte("seq/next")); err == nil && len(v) == 8 {
		st.next = binary.BigEndian.Uint64(v)
	}
	lo := []byte("fld/")
	it, err := db.NewIter(lo, kv.PrefixEnd(lo))
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		r := &pb.SeqRange{}
		if err := proto.Unmarshal(it.Value(), r); err != nil {
			t.Fatalf("%s: FLD record %x: %v", filepath.Base(dir), it.Key(), err)
		}
		if k := binary.BigEndian.Uint64(it.Key()[len(lo):]); k != r.Start {
			t.Errorf("%s: FLD record under %#x is [%#x,%#x)", filepath.Base(dir), k, r.Start, r.End)
		}
		st.fld = append(st.fld, r)
	}
	return st
}

var grantLine = regexp.MustCompile(`start"?[=:]"?0x([0-9a-f]+)"?.*end"?[=:]"?0x([0-9a-f]+)`)

// grantsLogged reads the grants that the replicas of group logged with msg
// (every replica's serve.log, restarts included).
func grantsLogged(t *testing.T, cl *testcluster.Cluster, group, msg string) []*pb.SeqRange {
	t.Helper()
	var out []*pb.SeqRange
	for _, name := range replicaNames(t, cl, group) {
		b, err := os.ReadFile(filepath.Join(cl.TargetDir(name), proc.LogFile))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, msg) {
				continue
			}
			m := grantLine.FindStringSubmatch(line)
			if m == nil {
				t.Fatalf("%s: cannot read the range in %q", name, line)
			}
			start, _ := strconv.ParseUint(m[1], 16, 64)
			end, _ := strconv.ParseUint(m[2], 16, 64)
			out = append(out, &pb.SeqRange{Start: start, End: end})
		}
	}
	if len(out) == 0 {
		t.Fatalf("no %q line in the logs of %s", msg, group)
	}
	return out
}

// checkRanges fails if two ranges overlap (the same range twice included)
// or one starts below the first sequence the MGS grants.
func checkRanges(t *testing.T, what string, rs []*pb.SeqRange) {
	t.Helper()
	s := append([]*pb.SeqRange(nil), rs...)
	sort.Slice(s, func(i, j int) bool { return s[i].Start < s[j].Start })
	bad := 0
	for i, r := range s {
		if r.Start < fid.SeqNormal || r.End <= r.Start {
			t.Errorf("%s: range [%#x,%#x)", what, r.Start, r.End)
		}
		if i > 0 && r.Start < s[i-1].End {
			if bad++; bad <= 5 {
				t.Errorf("%s: [%#x,%#x) (MDT%d) and [%#x,%#x) (MDT%d) overlap: granted twice", what, s[i-1].Start, s[i-1].End, s[i-1].Mdt, r.Start, r.End, r.Mdt)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d overlaps in all", what, bad)
	}
}

func maxEnd(rs []*pb.SeqRange) uint64 {
	var m uint64
	for _, r := range rs {
		m = max(m, r.End)
	}
	return m
}
