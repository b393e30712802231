package client

import (
	"context"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/mdrpc"
)

// fakeMDS answers Mutate as a replica would: ok if it leads, else a hint.
type fakeMDS struct {
	mdrpc.MDSService
	name   string
	leads  *string // the name of the replica that leads ("" none)
	hint   string  // the address it believes leads
	down   bool
	called int
}

func (f *fakeMDS) Mutate(ctx context.Context, in *pb.Command) (*pb.Reply, error) {
	f.called++
	switch {
	case f.down:
		return nil, errno.New(errno.Unavailable, "connection refused")
	case *f.leads == f.name:
		return &pb.Reply{}, nil
	}
	return nil, errno.NotLeader("MDT0000", 9, f.hint)
}

func (f *fakeMDS) Lookup(ctx context.Context, in *pb.LookupRequest) (*pb.Reply, error) {
	f.called++
	if f.down {
		return nil, errno.New(errno.Unavailable, "connection refused")
	}
	return &pb.Reply{}, nil
}

type nopCloser struct{}

func (nopCloser) Close() error { return nil }

func testGroup(leads *string, followerReads bool) (*mdtGroup, map[string]*fakeMDS) {
	g := newMDTGroup(0, "t", followerReads, nil)
	fakes := map[string]*fakeMDS{}
	for i, n := range []string{"a", "b", "c"} {
		f := &fakeMDS{name: n, leads: leads}
		fakes[n] = f
		g.reps = append(g.reps, &mdtReplica{id: uint64(i + 1), addr: n, cli: f, closer: nopCloser{}, up: true})
	}
	return g, fakes
}

func TestMutationsFollowTheLeaderHint(t *testing.T) {
	leads := "c"
	g, f := testGroup(&leads, false)
	f["a"].hint, f["b"].hint = "c", "c"
	ctx := context.Background()
	if _, err := g.Mutate(ctx, &pb.Command{}); err != nil {
		t.Fatal(err)
	}
	if f["a"].called != 1 || f["b"].called != 0 || f["c"].called != 1 {
		t.Fatalf("calls a=%d b=%d c=%d, want a redirect from a straight to c", f["a"].called, f["b"].called, f["c"].called)
	}
	if g.leader == nil || g.leader.addr != "c" {
		t.Fatal("the leader was not remembered")
	}
	g.Mutate(ctx, &pb.Command{})
	if f["c"].called != 2 || f["a"].called != 1 {
		t.Fatal("the second call did not go to the leader directly")
	}
}

func TestAKilledLeaderIsSkippedEvenWhileOthersStillNameIt(t *testing.T) {
	leads := "c"
	g, f := testGroup(&leads, false)
	ctx := context.Background()
	g.Mutate(ctx, &pb.Command{}) // learn c
	for _, x := range f {
		x.called = 0
	}
	f["c"].down = true
	leads = ""                          // election under way
	f["a"].hint, f["b"].hint = "c", "c" // the followers still name the dead leader
	_, err := g.Mutate(ctx, &pb.Command{})
	if errno.CodeOf(err) != errno.Unavailable {
		t.Fatalf("with no leader: %v, want Unavailable (the caller backs off and retries)", err)
	}
	if f["a"].called+f["b"].called != 2 {
		t.Fatalf("every replica should have been tried once: a=%d b=%d", f["a"].called, f["b"].called)
	}
	leads = "b"
	f["a"].hint = "b"
	if _, err := g.Mutate(ctx, &pb.Command{}); err != nil {
		t.Fatal(err)
	}
	if g.leader.addr != "b" {
		t.Fatalf("leader %s, want b", g.leader.addr)
	}
}

func TestFollowerReadsAreSpreadOverTheReplicas(t *testing.T) {
	leads := "a"
	g, f := testGroup(&leads, true)
	ctx := context.Background()
	for range 30 {
		if _, err := g.Lookup(ctx, &pb.LookupRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	for n, x := range f {
		if x.called < 5 {
			t.Fatalf("replica %s served %d of 30 reads", n, x.called)
		}
	}
	f["b"].down = true
	for range 10 {
		if _, err := g.Lookup(ctx, &pb.LookupRequest{}); err != nil {
			t.Fatalf("a read failed with one replica down: %v", err)
		}
	}
}

func TestAStoppingServersCancellationIsRetried(t *testing.T) {
	leads := "a"
	g, _ := testGroup(&leads, false)
	g.reps[0].cli = cancelling{}
	g.leader = g.reps[0]
	_, err := g.Mutate(context.Background(), &pb.Command{})
	if errno.CodeOf(err) != errno.Unavailable {
		t.Fatalf("%v, want Unavailable", err)
	}
}

type cancelling struct{ mdrpc.MDSService }

func (cancelling) Mutate(ctx context.Context, in *pb.Command) (*pb.Reply, error) {
	return nil, errno.New(errno.Canceled, "context canceled")
}
