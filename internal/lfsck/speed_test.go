package lfsck

import (
	"flag"
	"fmt"
	"syscall"
	"testing"

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

var scanFiles = flag.Int("scanfiles", 20000, "files BenchmarkScan checks (directories of up to 10000)")

// BenchmarkScan measures whole runs of each type over a tree of
// -scanfiles files of one stripe each (go test -bench Scan -scanfiles
// 1000000); files/s is the run's speed.
func BenchmarkScan(b *testing.B) {
	n := *scanFiles
	h := newHarnessPool(b, 2, uint64(n))
	dirs := (n + 9999) / 10000
	populate(h, dirs, n/dirs, 1)
	for _, types := range []string{"namespace", "scrub", "layout", "all"} {
		b.Run(types, func(b *testing.B) {
			c := New(h.env())
			var rep *Report
			for b.Loop() {
				rep = h.run(c, &pb.LfsckStartRequest{Types: []string{types}, Reset_: true})
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "files/s")
			b.Logf("%s", describe(rep))
		})
	}
}
