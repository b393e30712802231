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
