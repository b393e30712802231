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
	written := map[string]int{}
	for mi, m := range []*fuseMount{a, b} {
		for w := 0; w < writersPerMount; w++ {
			name := fmt.Sprintf("%c%d", 'a'+mi, w)
			written[name] = records
			appendRecords(t, &wg, errs, m.Path("log"), name, rec, records, nil, nil)
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for _, m := range []*fuseMount{a, b} {
		checkAppendLog(t, m.Path("log"), rec, written)
	}
}

// appendRecords appends rec(name, 0), rec(name, 1), ... to the file at p
// through a descriptor of its own opened O_APPEND, in a goroutine of wg:
// n records, or with n < 0 until stop is closed. *written (if not nil)
// counts the records whose write returned; a failure goes to errs.
func appendRecords(t *testing.T, wg *sync.WaitGroup, errs chan<- error, p, name string, rec func(string, int) string, n int, stop <-chan struct{}, written *int) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer f.Close()
		for i := 0; n < 0 || i < n; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := f.WriteString(rec(name, i)); err != nil {
				errs <- fmt.Errorf("writer %s, record %d: %w", name, i, err)
				return
			}
			if written != nil {
				*written = i + 1
			}
		}
	}()
}

// checkAppendLog checks that the log at p holds, as whole lines, each
// record rec(w, i) for i < written[w] exactly once, and nothing else.
func checkAppendLog(t *testing.T, p string, rec func(w string, i int) string, written map[string]int) {
	t.Helper()
	got, err := os.ReadFile(p)
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
		if _, err := fmt.Sscanf(line, "writer %s record %d", &w, &i); err != nil || line != rec(w, i) || seen[line] || i >= written[w] {
			t.Fatalf("%s: %d bytes; line %q is not a whole record written once (the records overlapped)", p, len(got), line)
		}
		seen[line] = true
	}
	var missing []string
	for w, n := range written {
		for i := 0; i < n; i++ {
			if !seen[rec(w, i)] {
				missing = append(missing, fmt.Sprintf("%s/%d", w, i))
			}
		}
	}
	if len(missing) > 0 {
		t.Fatalf("%s: %d bytes, %d records; missing: %v", p, len(got), len(seen), missing)
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
		appendRecords(t, &wg, errs, m.Path("log"), fmt.Sprint(mi), rec, -1, stop, &written[mi])
	}
	// The writers append for 1.5 s before the kill and 5 s after it.
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
	checkAppendLog(t, b.Path("log"), rec, map[string]int{"0": written[0], "1": written[1]})
	t.Logf("%d + %d records", written[0], written[1])
}
