package fusefs

import (
	"context"
	"errors"
	"fmt"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"

	"nacre/internal/client"
)

// status maps a client library error to a FUSE status. The library's
// errors carry POSIX errno values (*errno.Errno unwraps to syscall.Errno);
// anything else (a timeout, a transport failure the retries could not
// hide, an OST that stayed unreachable) is EIO, logged, so the cause is in
// the mount's log. A transport error's errno (ECONNREFUSED from a dial)
// says nothing about the file and is not passed on: an application would
// report "Connection refused" for a read.
func (fs *FS) status(op string, err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	var down *client.OSTDownError
	if errors.As(err, &down) {
		fs.log.Warn("OST unreachable: I/O error", "op", op, "ost", fmt.Sprintf("OST%04x", down.OST), "addr", down.Addr, "err", err)
		return fuse.EIO
	}
	if client.MissingObject(err) {
		// Not "no such file": the file is there, one of its stripes'
		// objects is not (ENOENT made `cat` say the file did not exist).
		fs.log.Warn("an OST object of the file is missing (a dangling stripe; `nacre lfsck start -t layout` reports it, and with -c makes it again, empty): I/O error",
			"op", op, "err", err)
		return fuse.EIO
	}
	var e syscall.Errno
	if errors.As(err, &e) && e != 0 && transportErrno(e) {
		fs.log.Warn("server unreachable: I/O error", "op", op, "err", err)
		return fuse.EIO
	}
	if errors.As(err, &e) && e != 0 {
		if e == syscall.EIO {
			fs.log.Warn("I/O error", "op", op, "err", err)
		}
		return fuse.Status(e)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		fs.log.Warn("operation timed out", "op", op, "err", err)
		return fuse.Status(syscall.ETIMEDOUT)
	}
	fs.log.Warn("I/O error", "op", op, "err", err)
	return fuse.EIO
}

// transportErrno reports whether e is a network failure (of a dial or a
// connection) rather than an answer about the file.
func transportErrno(e syscall.Errno) bool {
	switch e {
	case syscall.ECONNREFUSED, syscall.ECONNRESET, syscall.ECONNABORTED, syscall.EHOSTUNREACH,
		syscall.ENETUNREACH, syscall.ENETDOWN, syscall.EPIPE, syscall.ENOTCONN:
		return true
	}
	return false
}
