package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"time"

	"nacre/internal/errno"
	"nacre/internal/fid"
)

// MDTDownError is a metadata call given up because its MDT did not answer
// within Config.Timeout.
type MDTDownError struct {
	MDT      uint32
	Addr     string // the MDT's address as `nacre status` shows it ("N replicas" if several)
	Op       string // the call, e.g. "getattr [0x200000007:0x1:0x0]"
	Attempts int
	For      time.Duration
	Err      error // the attempt's error that says most (not one cut short by the timeout)
}

func (e *MDTDownError) Error() string {
	return fmt.Sprintf("%s: %s (gave up after %d attempts in %.1fs)", e.Op, e.Describe(), e.Attempts, e.For.Seconds())
}

// Describe is the message without the call: "MDT0000 (127.0.0.1:PORT)
// does not answer: connection refused".
func (e *MDTDownError) Describe() string {
	why := ShortCause(e.Err)
	if why == noAnswerInTime {
		why += " (a replicated MDT answers nothing while a majority of its replicas is down; check nacre status)"
	}
	return fmt.Sprintf("MDT%04x (%s) does not answer: %s", e.MDT, e.Addr, why)
}

// Unwrap is EIO, what a POSIX caller gets; not the last attempt's
// *errno.Error, which errno.Retryable would take for a call to retry for
// another timeout when it was retried for one already.
func (e *MDTDownError) Unwrap() error { return syscall.EIO }

const noAnswerInTime = "no answer in time"

// noAnswerTalk is a server that accepts connections but does not speak
// (a stopped process, another program on the port).
const noAnswerTalk = "it accepts connections but does not answer"

// closesAtOnce is a server that closes a connection before it says
// anything: what a server with TLS does to a client without.
const closesAtOnce = "it closes every connection at once (a cluster with TLS does so to a client without credentials: give --tls-dir DIR or NACRE_TLS_DIR)"

// ShortCause is the reason a server could not be reached, without the
// layers of the transport and dialling around it: "no answer in time",
// the connection's errno ("connection refused", not `connection error:
// desc = "transport: Error while dialing: dial tcp ...: connect:
// connection refused"`), "i/o timeout", else the error's message.
func ShortCause(err error) string {
	if errno.CodeOf(err) == errno.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded) {
		return noAnswerInTime
	}
	if m := err.Error(); strings.Contains(m, "connection closed before server preface") || strings.Contains(m, "error reading server preface: EOF") {
		return closesAtOnce
	}
	if strings.Contains(err.Error(), "server preface") {
		// gRPC's handshake got no answer within its connect timeout.
		return noAnswerTalk
	}
	var e *errno.Error
	if errors.As(err, &e) && e.Cause != nil {
		var en syscall.Errno
		switch {
		case errors.As(e.Cause, &en):
			return en.Error()
		case errors.Is(e.Cause, os.ErrDeadlineExceeded):
			return "i/o timeout"
		case errors.Is(e.Cause, io.EOF), errors.Is(e.Cause, io.ErrUnexpectedEOF):
			return "EOF"
		}
	}
	return err.Error()
}

// unreachableError says a server could not be reached in a few words and
// keeps the whole error for errors.Is and errors.As.
type unreachableError struct {
	msg string
	err error
}

func (e *unreachableError) Error() string { return e.msg }
func (e *unreachableError) Unwrap() error { return e.err }

// Unreachable is the error of a server that could not be reached: what
// failed ("cannot reach the MGS at ADDR"), the short cause (ShortCause)
// and what to do.
func Unreachable(what string, err error, hint string) error {
	return &unreachableError{msg: fmt.Sprintf("%s: %s (%s)", what, ShortCause(err), hint), err: err}
}

// gaveUpError is Client.retry giving up on a call that kept failing with a
// retryable error.
type gaveUpError struct {
	what     string
	attempts int
	took     time.Duration
	err      error
}

func (e *gaveUpError) Error() string {
	return fmt.Sprintf("%s: gave up after %d attempts: %v", e.what, e.attempts, e.err)
}

func (e *gaveUpError) Unwrap() error { return e.err }

// mdtError is the error of a metadata call (what, on f's MDT) that failed
// with err: an *MDTDownError if the MDT did not answer within the timeout,
// else an *errno.Errno (retry's error already names the call: it is not
// named twice).
func (c *Client) mdtError(what string, f fid.FID, err error) error {
	var g *gaveUpError
	if !errors.As(err, &g) {
		// The server's message ("MDT0000 is full: ..."), which users see,
		// as the errno a POSIX caller gets.
		return &errno.Errno{Op: what, Errno: errno.ToErrno(err), Msg: err.Error()}
	}
	d := &MDTDownError{Op: what, Attempts: g.attempts, For: g.took, Err: g.err}
	if m, merr := c.mdtFor(f); merr == nil {
		c.mu.Lock()
		d.MDT, d.Addr = m.index, m.addr
		c.mu.Unlock()
	}
	return d
}
