package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"nacre/internal/errno"
	"nacre/internal/fid"
)

// refused is what a read of an OST whose process is gone returns.
var refused = fmt.Errorf("read OST0001 object 0x100000000:0x1 at 0: connection to 127.0.0.1:9: %w",
	&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})

func testOSTClient(downAfter time.Duration) *Client {
	return &Client{cfg: Config{Timeout: time.Minute, OSTDownAfter: downAfter},
		osts: map[uint32]*ostConn{1: {index: 1, addr: "127.0.0.1:9"}}}
}

func TestRetryIOGivesUpOnAnOSTThatStaysDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testOSTClient(300 * time.Millisecond)
		ref := objRef{ost: 1, file: fid.Root, stripe: 1}
		start := time.Now()
		err := c.retryIO(context.Background(), "read", ref, func(context.Context) error { return refused })
		var down *OSTDownError
		if !errors.As(err, &down) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("got %v, want an OSTDownError wrapping connection refused", err)
		}
		if d := time.Since(start); d < 300*time.Millisecond || d > 3*time.Second {
			t.Fatalf("gave up after %v, want about 300ms", d)
		}
		want := "OST0001 (127.0.0.1:9) is down: stripe 1 of /x cannot be read (no answer for "
		if msg := down.Describe("/x"); !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, "s: connection refused)") {
			t.Fatalf("message %q", msg)
		}
		// The OST is known to be down: the next operation tries once.
		tries := 0
		start = time.Now()
		err = c.retryIO(context.Background(), "write", ref, func(context.Context) error { tries++; return refused })
		if !errors.As(err, &down) || tries != 1 || time.Since(start) > 100*time.Millisecond {
			t.Fatalf("second operation: %v after %d tries, %v", err, tries, time.Since(start))
		}
		if !strings.Contains(down.Error(), "cannot be written") {
			t.Fatalf("write message %q", down.Error())
		}
	})
}

func TestRetryIOWaitsForAnOSTThatComesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := testOSTClient(time.Second)
		ref := objRef{ost: 1, stripe: 0}
		back := time.Now().Add(400 * time.Millisecond)
		op := func(context.Context) error {
			if time.Now().Before(back) {
				return refused
			}
			return nil
		}
		if err := c.retryIO(context.Background(), "read", ref, op); err != nil {
			t.Fatalf("an OST back within the limit: %v", err)
		}
		// It answered: a new outage gets the whole limit again.
		back = time.Now().Add(400 * time.Millisecond)
		if err := c.retryIO(context.Background(), "read", ref, op); err != nil {
			t.Fatalf("second outage: %v", err)
		}
		// Without OSTDownAfter the retries run until the timeout.
		c = testOSTClient(0)
		c.cfg.Timeout = 500 * time.Millisecond
		err := c.retryIO(context.Background(), "read", ref, func(context.Context) error { return refused })
		var down *OSTDownError
		if errors.As(err, &down) || !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("without OSTDownAfter: %v", err)
		}
	})
}

// A missing object is told apart from a missing file for every
// operation on an object, and not for other ENOENTs.
func TestMissingObject(t *testing.T) {
	for _, c := range []struct {
		op   string
		want bool
	}{
		{"read OST0001 object 0x100000000:0x5 at 0", true},
		{"write OST0000 object 0x100000000:0x5 at 4096", true},
		{"truncate OST0002 object 0x100000000:0x5 to 0", true},
		{"punch OST0002 object 0x100000000:0x5 at 0 length 4096", true},
		{"getattr OST0002 object 0x100000000:0x5", true},
		{"lookup /a/b", false},
		{"open [0x200000400:0x2:0x0]", false},
	} {
		err := fmt.Errorf("wrapped: %w", &errno.Errno{Op: c.op, Errno: syscall.ENOENT})
		if got := MissingObject(err); got != c.want {
			t.Errorf("MissingObject(%q) = %v, want %v", c.op, got, c.want)
		}
	}
	if MissingObject(&errno.Errno{Op: "read OST0001 object 0x1:0x2 at 0", Errno: syscall.EIO}) {
		t.Error("an EIO is not a missing object")
	}
}
