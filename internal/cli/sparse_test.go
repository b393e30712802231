package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// dataRuns cuts at the file's block boundaries, whatever the buffer's
// offset, and keeps every non-zero byte in some run.
func TestDataRunsKeepEveryByte(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  uint64
		size int
		set  []int // offsets in the buffer of non-zero bytes
		runs int
	}{
		{"all zeros", 0, 4 * sparseBlock, nil, 0},
		{"one byte in the middle", 0, 4 * sparseBlock, []int{2*sparseBlock + 5}, 1},
		{"first and last byte", 0, 4 * sparseBlock, []int{0, 4*sparseBlock - 1}, 2},
		{"unaligned buffer", 1000, 3 * sparseBlock, []int{sparseBlock - 1001, sparseBlock - 1000}, 1},
		{"short tail", 0, sparseBlock + 10, []int{sparseBlock + 9}, 1},
		{"adjacent blocks merge", 0, 3 * sparseBlock, []int{10, sparseBlock + 10, 2*sparseBlock + 10}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := make([]byte, tc.size)
			for _, i := range tc.set {
				p[i] = 0xa5
			}
			out := make([]byte, tc.size)
			runs := 0
			err := dataRuns(p, tc.off, func(run []byte, off uint64) error {
				runs++
				if off < tc.off || int(off-tc.off)+len(run) > tc.size {
					t.Fatalf("run at %d+%d outside the buffer at %d+%d", off, len(run), tc.off, tc.size)
				}
				if off%sparseBlock != 0 && off != tc.off {
					t.Errorf("run at %d does not start at a block boundary or the buffer's start", off)
				}
				copy(out[off-tc.off:], run)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(out, p) {
				t.Error("the runs lost non-zero bytes")
			}
			if runs != tc.runs {
				t.Errorf("%d runs, want %d", runs, tc.runs)
			}
		})
	}
}

// A file written through sparseFile reads back the same and allocates
// only its blocks of data, also when it ends in zeros.
func TestSparseFileLeavesHoles(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := make([]byte, 64<<20)
	copy(want[10<<20:], "data in the middle")
	copy(want[30<<20:], "more")
	sf := &sparseFile{f: f}
	for p := want; len(p) > 0; {
		n := min(len(p), 3<<20+17) // writes not aligned to blocks
		if _, err := sf.Write(p[:n]); err != nil {
			t.Fatal(err)
		}
		p = p[n:]
	}
	if err := sf.finish(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(f.Name())
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v), different from the %d written", len(got), err, len(want))
	}
	var st syscall.Stat_t
	if err := syscall.Stat(f.Name(), &st); err != nil {
		t.Fatal(err)
	}
	if st.Blocks*512 > 1<<20 {
		t.Errorf("a 64 MiB file with two short runs of data allocates %d bytes", st.Blocks*512)
	}
}
