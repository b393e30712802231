package cli

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"nacre/internal/client"
)

// TestMDTDownIsSaidOnceAndStopsTheCommand: an MDT that does not answer is
// named with its address and the cause, once ("ls /: getattr F: getattr
// F: gave up ...: dial tcp ...: i/o timeout" before), and stops a command
// of several operands.
func TestMDTDownIsSaidOnceAndStopsTheCommand(t *testing.T) {
	err := &client.MDTDownError{MDT: 0, Addr: "127.0.0.1:25729", Op: "getattr [0x200000007:0x1:0x0]", Attempts: 98, For: 30 * time.Second,
		Err: status.Error(codes.Unavailable, "connect to metadata server 127.0.0.1:25730: dial tcp 127.0.0.1:25730: connect: connection refused")}
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
