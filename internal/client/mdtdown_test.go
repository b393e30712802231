package client

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"nacre/internal/errno"
	"nacre/internal/fid"
)

// TestMDTErrorCarriesTheServersMessageOnly: a metadata call the MDT
// refused carries the MDT's words ("MDT0000 is full: ..."), which
// commands show, with no transport's words around them, and the errno
// its code stands for.
func TestMDTErrorCarriesTheServersMessageOnly(t *testing.T) {
	full := "MDT0000 is full: 140MB free of 1GB, and it keeps 144MB for its own store; remove files, or add or grow a target"
	cases := []struct {
		name string
		err  error
	}{
		{"refused", errno.New(errno.ResourceExhausted, full)},
		{"wrapped refusal", fmt.Errorf("mkdir: %w", errno.New(errno.ResourceExhausted, full))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := (&Client{}).mdtError("mkdir d", fid.FID{}, tc.err)
			var en *errno.Errno
			if !errors.As(err, &en) || en.Errno != syscall.ENOSPC {
				t.Fatalf("error %#v, want an ENOSPC *errno.Errno", err)
			}
			if !strings.HasSuffix(en.Msg, full) || strings.Contains(en.Msg, "rpc error") {
				t.Fatalf("message %q, want the server's %q alone", en.Msg, full)
			}
		})
	}
}
