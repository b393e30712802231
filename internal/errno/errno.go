// Package errno is how a failure is told across Nacre's transports, with
// no transport in it: the Code of a failed call, the one table between codes
// and POSIX errno values, the Errno a client call returns for a POSIX result
// (ENOENT, ENOSPC, ...), and the typed refusal of a replica that does not
// lead, which carries the leader's address as data.
//
// Servers return these errors from their handlers; each transport carries
// them as data (the metadata RPC and the bulk protocol in their frames,
// gRPC in a status with a pb.Failure detail, internal/grpcx) and gives the
// caller the same values back. So callers decide with errors.As and CodeOf,
// never by reading an error's text.
//
// The package imports only the standard library and the message package
// (api/nacrepb), so the client library and the protocols that exist to
// avoid gRPC do not link gRPC through it.
package errno

import (
	"context"
	"errors"
	"fmt"
	"syscall"
)

// Code is the kind of a failed call. The numbers are gRPC's status codes,
// so the gRPC adapter converts them one to one and every frame that
// carries a Code means the same on every transport.
type Code uint16

// The codes. OK is never the Code of an error.
const (
	OK                 Code = 0
	Canceled           Code = 1
	Unknown            Code = 2
	InvalidArgument    Code = 3
	DeadlineExceeded   Code = 4
	NotFound           Code = 5
	AlreadyExists      Code = 6
	PermissionDenied   Code = 7
	ResourceExhausted  Code = 8
	FailedPrecondition Code = 9
	Aborted            Code = 10
	OutOfRange         Code = 11
	Unimplemented      Code = 12
	Internal           Code = 13
	Unavailable        Code = 14
	DataLoss           Code = 15
	Unauthenticated    Code = 16
)

var codeNames = [...]string{"OK", "Canceled", "Unknown", "InvalidArgument", "DeadlineExceeded", "NotFound",
	"AlreadyExists", "PermissionDenied", "ResourceExhausted", "FailedPrecondition", "Aborted", "OutOfRange",
	"Unimplemented", "Internal", "Unavailable", "DataLoss", "Unauthenticated"}

func (c Code) String() string {
	if int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("Code(%d)", uint16(c))
}

// codeErrno is the one table between codes and errno values: a code gives
// the errno a POSIX caller sees, and an errno (the first row that names
// it) gives the code a server answers with.
var codeErrno = []struct {
	code  Code
	errno syscall.Errno
}{
	{NotFound, syscall.ENOENT},
	{AlreadyExists, syscall.EEXIST},
	{PermissionDenied, syscall.EACCES},
	{InvalidArgument, syscall.EINVAL},
	{ResourceExhausted, syscall.ENOSPC},
	{Unimplemented, syscall.ENOSYS},
	{Canceled, syscall.EINTR},
	{DeadlineExceeded, syscall.ETIMEDOUT},
	{FailedPrecondition, syscall.EPROTO},
	{Unavailable, syscall.EIO},
	{OutOfRange, syscall.EFBIG},
	{Aborted, syscall.EAGAIN},
	{DataLoss, syscall.EIO},
	{Internal, syscall.EIO},
	{Unknown, syscall.EIO},
	{Unauthenticated, syscall.EACCES},
}

// Errno is the POSIX errno a caller should see for code c.
func (c Code) Errno() syscall.Errno {
	for _, m := range codeErrno {
		if m.code == c {
			return m.errno
		}
	}
	return syscall.EIO
}

// CodeFor is the code a server answers with for errno e.
func CodeFor(e syscall.Errno) Code {
	for _, m := range codeErrno {
		if m.errno == e {
			return m.code
		}
	}
	return Internal
}

// Error is a failed call: its code, the server's words, and, for a replica
// that does not lead, who does.
type Error struct {
	Code Code
	Msg  string
	// Leader is set when a replica refused because it does not lead
	// (Code is then Unavailable).
	Leader *Leader
	// Reason names a failure a caller may act on beyond its code (the
	// Reason constants); empty for most.
	Reason Reason
	// Cause is the error of this side that the Error stands for, when
	// there is one: why a connection failed (a refused or reset
	// connection: a *net.OpError), or the wait that ran out. It never
	// crosses the wire.
	Cause error
}

// Reason names a failure that callers tell apart from others of its code.
type Reason string

// The reasons.
const (
	// LearnerKept: a replica added to a group did not catch up in time
	// and stays a learner; adding it again promotes it.
	LearnerKept Reason = "learner-kept"
	// Recovering: an MDT restarted after losing its log's unsynced tail
	// and is gathering the changes clients kept (Unavailable: retry,
	// after giving them back with Replay).
	Recovering Reason = "recovering"
)

// ReasonOf is err's Reason, empty if it has none.
func ReasonOf(err error) Reason {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ""
}

// Leader is the leader a replica that does not lead knows of.
type Leader struct {
	ID   uint64 // its replica id; 0 when none is known (an election is under way)
	Addr string // its address for this service; empty when none is known
}

func (e *Error) Error() string { return e.Msg }

