package client

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
)

// silentLDLM opens session streams that are never welcomed: a replica
// that left the group, or whose connection never becomes ready.
type silentLDLM struct{ nacregrpc.LDLMClient }

type silentStream struct {
	grpc.BidiStreamingClient[pb.SessionUp, pb.SessionDown]
	ctx context.Context
}

func (silentLDLM) Session(ctx context.Context, _ ...grpc.CallOption) (grpc.BidiStreamingClient[pb.SessionUp, pb.SessionDown], error) {
	return silentStream{ctx: ctx}, nil
}

func (silentStream) Send(*pb.SessionUp) error { return nil }

func (s silentStream) Recv() (*pb.SessionDown, error) {
	<-s.ctx.Done()
	return nil, s.ctx.Err()
}

// TestASessionNotWelcomedIsGivenUp: a session stream the MDT never
// registers ends after welcomeWait, so that the session asks again which
// replica leads. It waited forever: a mount whose session went to a dead
// replica the MGS still listed had no session for good, and every open
// failed after 60 s.
func TestASessionNotWelcomedIsGivenUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := &Session{c: &Client{id: 1, log: slog.New(slog.NewTextHandler(io.Discard, nil))}, mdts: map[uint32]*sessMDT{}}
		s.ctx, s.cancel = context.WithCancel(context.Background())
		defer s.cancel()
		m := &sessMDT{ldlm: silentLDLM{}, up: make(chan struct{})}
		done := make(chan error, 1)
		start := time.Now()
		go func() { done <- s.stream(m) }()
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("a stream never welcomed ended without an error")
			}
			if d := time.Since(start); d < welcomeWait {
				t.Fatalf("given up after %v, before welcomeWait", d)
			}
		case <-time.After(welcomeWait + time.Second):
			t.Fatalf("a session stream never welcomed is still waiting %v after welcomeWait", time.Second)
		}
		select {
		case <-m.up:
			t.Fatal("the MDT counts as up without a welcome")
		default:
		}
	})
}
