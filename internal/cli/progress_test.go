package cli

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestProgressLine(t *testing.T) {
	cases := []struct {
		name    string
		done    uint64
		total   int64
		elapsed time.Duration
		want    string
	}{
		{"part of a known size", 96 << 20, 512 << 20, 2 * time.Second, "put /big: 96MB of 512MB (19%), 48MB/s"},
		{"all of it", 512 << 20, 512 << 20, 4 * time.Second, "put /big: 512MB of 512MB (100%), 128MB/s"},
		{"standard input: no total", 3 << 30, -1, 3 * time.Second, "put /big: 3GB, 1GB/s"},
		{"an empty file", 0, 0, time.Second, "put /big: 0B of 0B (100%), 0B/s"},
		{"a file grown since its stat", 2 << 20, 1 << 20, time.Second, "put /big: 2MB of 1MB (100%), 2MB/s"},
		{"no time yet", 1 << 10, 1 << 20, 0, "put /big: 1KB of 1MB (0%)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := progressLine("put /big", c.done, c.total, c.elapsed); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestProgressIsThrottled: the line is drawn at most every progressEvery
// (not once per chunk copied), not at all for a copy that ends within
// the first progressEvery, and wiped at the end only if drawn.
func TestProgressIsThrottled(t *testing.T) {
	cases := []struct {
		name  string
		steps []time.Duration // when at is called, from the start
		draws int
	}{
		{"a copy that ends at once", []time.Duration{0, 10 * time.Millisecond, 150 * time.Millisecond}, 0},
		{"chunks every 10ms for a second", func() (s []time.Duration) {
			for d := time.Duration(0); d <= time.Second; d += 10 * time.Millisecond {
				s = append(s, d)
			}
			return s
		}(), 5},
		{"one slow chunk after another", []time.Duration{time.Second, 2 * time.Second, 2100 * time.Millisecond, 3 * time.Second}, 3},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			t0 := time.Unix(1000, 0)
			now := t0
			p := startProgress(&buf, "get /f", 100<<20, func() time.Time { return now })
			for i, d := range c.steps {
				now = t0.Add(d)
				p.at(uint64(i) << 20)
			}
			p.end()
			out := buf.String()
			if got := strings.Count(out, "get /f: "); got != c.draws {
				t.Errorf("drawn %d times, want %d:\n%q", got, c.draws, out)
			}
			if wiped := strings.HasSuffix(out, "\r\033[K"); wiped != (c.draws > 0) {
				t.Errorf("wiped at the end: %v, want %v:\n%q", wiped, c.draws > 0, out)
			}
		})
	}
	var nilP *progress // not a terminal: nothing, and no panic
	nilP.at(1)
	nilP.end()
}

// openPty opens a new pseudo-terminal and returns its terminal end.
func openPty(t *testing.T) *os.File {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestNoProgressBesideContentOnTheTerminal: `nacre get FILE -` on a
// terminal draws no progress line there (its carriage returns landed in
// the middle of the file's content); with the content redirected it does.
func TestNoProgressBesideContentOnTheTerminal(t *testing.T) {
	tty := openPty(t)
	if p := newProgressBeside(Env{Out: tty, Err: tty}, "get /f", 100); p != nil {
		t.Error("progress drawn on the terminal the content goes to")
	}
	if p := newProgressBeside(Env{Out: io.Discard, Err: tty}, "get /f", 100); p == nil {
		t.Error("no progress on the terminal with the content redirected")
	}
}
