package localcluster

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestUpLockNamesItsHolderAndWhatItDoes: while an up holds a cluster
// directory's lock, another is refused naming the holder's pid and what
// it does (starting, supervising, stopping the cluster), and LockHolder
// (`nacre down`) sees it; released, the lock is free again.
func TestUpLockNamesItsHolderAndWhatItDoes(t *testing.T) {
	dir := t.TempDir()
	l, err := lockUp(dir)
	if err != nil {
		t.Fatal(err)
	}
	pid := fmt.Sprintf("(pid %d)", os.Getpid())
	for _, c := range []struct{ state, want string }{
		{"", "is starting the cluster"},
		{supervisingState, "supervises the cluster"},
		{stoppingState, "is stopping the cluster"},
	} {
		l.write(c.state)
		if _, err := lockUp(dir); err == nil || !strings.Contains(err.Error(), pid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("lock held (%q): a second lockUp got %v, want an error naming %s and containing %q", c.state, err, pid, c.want)
		}
		if h, held := LockHolder(dir); !held || h.Pid != os.Getpid() || h.State != c.state {
			t.Errorf("lock held (%q): LockHolder says %+v, %v", c.state, h, held)
		}
	}
	l.release(false)
	if h, held := LockHolder(dir); held {
		t.Errorf("released lock: LockHolder says it is held by %+v", h)
	}
	l2, err := lockUp(dir)
	if err != nil {
		t.Fatalf("lockUp after the release: %v", err)
	}
	l2.release(false)
}
