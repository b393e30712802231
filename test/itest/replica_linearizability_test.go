package itest

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"math/rand"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
)

// Linearizability across failovers, checked with porcupine.
//
// The model is a directory holding a subset of linKeys names (a bit set):
// create (exclusive) succeeds iff the name is absent, unlink and rename
// succeed iff the source exists (rename replaces the target), lookup
// tells whether a name exists, and readdir returns the whole set. Clients
// run these operations concurrently, half of them reading from followers,
// while the MDT's leader is killed, cut off and replaced; porcupine then
// looks for one order of all operations, consistent with real time, that
// the model accepts. A stale read (an old leader serving past its lease,
// a follower answering without ReadIndex) or a lost or repeated write
// makes the history non-linearizable.

const linKeys = 6

type linOp byte

const (
	linCreate linOp = 'c'
	linUnlink linOp = 'u'
	linRename linOp = 'r'
	linLookup linOp = 'l'
	linList   linOp = 'd'
)

type linIn struct {
	op   linOp
	a, b int
}

type linOut struct {
	ok      bool   // create/unlink/rename succeeded; lookup found the name
	set     uint16 // readdir
	unknown bool   // the call failed without an answer: it may or may not have happened
}

// linStep is the sequential specification: the states the directory may
// be in after the operation, none if the output is impossible.
func linStep(st uint16, in linIn, out linOut) []uint16 {
	has := func(k int) bool { return st&(1<<k) != 0 }
	one := func(ok bool, next uint16) []uint16 {
		switch {
		case out.unknown && next != st:
			return []uint16{st, next}
		case out.unknown || out.ok == ok:
			return []uint16{next}
		}
		return nil
	}
	switch in.op {
	case linCreate:
		if has(in.a) {
			return one(false, st)
		}
		return one(true, st|1<<in.a)
	case linUnlink:
		if !has(in.a) {
			return one(false, st)
		}
		return one(true, st&^(1<<in.a))
	case linRename:
		if !has(in.a) {
			return one(false, st)
		}
		return one(true, st&^(1<<in.a)|1<<in.b)
	case linLookup:
		if out.unknown || out.ok == has(in.a) {
			return []uint16{st}
		}
	case linList:
		if out.unknown || out.set == st {
			return []uint16{st}
		}
	}
	return nil
}

var linModel = (&porcupine.NondeterministicModel{
	Init: func() []interface{} { return []interface{}{uint16(0)} },
	Step: func(state, input, output interface{}) []interface{} {
		var out []interface{}
		for _, s := range linStep(state.(uint16), input.(linIn), output.(linOut)) {
			out = append(out, s)
		}
		return out
	},
	DescribeOperation: func(input, output interface{}) string {
		in, o := input.(linIn), output.(linOut)
		r := fmt.Sprint(o.ok)
		if in.op == linList {
			r = fmt.Sprintf("%06b", o.set)
		}
		if o.unknown {
			r = "?"
		}
		return fmt.Sprintf("%c(k%d,k%d) -> %s", in.op, in.a, in.b, r)
	},
	DescribeState: func(s interface{}) string { return fmt.Sprintf("%06b (%d names)", s, bits.OnesCount16(s.(uint16))) },
}).ToModel()

// TestLinearizabilityModelRejectsAStaleRead: the checker is not vacuous.
func TestLinearizabilityModelRejectsAStaleRead(t *testing.T) {
	ops := []porcupine.Operation{
		{ClientId: 0, Input: linIn{op: linCreate, a: 1}, Call: 0, Output: linOut{ok: true}, Return: 10},
		{ClientId: 1, Input: linIn{op: linLookup, a: 1}, Call: 20, Output: linOut{ok: false}, Return: 30},
	}
	if porcupine.CheckOperations(linModel, ops) {
		t.Fatal("a lookup that misses a create acknowledged before it began was accepted")
	}
	ops[1].Output = linOut{ok: true}
	ops = append(ops, porcupine.Operation{ClientId: 2, Input: linIn{op: linCreate, a: 1}, Call: 5, Output: linOut{unknown: true}, Return: 1 << 60})
	if !porcupine.CheckOperations(linModel, ops) {
		t.Fatal("a linearizable history was refused")
	}
}

// linRecorder collects the history.
type linRecorder struct {
	base time.Time
	mu   sync.Mutex
	ops  []porcupine.Operation
}

func (r *linRecorder) add(client int, in linIn, call int64, out linOut) {
	ret := int64(time.Since(r.base))
	if out.unknown {
		ret = 1 << 62 // it may take effect at any time from its call on
	}
	r.mu.Lock()
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	r.mu.Unlock()
}

