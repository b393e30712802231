// Package testpty opens pseudo-terminals for tests of what commands show
// at a terminal, with golang.org/x/sys/unix alone (no pty library).
package testpty

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// PTY is a pseudo-terminal: what is written to Term (a terminal, as a
// command's standard output would be) is read from Master.
type PTY struct {
	Master *os.File
	Term   *os.File
}

// Open opens a pseudo-terminal, closed when the test ends. Output
// post-processing is turned off, so that Master reads exactly the bytes
// written to Term (no \n to \r\n).
func Open(t testing.TB) *PTY {
	t.Helper()
	p, err := open()
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { p.Master.Close(); p.Term.Close() })
	return p
}

func open() (*PTY, error) {
	// Non-blocking, so that os.File polls it and ReadAll's deadline works.
	m, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	master := os.NewFile(uintptr(m), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(m, unix.TIOCSPTLCK, 0); err != nil {
		master.Close()
		return nil, fmt.Errorf("unlock the pseudo-terminal: %w", err)
	}
	n, err := unix.IoctlGetInt(m, unix.TIOCGPTN)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("number of the pseudo-terminal: %w", err)
	}
	name := "/dev/pts/" + strconv.Itoa(n)
	s, err := unix.Open(name, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		master.Close()
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	tio, err := unix.IoctlGetTermios(s, unix.TCGETS)
	if err == nil {
		tio.Oflag &^= unix.OPOST
		err = unix.IoctlSetTermios(s, unix.TCSETS, tio)
	}
	if err != nil {
		unix.Close(s)
		master.Close()
		return nil, fmt.Errorf("raw output on %s: %w", name, err)
	}
	return &PTY{Master: master, Term: os.NewFile(uintptr(s), name)}, nil
}

// ReadAll reads what has been written to Term until every holder of Term
// has closed it (the test's own Term too: close it once a command that
// writes there has started), or for at most d. The master side gets EIO,
// not EOF, once nothing holds the terminal open; that ends it too.
func (p *PTY) ReadAll(d time.Duration) []byte {
	p.Master.SetReadDeadline(time.Now().Add(d))
	b, _ := io.ReadAll(p.Master)
	return b
}
