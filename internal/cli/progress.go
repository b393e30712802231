package cli

import (
	"fmt"
	"io"
	"time"

	"nacre/internal/layout"
)

// Long copies (put, get) show how far they are, so that a copy of
// hundreds of megabytes is not a silent wait: one line on standard error,
// redrawn in place, only when standard error is a terminal (scripts and
// logs get nothing), wiped when the copy ends, as bench's phase lines are.

// progressEvery is how often the line is redrawn at most: often enough to
// look alive, rarely enough to cost nothing against a copy.
const progressEvery = 200 * time.Millisecond

// progress is one copy's line. A nil *progress shows nothing, so that
// copies call it unconditionally.
type progress struct {
	w     io.Writer
	what  string // "put /big.iso"
	total int64  // bytes; -1: not known (standard input)
	start time.Time
	drawn time.Time // when the line was last drawn (zero: never)
	now   func() time.Time
}

// newProgress is the progress line of a copy of total bytes (-1 if not
// known) named what, or nil if standard error is not a terminal.
func newProgress(e Env, what string, total int64) *progress {
	w := e.Stderr()
	if !IsTerminal(w) {
		return nil
	}
	return startProgress(w, what, total, time.Now)
}

// newProgressBeside is newProgress for a copy to standard output: none
// when standard output is a terminal too, where the line's carriage
// returns landed in the middle of the content (curl draws none then).
func newProgressBeside(e Env, what string, total int64) *progress {
	if IsTerminal(e.Out) {
		return nil
	}
	return newProgress(e, what, total)
}

func startProgress(w io.Writer, what string, total int64, now func() time.Time) *progress {
	return &progress{w: w, what: what, total: total, start: now(), now: now}
}

// at says the copy has reached done bytes; the line is redrawn if it was
// not for progressEvery.
func (p *progress) at(done uint64) {
	if p == nil {
		return
	}
	t := p.now()
	if !p.drawn.IsZero() && t.Sub(p.drawn) < progressEvery {
		return
	}
	if p.drawn.IsZero() && t.Sub(p.start) < progressEvery {
		return // a copy that ends at once shows nothing
	}
	p.drawn = t
	fmt.Fprintf(p.w, "\r%s\033[K", progressLine(p.what, done, p.total, t.Sub(p.start)))
}

// end wipes the line (the command's own output or error follows).
func (p *progress) end() {
	if p == nil || p.drawn.IsZero() {
		return
	}
	fmt.Fprint(p.w, "\r\033[K")
}

// progressLine is "put /big.iso: 96MB of 512MB (18%), 48MB/s": bytes done,
// of how many when known, and the average rate so far.
func progressLine(what string, done uint64, total int64, elapsed time.Duration) string {
	s := fmt.Sprintf("%s: %sB", what, layout.FormatSize(done))
	if total >= 0 {
		pct := 100.0
		if total > 0 {
			pct = min(100, float64(done)*100/float64(total))
		}
		s += fmt.Sprintf(" of %sB (%.0f%%)", layout.FormatSize(uint64(total)), pct)
	}
	if secs := elapsed.Seconds(); secs > 0 {
		s += fmt.Sprintf(", %sB/s", layout.FormatSize(uint64(float64(done)/secs)))
	}
	return s
}
