package ldlm

import (
	"context"
	"net"
	"testing"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
)

// tokenClient is one client's session with a real LDLM server over
// loopback TCP; revokes delivers the files whose tokens the server asks
// back, and acks are sent only when the test says so.
type tokenClient struct {
	id      uint64
	ld      nacregrpc.LDLMClient
	st      nacregrpc.LDLM_SessionClient
	cancel  context.CancelFunc
	revokes chan uint64 // seq of each revocation
	// lookups gets each lookup lock revocation (lookuplock_test.go).
	lookups chan *pb.SessionDown
}

func startTokenServer(t *testing.T, grace time.Duration) (*Server, string) {
	t.Helper()
	s := NewServer(nil, nil, nil)
	s.revokeWait, s.tokenGrace = time.Second, grace
	g := grpcx.NewServer(nil)
	nacregrpc.RegisterLDLMServer(g, s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go g.Serve(ln)
	t.Cleanup(g.Stop)
	return s, ln.Addr().String()
}

func newTokenClient(t *testing.T, addr string, id uint64) *tokenClient {
	t.Helper()
	cc, err := grpcx.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c := &tokenClient{id: id, ld: nacregrpc.NewLDLMClient(cc), cancel: cancel, revokes: make(chan uint64, 16), lookups: make(chan *pb.SessionDown, 16)}
	c.st, err = c.ld.Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.st.Send(&pb.SessionUp{ClientId: id, Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.st.Recv(); err != nil { // welcome
		t.Fatal(err)
	}
	go func() {
		for {
			d, err := c.st.Recv()
			if err != nil {
				close(c.revokes)
				close(c.lookups)
				return
			}
			if len(d.RevokeAppend) > 0 {
				c.revokes <- d.Seq
			}
			if len(d.RevokeLookup) > 0 {
				c.lookups <- d
			}
		}
	}()
	return c
}

// sessionless is an LDLM client of addr that opened no session.
func sessionless(t *testing.T, addr string) nacregrpc.LDLMClient {
	t.Helper()
	cc, err := grpcx.Dial(addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return nacregrpc.NewLDLMClient(cc)
}

func (c *tokenClient) ack(seq uint64) error { return c.st.Send(&pb.SessionUp{Ack: seq}) }

// take asks for the token and returns its grant, or the error after at
// most d.
func (c *tokenClient) take(d time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	r, err := c.ld.AppendToken(ctx, &pb.AppendTokenRequest{ClientId: c.id, Fid: f1.PB()})
	if err != nil {
		return 0, err
	}
	return r.Grant, nil
}

func (c *tokenClient) release(grant uint64) {
	c.ld.AppendToken(context.Background(), &pb.AppendTokenRequest{ClientId: c.id, Fid: f1.PB(), Release: true, Grant: grant})
}

// One client at a time holds a file's append token: a second one waits
// until the holder, asked through its session, acknowledges; a holder
// that does not acknowledge in time is evicted; a release of a grant
// that a newer one overtook changes nothing; the end of a session gives
// its tokens back.
func TestAppendTokenMovesBetweenClientsOnlyAfterTheHolderAcknowledges(t *testing.T) {
	_, addr := startTokenServer(t, 0)
	a, b := newTokenClient(t, addr, 1), newTokenClient(t, addr, 2)

	ga, err := a.take(time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if g, err := a.take(time.Second); err != nil || g == ga {
		t.Fatalf("the holder asking again: grant %d, %v (want a new grant, the first was %d)", g, err, ga)
	}
	got := make(chan error, 1)
	go func() { _, err := b.take(5 * time.Second); got <- err }()
	var seq uint64
	select {
	case seq = <-a.revokes:
	case <-time.After(3 * time.Second):
		t.Fatal("the holder was not asked to give the token back")
	}
	select {
	case err := <-got:
		t.Fatalf("the second client got the token before the holder acknowledged (%v)", err)
	case <-time.After(200 * time.Millisecond):
	}
	if err := a.ack(seq); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("the second client after the holder acknowledged: %v", err)
	}

	// b holds it. A release by a with its old grant is ignored: a asking
	// again must still revoke b's.
	a.release(ga)
	got2 := make(chan error, 1)
	go func() { _, err := a.take(5 * time.Second); got2 <- err }()
	select {
	case seq = <-b.revokes:
	case <-time.After(3 * time.Second):
		t.Fatal("b was not asked to give the token back")
	}
	b.ack(seq)
	if err := <-got2; err != nil {
		t.Fatal(err)
	}

	// a holds it and never answers: b gets it once a is evicted, and a's
	// session ends.
	start := time.Now()
	if _, err := b.take(5 * time.Second); err != nil {
		t.Fatalf("after the holder failed to answer: %v", err)
	}
	if waited := time.Since(start); waited < 900*time.Millisecond {
		t.Fatalf("the token moved after %v, before the holder's time was up", waited)
	}
	for range a.revokes { // drains until the evicted session's stream ends
	}

	// b's session ends: the token is free for a new client at once.
	b.cancel()
	c := newTokenClient(t, addr, 3)
	deadline := time.Now().Add(3 * time.Second)
	for {
		_, err := c.take(300 * time.Millisecond)
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the token of a client whose session ended was not freed: %v", err)
		}
	}
}

// A client without a session gets no token (Unavailable: it retries once
// its session is back), so a token is always voided by a session's end.
func TestAppendTokenNeedsASession(t *testing.T) {
	_, addr := startTokenServer(t, 0)
	_, err := sessionless(t, addr).AppendToken(context.Background(), &pb.AppendTokenRequest{ClientId: 9, Fid: f1.PB()})
	if errno.CodeOf(err) != errno.Unavailable {
		t.Fatalf("AppendToken without a session: %v, want Unavailable", err)
	}
}

// A new leader (here: a new server) grants no token before tokenGrace has
// passed since it took over: clients of the old leader need that long to
// see their sessions end and let their appends under way land.
func TestAppendTokenWaitsOutTheGraceOfANewLeader(t *testing.T) {
	s, addr := startTokenServer(t, time.Second)
	a := newTokenClient(t, addr, 1)
	if _, err := a.take(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if since := time.Since(s.started); since < s.tokenGrace {
		t.Fatalf("granted %v after the server took over, before its grace of %v", since, s.tokenGrace)
	}
	start := time.Now()
	if _, err := a.take(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > s.tokenGrace*3/4 {
		t.Fatalf("a grant after the grace took %v: it waited out the grace again", d)
	}
}
