package cli

import (
	"context"
	"errors"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	"nacre/internal/client"
	"nacre/internal/errno"
)

// TestMDTDownIsSaidOnceAndStopsTheCommand: an MDT that does not answer is
// named with its address and the cause, once ("ls /: getattr F: getattr
// F: gave up ...: dial tcp ...: i/o timeout" before), and stops a command
// of several operands.
func TestMDTDownIsSaidOnceAndStopsTheCommand(t *testing.T) {
	err := &client.MDTDownError{MDT: 0, Addr: "127.0.0.1:25729", Op: "getattr [0x200000007:0x1:0x0]", Attempts: 98, For: 30 * time.Second,
		Err: errno.Unreachable("connect to metadata server", "127.0.0.1:25730",
			&net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}})}
	want := "ls /: MDT0000 (127.0.0.1:25729) does not answer: connection refused; check `nacre status`"
	if got := opError("ls", "/", err).Error(); got != want {
		t.Errorf("message\n got %q\nwant %q", got, want)
	}
	if !fatal(context.Background(), opError("ls", "/", err)) {
		t.Error("an MDT that does not answer does not stop the command")
	}
	if !errors.Is(err, syscall.EIO) {
		t.Error("an MDT that does not answer is not EIO")
	}
}
