package itest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math/rand"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/mdt"
	"nacre/internal/obs"
	"nacre/internal/ost"
	"nacre/internal/target"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// acked records what the servers acknowledged to the workload.
type acked struct {
	mu      sync.Mutex
	created map[string]bool     // Create returned
	durable map[string][32]byte // Close (fsync) returned: content hash
}

// TestKill9KeepsEverythingAcknowledged kills the MDT and OST processes
// with SIGKILL while clients create and write, restarts them, and checks
// that every acknowledged create exists, every file whose close (fsync)
// returned has exactly its bytes, and that after recovery no precreated
// OST object is left that no file references.
func TestKill9KeepsEverythingAcknowledged(t *testing.T) {
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	a := &acked{created: map[string]bool{}, durable: map[string][32]byte{}}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := 0; w < 3; w++ {
		c := cl.Client(t)
		wg.Add(1)
		go func(w int, c *client.Client) {
			defer wg.Done()
			errs <- workload(ctx, c, w, a)
		}(w, c)
	}
	// The workload runs 1.5 s before each crash and after the last.
	kill := func(names ...string) {
		time.Sleep(1500 * time.Millisecond)
		for _, n := range names {
			cl.Kill(n, syscall.SIGKILL) // returns once the process is gone
		}
		t.Logf("killed %v with SIGKILL", names)
		cl.Restart()
	}
	kill("mdt0")
	kill("ost1")
	kill("mdt0", "ost0")
	time.Sleep(1500 * time.Millisecond)
	stop()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.durable) < 10 {
		t.Fatalf("workload made too little progress to test anything (%d files closed)", len(a.durable))
	}
	t.Logf("%d files created, %d closed (fsync'ed) across the crashes", len(a.created), len(a.durable))

	c := cl.Client(t)
	vctx := context.Background()
	for name := range a.created {
		ino, err := c.Lookup(vctx, fid.Root, name)
		if err != nil {
			t.Fatalf("acknowledged create of %s lost: %v", name, err)
		}
		want, ok := a.durable[name]
		if !ok {
			continue
		}
		st, err := c.Stat(vctx, fid.FromPB(ino.Fid))
		if err != nil {
			t.Fatal(err)
		}
		data := readFileAll(t, vctx, c.OpenInode(st))
		if sha256.Sum256(data) != want {
			t.Fatalf("%s: content after crash differs from what was fsync'ed (%d bytes now)", name, len(data))
		}
	}
	// Let the MDS finish its post-recovery cleanup, then stop cleanly and
	// compare the stores offline.
	waitPoolsReady(t, cl, c)
	cl.Stop()
	checkNoLeakedObjects(t, cl)
}

func workload(ctx context.Context, c *client.Client, w int, a *acked) error {
	r := rand.New(rand.NewSource(int64(w)))
	for i := 0; ctx.Err() == nil; i++ {
		name := fmt.Sprintf("w%d-%05d", w, i)
		sc := int32(1 + r.Intn(2))
		ino, _, err := c.Create(ctx, fid.Root, name, 0o644, client.CreateOpts{Exclusive: true, Layout: &pb.Layout{StripeCount: sc, StripeSize: 65536}})
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("create %s: %w", name, err)
		}
		a.mu.Lock()
		a.created[name] = true
		a.mu.Unlock()
		data := make([]byte, r.Intn(300000))
		r.Read(data)
		f := c.OpenInode(ino)
		if _, err := f.WriteAt(ctx, data, 0); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("write %s: %w", name, err)
		}
		if err := f.Close(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("close %s: %w", name, err)
		}
		a.mu.Lock()
		a.durable[name] = sha256.Sum256(data)
		a.mu.Unlock()
	}
	return nil
}

// waitPoolsReady waits until a create works (pools cleaned and refilled)
// and no refill is due or under way: every OST's pool holds at least the
// MDS's refill mark (16384), so the stores read offline next are not
// caught between an OST's precreate and the MDT's record of it.
func waitPoolsReady(t *testing.T, cl *testcluster.Cluster, c *client.Client) {
	ctx := context.Background()
	ino, _, err := c.Create(ctx, fid.Root, "probe", 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: -1}})
	if err != nil {
		t.Fatalf("create after recovery: %v", err)
	}
	if len(ino.Layout.Objects) != 2 {
		t.Fatalf("probe file got %d stripes, want 2 (an OST not back?)", len(ino.Layout.Objects))
	}
	url := mdtMetricsURL(t, cl)
	wait.NoErr(t, 30*time.Second, "every OST's precreate pool to be full", func() error {
		f := scrapeFamilies(t, url)
		for _, ost := range []string{"OST0000", "OST0001"} {
			if n := f.sum("nacre_mds_precreate_pool_objects", map[string]string{"ost": ost}); n < 16384 {
				return fmt.Errorf("%s's pool holds %v objects", ost, n)
			}
		}
		return nil
	})
}

// checkNoLeakedObjects: every object on every OST is referenced by a
// layout, in the MDT's current precreate pool, or queued for destroy.
func checkNoLeakedObjects(t *testing.T, cl *testcluster.Cluster) {
	t.Helper()
	mdtDir := cl.TargetDir("mdt0")
	mid, err := target.Load(mdtDir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := kv.Open(target.StoreDir(mdtDir), kv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tg, err := mdt.Open(db, mid, obs.Discard())
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		ost      uint32
		seq, oid uint64
	}
	known := map[key]string{}
	err = tg.ScanInodes(nil, func(_ uint64, ino *pb.Inode) error {
		if ino != nil && ino.Layout != nil && ino.Mode&syscall.S_IFMT == syscall.S_IFREG {
			for _, o := range ino.Layout.Objects {
				known[key{o.Ost, o.Seq, o.Oid}] = "layout"
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	q, _ := tg.DestroyQueue(1 << 20)
	for _, o := range q {
		known[key{o.Ost, o.Seq, o.Oid}] = "destroy queue"
	}
	pools := tg.Pools()
	db.Close()
	for idx := uint32(0); idx < 2; idx++ {
		dir := cl.TargetDir(fmt.Sprintf("ost%d", idx))
		id, err := target.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		st, err := ost.Open(dir, id, ost.Options{Log: obs.Discard()})
		if err != nil {
			t.Fatal(err)
		}
		p := pools[idx]
		var leaks []string
		n := 0
		err = st.IterObjects(fid.ObjID{}, fid.ObjID{}, func(a *pb.ObjectAttr) error {
			n++
			if _, ok := known[key{idx, a.Seq, a.Oid}]; ok {
				return nil
			}
			if a.Seq == p.Seq && a.Oid >= p.Next && a.Oid < p.End {
				return nil // precreated, in the pool, will be used
			}
			leaks = append(leaks, fmt.Sprintf("%#x:%#x", a.Seq, a.Oid))
			return nil
		})
		st.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(leaks) > 0 {
			t.Fatalf("OST%d: %d of %d objects leaked (not in a layout, the pool or the destroy queue), e.g. %v", idx, len(leaks), n, leaks[:min(5, len(leaks))])
		}
		t.Logf("OST%d: %d objects, none leaked", idx, n)
	}
}
