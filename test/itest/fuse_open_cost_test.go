package itest

import (
	"fmt"
	"os"
	"testing"
	"time"
)

// TestFuseReadBackAsksTheMDSOncePerOpen: files written through a mount
// and read back through it within the close batch (their last closes not
// told to the MDS yet) cost one MDS getattr per open, the kernel's for
// its permission check: the open takes the attributes that getattr just
// fetched. A write through another mount in between is still seen
// (close-to-open).
func TestFuseReadBackAsksTheMDSOncePerOpen(t *testing.T) {
	cl, a, b := twoMounts(t)
	metric := mdtMetricReader(t, mdtMetricsURL(t, cl))
	getattrs := func() float64 { return metric("nacre_mds_ops_total", map[string]string{"op": "getattr"}) }
	must := mustOf(t)
	must(os.Mkdir(a.Path("d"), 0o755))
	const files = 40
	for i := range files {
		must(os.WriteFile(a.Path("d", fmt.Sprint(i)), []byte(fmt.Sprint("v", i)), 0o644))
	}
	// The kernel's attributes expire: each open below first has it ask
	// (GETATTR) for its permission check.
	time.Sleep(1100 * time.Millisecond)
	g0 := getattrs()
	for i := range files {
		got, err := os.ReadFile(a.Path("d", fmt.Sprint(i)))
		if err != nil || string(got) != fmt.Sprint("v", i) {
			t.Fatalf("read back file %d: %q, %v", i, got, err)
		}
	}
	// Each open used to fetch the attributes again: 2 per file.
	if n := getattrs() - g0; n > files+files/4 {
		t.Fatalf("%d opens of files closed moments ago cost %v MDS getattrs, want about one each", files, n)
	}

	// Another mount rewrites a file whose close here is still queued; an
	// open here after that close sees the new bytes.
	must(os.WriteFile(b.Path("d", "0"), []byte("rewritten elsewhere"), 0o644))
	if got, err := os.ReadFile(a.Path("d", "0")); err != nil || string(got) != "rewritten elsewhere" {
		t.Fatalf("open after another mount's close: %q, %v; want its bytes", got, err)
	}
}
