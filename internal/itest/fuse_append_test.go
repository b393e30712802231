package itest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFuseAppendsAcrossMountsWithoutLocks: processes on two clients append
// records to one log at the same time, with O_APPEND and no lock of their
// own (jobs on many nodes writing a shared log): every record is in the
// file exactly once and whole, and the file holds nothing else. Each
// append goes to the end as the client holding the file's append token
// knows it; without the token two clients placed records over each
// other's.
func TestFuseAppendsAcrossMountsWithoutLocks(t *testing.T) {
	_, a, b := twoMounts(t)
	if err := os.WriteFile(a.Path("log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const writersPerMount, records = 2, 150
	rec := func(w string, i int) string {
		return fmt.Sprintf("writer %s record %04d %s\n", w, i, strings.Repeat("x", 20+i%17))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 2*writersPerMount)
	var want int
	for mi, m := range []*fuseMount{a, b} {
		for w := 0; w < writersPerMount; w++ {
			name := fmt.Sprintf("%c%d", 'a'+mi, w)
			for i := 0; i < records; i++ {
				want += len(rec(name, i))
			}
			f, err := os.OpenFile(m.Path("log"), os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer f.Close()
				for i := 0; i < records; i++ {
					if _, err := f.WriteString(rec(name, i)); err != nil {
						errs <- fmt.Errorf("writer %s, record %d: %w", name, i, err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range []*fuseMount{a, b} {
		got, err := os.ReadFile(m.Path("log"))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, line := range strings.SplitAfter(string(got), "\n") {
			if line == "" {
				continue
			}
			var w string
			var i int
			if _, err := fmt.Sscanf(line, "writer %s record %d", &w, &i); err != nil || line != rec(w, i) || seen[line] {
				t.Fatalf("%s: %d bytes (want %d); line %q is not a whole record written once (the records overlapped)", m.Dir, len(got), want, line)
			}
			seen[line] = true
		}
		if len(got) != want || len(seen) != 2*writersPerMount*records {
			var missing []string
			for mi := 0; mi < 2; mi++ {
				for w := 0; w < writersPerMount; w++ {
					name := fmt.Sprintf("%c%d", 'a'+mi, w)
					for i := 0; i < records; i++ {
						if !seen[rec(name, i)] {
							missing = append(missing, fmt.Sprintf("%s/%d", name, i))
						}
					}
				}
			}
			t.Logf("missing: %v", missing)
			t.Fatalf("%s: %d bytes and %d records, want %d bytes and %d records", m.Dir, len(got), len(seen), want, 2*writersPerMount*records)
		}
	}
}

// TestReplicaAppendsAcrossMountsSurviveFailover: two mounts append records
// to one log, unlocked, while the MDT's leader is killed. The append
// tokens die with the leader; each mount lets its appends under way land
// before it opens a session with the new leader, which grants no token for
// its grace period. Every record acknowledged to a writer is in the log
// once and whole.
func TestReplicaAppendsAcrossMountsSurviveFailover(t *testing.T) {
	needFUSE(t)
	cl := startReplicated(t)
	a, b := mountFuse(t, cl), mountFuse(t, cl)
	if err := os.WriteFile(a.Path("log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	rec := func(w string, i int) string {
		return fmt.Sprintf("writer %s record %05d %s\n", w, i, strings.Repeat("y", 10+i%23))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	written := make([]int, 2)
	errs := make(chan error, 2)
	for mi, m := range []*fuseMount{a, b} {
		f, err := os.OpenFile(m.Path("log"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer f.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := f.WriteString(rec(fmt.Sprint(mi), i)); err != nil {
					errs <- fmt.Errorf("mount %d, record %d: %w", mi, i, err)
					return
				}
				written[mi] = i + 1
			}
		}()
	}
	time.Sleep(1500 * time.Millisecond)
	leader := waitLeader(t, cl, "mdt0")
	cl.Kill(leader, syscall.SIGKILL)
	t.Logf("killed the leader %s", leader)
	time.Sleep(5 * time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cl.Restart()
	got, err := os.ReadFile(b.Path("log"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.SplitAfter(string(got), "\n") {
		if line == "" {
			continue
		}
		var w string
		var i int
		if _, err := fmt.Sscanf(line, "writer %s record %d", &w, &i); err != nil || line != rec(w, i) || seen[line] {
			t.Fatalf("%d bytes; line %q is not a whole record written once (the records overlapped)", len(got), line)
		}
		seen[line] = true
	}
	for mi, n := range written {
		for i := 0; i < n; i++ {
			if !seen[rec(fmt.Sprint(mi), i)] {
				t.Fatalf("record %d of mount %d (of %d it wrote) is missing", i, mi, n)
			}
		}
	}
	if len(seen) != written[0]+written[1] {
		t.Fatalf("%d records in the log, the writers wrote %d", len(seen), written[0]+written[1])
	}
	t.Logf("%d + %d records, %d bytes", written[0], written[1], len(got))
}
