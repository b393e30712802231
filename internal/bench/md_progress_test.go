package bench

import (
	"bytes"
	"sync/atomic"
	"testing"
	"time"
)

// Off a terminal a phase reports one line when it ends, with its count and
// no figures: the table after the run holds those, and printing them twice
// confused readers of the benchmark's output.
func TestPhaseProgressOffATerminalIsOneLinePerPhase(t *testing.T) {
	var buf bytes.Buffer
	var done atomic.Int64
	end := phaseProgress(&buf, "file_create", &done, 400)
	done.Add(399)
	if buf.Len() != 0 {
		t.Fatalf("progress printed before the phase ended: %q", buf.String())
	}
	end(1500 * time.Millisecond)
	if got, want := buf.String(), "file_create: 399 of 400 ops done in 1.50 s\n"; got != want {
		t.Fatalf("progress = %q, want %q", got, want)
	}
	phaseProgress(nil, "x", &done, 1)(time.Second) // no writer: nothing, no panic
}
