package fusefs

import (
	"context"
	"errors"
	"syscall"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// status maps a client library error to a FUSE status. The library's
// errors carry POSIX errno values (*rpc.Errno unwraps to syscall.Errno);
// anything else (a timeout, a transport failure the retries could not
// hide) is EIO, logged, so the cause is in the mount's log.
func (fs *FS) status(op string, err error) fuse.Status {
	if err == nil {
		return fuse.OK
	}
	var e syscall.Errno
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
