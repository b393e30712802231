package lfsck

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// populate makes dirs directories of files files each (no data; stripes
// stripes each), as PopD does.
func populate(h *harness, dirs, files, stripes int) {
	root := h.mkdir(fid.Root, "popd")
	for d := 0; d < dirs; d++ {
		dir := h.mkdir(root, fmt.Sprintf("d%d", d))
		for i := 0; i < files; i++ {
			r := h.do(&pb.CreateOp{Parent: dir.PB(), Name: []byte(fmt.Sprintf("f%d", i)), Mode: syscall.S_IFREG | 0o644,
				Layout: &pb.Layout{StripeCount: int32(stripes), StripeOffset: -1}})
			if r.Errno != 0 {
				h.t.Fatal(r.Message)
			}
		}
	}
}

// TestScanSpeed measures the scan in process (NACRE_LFSCK_SPEED=files).
func TestScanSpeed(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("NACRE_LFSCK_SPEED"))
	if n == 0 {
		t.Skip("set NACRE_LFSCK_SPEED=<files> to measure")
	}
	h := newHarnessPool(t, 2, uint64(n))
	t0 := time.Now()
	populate(h, n/10000+1, 10000, 1)
	t.Logf("populated %d files in %v", n, time.Since(t0))
	for _, types := range []string{"namespace", "scrub", "layout", "all"} {
		c := New(h.env())
		t0 := time.Now()
		rep := h.run(c, &pb.LfsckStartRequest{Types: []string{types}, Reset_: true})
		d := time.Since(t0)
		objs := rep.Components["scrub"].Stats["objects"] + rep.Components["namespace"].Stats["objects"]
		t.Logf("%-9s %v: %s (%.0f objects/s)", types, d, describe(rep), float64(n)/d.Seconds())
		_ = objs
	}
}
