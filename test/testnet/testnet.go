// Package testnet holds what tests of a server's port share: whether the
// server closed a connection, and in time. Only tests import it.
package testnet

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// ClosedWithin reports whether the server closes nc within d (reading and
// dropping whatever it sends meanwhile).
func ClosedWithin(nc net.Conn, d time.Duration) bool {
	nc.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, nc)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// ExpectClosedAfter connects to addr, sends sent, and fails the test
// unless the server closes the connection after about timeout: not
// within half of it, and within twice it and a second.
func ExpectClosedAfter(t *testing.T, addr, what string, sent []byte, timeout time.Duration) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write(sent)
	start := time.Now()
	if !ClosedWithin(nc, 2*timeout+time.Second) {
		t.Errorf("%s: the server still holds the connection after %v (its timeout is %v)", what, time.Since(start), timeout)
	} else if took := time.Since(start); took < timeout/2 {
		t.Errorf("%s: closed after %v, before its timeout %v", what, took, timeout)
	}
}