func linClient(ctx context.Context, c *client.Client, dir fid.FID, id int, rec *linRecorder, stop <-chan struct{}) error {
	r := rand.New(rand.NewSource(int64(id + 1)))
	name := func(k int) string { return fmt.Sprintf("k%d", k) }
	for {
		select {
		case <-stop:
			return nil
		default:
		}
		in := linIn{a: r.Intn(linKeys), b: r.Intn(linKeys)}
		switch x := r.Intn(10); {
		case x < 2:
			in.op = linCreate
		case x < 4:
			in.op = linUnlink
		case x < 5:
			in.op = linRename
			if in.a == in.b {
				in.b = (in.b + 1) % linKeys
			}
		case x < 8:
			in.op = linLookup
		default:
			in.op = linList
		}
		call := int64(time.Since(rec.base))
		var out linOut
		var err error
		switch in.op {
		case linCreate:
			_, _, err = c.Create(ctx, dir, name(in.a), 0o644, client.CreateOpts{Exclusive: true, Layout: &pb.Layout{StripeCount: 1}})
		case linUnlink:
			_, err = c.Unlink(ctx, dir, name(in.a))
		case linRename:
			err = c.Rename(ctx, dir, name(in.a), dir, name(in.b), 0)
		case linLookup:
			_, err = c.Lookup(ctx, dir, name(in.a))
		case linList:
			var ents []*pb.DirEntry
			ents, err = c.ReadDirAll(ctx, dir, false)
			for _, e := range ents {
				var k int
				if _, serr := fmt.Sscanf(string(e.Name), "k%d", &k); serr == nil {
					out.set |= 1 << k
				}
			}
		}
		var en syscall.Errno
		switch {
		case err == nil:
			out.ok = true
		case errors.As(err, &en) && (en == syscall.EEXIST || en == syscall.ENOENT) && in.op != linList:
			out.ok = false
		default:
			rec.add(id, in, call, linOut{unknown: true})
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("client %d: %c k%d: %w (%v)", id, in.op, in.a, err, errno.ToErrno(err))
		}
		rec.add(id, in, call, out)
	}
}

func TestReplicaLinearizableAcrossFailovers(t *testing.T) {
	cl := startReplicated(t)
	setup := cl.Client(t)
	ctx := context.Background()
	d, err := setup.Mkdir(ctx, fid.Root, "lin", 0o755)
	if err != nil {
		t.Fatal(err)
	}
	dir := fid.FromPB(d.Fid)
	rec := &linRecorder{base: time.Now()}
	stop := make(chan struct{})
	const clients = 4
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		c, err := client.New(ctx, client.Config{MGS: cl.MGS, Timeout: 30 * time.Second, FollowerReads: i%2 == 1})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs <- linClient(ctx, c, dir, i, rec, stop)
		}(i)
	}
	// step lets the clients run for d, then does f: the faults' schedule.
	step := func(d time.Duration, what string, f func()) {
		time.Sleep(d)
		f()
		t.Logf("%6.2fs %s", time.Since(rec.base).Seconds(), what)
	}
	long := os.Getenv("NACRE_ITEST_LONG") != ""
	rounds := 1
	if long {
		rounds = 3
	}
	for round := 0; round < rounds; round++ {
		leader := waitLeader(t, cl, "mdt0")
		step(1500*time.Millisecond, "SIGKILL "+leader, func() { cl.Kill(leader, syscall.SIGKILL) })
		step(2*time.Second, "restart "+leader, func() { cl.Restart() })
		cut := waitLeader(t, cl, "mdt0")
		step(1500*time.Millisecond, "cut off "+cut, func() { isolate(t, cl, cut, true) })
		step(3*time.Second, "reconnect "+cut, func() { isolate(t, cl, cut, false) })
		step(1500*time.Millisecond, "hand leadership over", func() {
			addr := replicaAddr(t, cl, waitLeader(t, cl, "mdt0"))
			cc, err := grpcx.Dial(addr)
			if err != nil {
				t.Fatal(err)
			}
			defer cc.Close()
			tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			if _, err := nacregrpc.NewRaftAdminClient(cc).TransferLeader(tctx, &pb.RaftTransferRequest{}); err != nil {
				t.Errorf("transfer leadership: %v", err)
			}
		})
	}
	time.Sleep(1500 * time.Millisecond) // the clients run on after the last fault
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	rec.mu.Lock()
	ops := rec.ops
	rec.mu.Unlock()
	kinds := map[linOp]int{}
	for _, o := range ops {
		kinds[o.Input.(linIn).op]++
	}
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(linModel, ops, 2*time.Minute)
	t.Logf("%d operations (%d creates, %d unlinks, %d renames, %d lookups, %d listings) checked in %v: %s",
		len(ops), kinds[linCreate], kinds[linUnlink], kinds[linRename], kinds[linLookup], kinds[linList], time.Since(start).Round(time.Millisecond), res)
	switch res {
	case porcupine.Illegal:
		f, err := os.CreateTemp("", "nacre-linearizability-*.html")
		if err == nil {
			porcupine.Visualize(linModel, info, f)
			f.Close()
			t.Errorf("visualization of the failing history: %s", f.Name())
		}
		t.Fatal("the history is not linearizable")
	case porcupine.Unknown:
		t.Fatal("porcupine timed out")
	}
}