// Unwrap is the Cause.
func (e *Error) Unwrap() error { return e.Cause }

// Is lets errors.Is(err, syscall.ENOENT) and the context errors work on
// an Error, as they do on what it stands for.
func (e *Error) Is(target error) bool {
	switch target {
	case context.DeadlineExceeded:
		return e.Code == DeadlineExceeded
	case context.Canceled:
		return e.Code == Canceled
	}
	if t, ok := target.(syscall.Errno); ok {
		return e.Code.Errno() == t
	}
	return false
}

// New returns an Error of code c saying msg.
func New(c Code, msg string) *Error { return &Error{Code: c, Msg: msg} }

// Errorf returns an Error of code c with a formatted message.
func Errorf(c Code, format string, args ...any) *Error {
	return &Error{Code: c, Msg: fmt.Sprintf(format, args...)}
}

// NotLeader is the refusal of a replica that does not lead: who names the
// group (e.g. "MDT0000"); id and addr are the leader it knows (0 and ""
// when it knows none).
func NotLeader(who string, id uint64, addr string) *Error {
	msg := "not the leader (no leader: an election is under way, or too few replicas are up for one)"
	if id != 0 {
		msg = fmt.Sprintf("not the leader (leader is replica %d at %s)", id, addr)
	}
	if who != "" {
		msg = who + ": " + msg
	}
	return &Error{Code: Unavailable, Msg: msg, Leader: &Leader{ID: id, Addr: addr}}
}

// LeaderOf reads a not-the-leader refusal, possibly wrapped: ok is false
// for any other error.
func LeaderOf(err error) (l Leader, ok bool) {
	var e *Error
	if errors.As(err, &e) && e.Leader != nil {
		return *e.Leader, true
	}
	return Leader{}, false
}

// CodeOf is the code of err: an Error's own; for an Errno, a bare errno or
// a context error, the code the table gives; Unknown for anything else
// and OK for nil.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return CodeFor(en)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	case errors.Is(err, context.Canceled):
		return Canceled
	}
	return Unknown
}

// From returns err as an Error: itself if it is one (or wraps one, whose
// code it keeps, with err's fuller message), else an Error of CodeOf(err)
// saying err's message. It is how a transport's server side turns what a
// handler returned into what it sends.
func From(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e == err {
			return e
		}
		return &Error{Code: e.Code, Msg: err.Error(), Leader: e.Leader, Reason: e.Reason, Cause: e.Cause}
	}
	return &Error{Code: CodeOf(err), Msg: err.Error()}
}

// ToErrno maps any error to the errno a POSIX caller should see.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code.Errno()
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return CodeOf(err).Errno()
}

// Unreachable is the failure of a call that could not reach addr (what
// names the server, e.g. "metadata server"): Unavailable, with the
// connection's error as its Cause.
func Unreachable(what, addr string, cause error) *Error {
	return &Error{Code: Unavailable, Msg: fmt.Sprintf("%s %s: %v", what, addr, cause), Cause: cause}
}

// Retryable reports whether a call failed for a reason that a retry with
// the same request id can fix (a server restarting, a connection lost, a
// replica that does not lead): an Error that is Unavailable or Aborted. A
// POSIX result (an Errno, a bare errno) is an answer, never retried.
func Retryable(err error) bool {
	var e *Error
	return errors.As(err, &e) && (e.Code == Unavailable || e.Code == Aborted)
}

// Errno is a POSIX result with context, as client calls return it: the
// MDS answers a namespace operation with an errno in its reply, the bulk
// protocol in its frame.
type Errno struct {
	Op    string // what was attempted, e.g. "create /a/b"
	Errno syscall.Errno
	Msg   string // server detail, may be empty
}

func (e *Errno) Error() string {
	s := e.Errno.Error()
	if e.Msg != "" {
		s = e.Msg
	}
	if e.Op == "" {
		return s
	}
	return e.Op + ": " + s
}

// Unwrap lets errors.Is(err, syscall.ENOENT) work.
func (e *Errno) Unwrap() error { return e.Errno }

// NewErrno wraps an in-band errno; 0 gives nil.
func NewErrno(op string, errno int32, msg string) error {
	if errno == 0 {
		return nil
	}
	return &Errno{Op: op, Errno: syscall.Errno(errno), Msg: msg}
}

// VersionMismatch is the refusal of a peer that speaks another protocol
// version, in the same words on every transport and on both sides. It
// names the fix for both ends of an upgrade: the side of the older
// protocol is the one to upgrade, and `nacre --version` tells which
// protocol a binary speaks.
func VersionMismatch(peer string, ours int, peerRole, ourRole string) *Error {
	return Errorf(FailedPrecondition, "incompatible protocol versions: %s speaks Nacre protocol %s, %s speaks protocol %d; "+
		"the servers and clients of a file system speak one protocol: run releases of the same protocol on both, "+
		"upgrading the side of the older one (`nacre --version` names a binary's protocol)",
		peerRole, peer, ourRole, ours)
}
