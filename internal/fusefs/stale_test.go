package fusefs

import (
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"nacre/internal/fid"
)

// TestStaleOpenRetryAnswersENOENT: the kernel retries a stale open once;
// the same process's open through the same name right after another
// stale one (that retry) answers ENOENT, so ESTALE never reaches the
// application, while other processes, other names and a later open still
// get ESTALE (and so the kernel's retry).
func TestStaleOpenRetryAnswersENOENT(t *testing.T) {
	fs := &FS{staleNames: map[staleName]time.Time{}}
	dir := fid.FID{Seq: 0x200000400, Oid: 7}
	names := []via{{parent: dir, name: "config"}}
	open := func(pid uint32, flags uint32, names []via) fuse.Status {
		in := &fuse.OpenIn{Flags: flags}
		in.Caller.Pid = pid
		return fs.staleRetry(names, in)
	}
	if st := open(10, syscall.O_RDONLY, names); st != staleOpen {
		t.Fatalf("first stale open: %v, want ESTALE (the kernel retries)", st)
	}
	if st := open(11, syscall.O_RDONLY, names); st != staleOpen {
		t.Fatalf("another process's stale open: %v, want ESTALE", st)
	}
	if st := open(10, syscall.O_RDONLY, []via{{parent: dir, name: "other"}}); st != staleOpen {
		t.Fatalf("a stale open through another name: %v, want ESTALE", st)
	}
	if st := open(10, syscall.O_RDONLY, names); st != fuse.ENOENT {
		t.Fatalf("the kernel's retry, stale again: %v, want ENOENT", st)
	}
	for k := range fs.staleNames {
		fs.staleNames[k] = time.Now().Add(-2 * staleRetryWindow)
	}
	if st := open(10, syscall.O_RDONLY, names); st != staleOpen {
		t.Fatalf("a stale open long after the last: %v, want ESTALE", st)
	}
	if st := open(10, syscall.O_RDONLY, nil); st != staleOpen {
		t.Fatalf("a stale open through no name: %v, want ESTALE", st)
	}
}
