package errno

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
)

// TestCodesAndErrnosMapBothWays: every errno the servers answer with comes
// back as itself through its code, and each code gives the errno a POSIX
// caller sees.
func TestCodesAndErrnosMapBothWays(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.ENOENT, syscall.EEXIST, syscall.EACCES, syscall.ENOSPC, syscall.EINVAL,
		syscall.ENOSYS, syscall.EINTR, syscall.ETIMEDOUT, syscall.EPROTO, syscall.EFBIG, syscall.EAGAIN} {
		if got := CodeFor(e).Errno(); got != e {
			t.Errorf("%v -> %v -> %v", e, CodeFor(e), got)
		}
	}
	if CodeFor(syscall.ENOTEMPTY) != Internal || Code(99).Errno() != syscall.EIO {
		t.Error("an errno or a code the table lacks")
	}
}

func TestCodeOfAndToErrno(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	for _, c := range []struct {
		name  string
		err   error
		code  Code
		errno syscall.Errno
	}{
		{"nil", nil, OK, 0},
		{"coded", New(ResourceExhausted, "full"), ResourceExhausted, syscall.ENOSPC},
		{"wrapped coded", fmt.Errorf("mkdir: %w", New(NotFound, "gone")), NotFound, syscall.ENOENT},
		{"bare errno", fmt.Errorf("open: %w", syscall.EEXIST), AlreadyExists, syscall.EEXIST},
		{"Errno", &Errno{Op: "rmdir /d", Errno: syscall.ENOTEMPTY}, Internal, syscall.ENOTEMPTY},
		{"deadline", context.DeadlineExceeded, DeadlineExceeded, syscall.ETIMEDOUT},
		{"canceled", fmt.Errorf("x: %w", context.Canceled), Canceled, syscall.EINTR},
		{"no kind", errors.New("boom"), Unknown, syscall.EIO},
		// The cause of an unreachable server is ECONNREFUSED, but the
		// caller sees the code's errno.
		{"unreachable", Unreachable("metadata server", "127.0.0.1:1", refused), Unavailable, syscall.EIO},
	} {
		if got := CodeOf(c.err); got != c.code {
			t.Errorf("%s: CodeOf = %v, want %v", c.name, got, c.code)
		}
		if got := ToErrno(c.err); got != c.errno {
			t.Errorf("%s: ToErrno = %v, want %v", c.name, got, c.errno)
		}
	}
}

func TestErrorIsWhatItStandsFor(t *testing.T) {
	if !errors.Is(New(DeadlineExceeded, "slow"), context.DeadlineExceeded) || errors.Is(New(Unavailable, "x"), context.DeadlineExceeded) {
		t.Error("DeadlineExceeded")
	}
	if !errors.Is(New(NotFound, "x"), syscall.ENOENT) || errors.Is(New(NotFound, "x"), syscall.EEXIST) {
		t.Error("an errno")
	}
	refused := &net.OpError{Op: "dial", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	if !errors.Is(Unreachable("MGS", "h:1", refused), syscall.ECONNREFUSED) {
		t.Error("the cause is lost")
	}
}

func TestRetryableIsAnAnswerToRetry(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{New(Unavailable, "down"), true},
		{NotLeader("MDT0000", 2, "h:1"), true},
		{New(Aborted, "busy"), true},
		{New(NotFound, "x"), false},
		{&Errno{Errno: syscall.EAGAIN}, false}, // a POSIX result, not a failed call
		{context.DeadlineExceeded, false},
		{nil, false},
	} {
		if got := Retryable(c.err); got != c.want {
			t.Errorf("Retryable(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}

// TestFailureRoundTrip: what a transport carries gives the same error back.
func TestFailureRoundTrip(t *testing.T) {
	for _, e := range []*Error{
		NotLeader("MGS", 3, "127.0.0.1:7001"),
		NotLeader("MGS", 0, ""),
		{Code: DeadlineExceeded, Msg: "not caught up; it stays a learner", Reason: LearnerKept},
		New(PermissionDenied, "no"),
	} {
		got := FromFailure(e.Failure())
		if got.Code != e.Code || got.Msg != e.Msg || got.Reason != e.Reason || (got.Leader == nil) != (e.Leader == nil) ||
			(got.Leader != nil && *got.Leader != *e.Leader) {
			t.Errorf("%+v came back as %+v", e, got)
		}
	}
	if FromFailure(&pb.Failure{Message: "x"}).Code != Unknown {
		t.Error("a failure without a code is an error all the same")
	}
}

func TestFromKeepsTheCodeOfAWrappedError(t *testing.T) {
	inner := NotLeader("MDT0000", 2, "h:1")
	e := From(fmt.Errorf("precreate: %w", inner))
	if e.Code != Unavailable || e.Msg != "precreate: "+inner.Msg || e.Leader == nil || e.Leader.ID != 2 {
		t.Errorf("From = %+v", e)
	}
	if From(inner) != inner || From(nil) != nil {
		t.Error("From of an Error or nil")
	}
	if l, ok := LeaderOf(fmt.Errorf("x: %w", inner)); !ok || l.Addr != "h:1" {
		t.Errorf("LeaderOf = %+v, %v", l, ok)
	}
	if ReasonOf(&Error{Code: DeadlineExceeded, Reason: LearnerKept}) != LearnerKept || ReasonOf(errors.New("x")) != "" {
		t.Error("ReasonOf")
	}
}
