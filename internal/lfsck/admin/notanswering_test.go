package admin

import (
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestNotAnsweringNamesTheMDT: a checker command that cannot reach an MDT
// says so as the client commands do, not with gRPC's "connection error:
// desc = ..."; an MDT that answered (an error of its own, a replica that
// does not lead) is left as it is.
func TestNotAnsweringNamesTheMDT(t *testing.T) {
	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:25729: connect: connection refused"`)
	err := notAnswering(0, "127.0.0.1:25729", refused)
	want := "MDT0000 (127.0.0.1:25729) does not answer: connection refused; check `nacre status`"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("the gRPC code is lost: %v", status.Code(err))
	}
	for _, e := range []error{
		status.Error(codes.FailedPrecondition, "checker already running"),
		status.Error(codes.Unavailable, "nacre-MDT0000: not the leader (leader is replica 2 at 127.0.0.1:4000)"),
	} {
		if u := notAnswering(0, "127.0.0.1:25729", e); u != nil {
			t.Errorf("%v taken for an MDT that does not answer: %v", e, u)
		}
	}
}

// TestMdtErrorNamesTheMDTOnce: a command that gave up on an MDT says that
// it could not reach it, or what it answered, naming it once.
func TestMdtErrorNamesTheMDTOnce(t *testing.T) {
	refused := status.Error(codes.Unavailable, `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:25729: connect: connection refused"`)
	for _, c := range []struct {
		err  error
		want string
	}{
		{refused, "MDT0000 (127.0.0.1:25729) does not answer: connection refused; check `nacre status`"},
		{status.Error(codes.Unavailable, "MDT0000: not the leader (no leader: 2 of 3 replicas down)"), "MDT0000: not the leader (no leader: 2 of 3 replicas down)"},
		{status.Error(codes.Unavailable, "nacre-MDT0000: the checker is taking over on this new leader; try again"), "nacre-MDT0000: the checker is taking over on this new leader; try again"},
		{status.Error(codes.FailedPrecondition, "checker already running"), "MDT0000: rpc error: code = FailedPrecondition desc = checker already running"},
	} {
		got := mdtError(0, notAnswering(0, "127.0.0.1:25729", c.err), c.err)
		if got.Error() != c.want {
			t.Errorf("mdtError(%v)\n got %q\nwant %q", c.err, got, c.want)
		}
		if status.Code(got) != status.Code(c.err) {
			t.Errorf("mdtError(%v): the gRPC code is lost: %v", c.err, status.Code(got))
		}
	}
}
