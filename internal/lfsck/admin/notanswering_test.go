package admin

import (
	"net"
	"os"
	"syscall"
	"testing"

	"nacre/internal/errno"
)

// TestNotAnsweringNamesTheMDT: a checker command that cannot reach an MDT
// says so as the client commands do, with the connection's cause, not with
// gRPC's "connection error: desc = ..."; an MDT that answered (an error of
// its own, a replica that does not lead) is left as it is.
func TestNotAnsweringNamesTheMDT(t *testing.T) {
	refused := &errno.Error{Code: errno.Unavailable, Msg: `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:25729: connect: connection refused"`,
		Cause: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	err := notAnswering(0, "127.0.0.1:25729", refused)
	want := "MDT0000 (127.0.0.1:25729) does not answer: connection refused; check `nacre status`"
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	if errno.CodeOf(err) != errno.Unavailable {
		t.Errorf("the code is lost: %v", errno.CodeOf(err))
	}
	for _, e := range []error{
		errno.New(errno.FailedPrecondition, "checker already running"),
		errno.NotLeader("nacre-MDT0000", 2, "127.0.0.1:4000"),
	} {
		if u := notAnswering(0, "127.0.0.1:25729", e); u != nil {
			t.Errorf("%v taken for an MDT that does not answer: %v", e, u)
		}
	}
}

// TestMdtErrorNamesTheMDTOnce: a command that gave up on an MDT says that
// it could not reach it, or what it answered, naming it once.
func TestMdtErrorNamesTheMDTOnce(t *testing.T) {
	refused := &errno.Error{Code: errno.Unavailable, Msg: `connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:25729: connect: connection refused"`,
		Cause: &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{refused, "MDT0000 (127.0.0.1:25729) does not answer: connection refused; check `nacre status`"},
		{errno.New(errno.Unavailable, "MDT0000: not the leader (no leader: 2 of 3 replicas down)"), "MDT0000: not the leader (no leader: 2 of 3 replicas down)"},
		{errno.New(errno.Unavailable, "nacre-MDT0000: the checker is taking over on this new leader; try again"), "nacre-MDT0000: the checker is taking over on this new leader; try again"},
		{errno.New(errno.FailedPrecondition, "checker already running"), "MDT0000: checker already running"},
	} {
		got := mdtError(0, notAnswering(0, "127.0.0.1:25729", c.err), c.err)
		if got.Error() != c.want {
			t.Errorf("mdtError(%v)\n got %q\nwant %q", c.err, got, c.want)
		}
		if errno.CodeOf(got) != errno.CodeOf(c.err) {
			t.Errorf("mdtError(%v): the code is lost: %v", c.err, errno.CodeOf(got))
		}
	}
}
