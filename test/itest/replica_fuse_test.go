package itest

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestReplicaFailoverThroughTheMount: applications on a FUSE mount of a
// three-replica cluster keep working while the MDT's leader is killed, and
// then while the next leader is cut off from the other replicas;
// no system call fails, none waits more than maxStall, and the files are
// all there with their contents afterwards.
func TestReplicaFailoverThroughTheMount(t *testing.T) {
	needFUSE(t)
	cl := startReplicated(t)
	m := mountFuse(t, cl)
	log := &opLog{}
	type want struct{ data []byte }
	var mu sync.Mutex
	expect := map[string]want{}
	stop := make(chan struct{})
	errs := make(chan error, 2)
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		dir := m.Path(fmt.Sprintf("app%d", w))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func(w int, dir string) {
			defer wg.Done()
			do := func(what string, f func() error) bool {
				start := time.Now()
				if err := f(); err != nil {
					errs <- fmt.Errorf("app%d: %s: %w", w, what, err)
					return false
				}
				log.note(start, fmt.Sprintf("app%d/%s", w, what))
				return true
			}
			prev := ""
			for i := 0; ; i++ {
				select {
				case <-stop:
					errs <- nil
					return
				default:
				}
				tmp := filepath.Join(dir, fmt.Sprintf(".tmp%05d", i))
				name := filepath.Join(dir, fmt.Sprintf("f%05d", i))
				data := bytes.Repeat([]byte{byte(i), byte(w)}, 1000+i%3000)
				if !do("write "+tmp, func() error { return os.WriteFile(tmp, data, 0o644) }) ||
					!do("rename "+tmp, func() error { return os.Rename(tmp, name) }) ||
					!do("stat "+name, func() error { _, err := os.Stat(name); return err }) {
					return
				}
				mu.Lock()
				expect[name] = want{data}
				mu.Unlock()
				if i%4 == 0 && !do("mkdir", func() error { return os.Mkdir(filepath.Join(dir, fmt.Sprintf("d%05d", i)), 0o755) }) {
					return
				}
				if prev != "" && i%2 == 0 {
					if !do("unlink "+prev, func() error { return os.Remove(prev) }) {
						return
					}
					mu.Lock()
					delete(expect, prev)
					mu.Unlock()
				}
				prev = name
			}
		}(w, dir)
	}
	// The writers run 1.5 s before the kill, 4 s with the leader down, 3 s
	// with the next one cut off and 1 s after.
	time.Sleep(1500 * time.Millisecond)
	leader := waitLeader(t, cl, "mdt0")
	killed := time.Now()
	cl.Kill(leader, syscall.SIGKILL)
	t.Logf("killed the leader %s", leader)
	time.Sleep(4 * time.Second)
	cl.Restart()
	// Then the new leader is cut off: the mount's session with it must
	// move to the next leader (locks and open files live there).
	cut := waitLeader(t, cl, "mdt0")
	isolate(t, cl, cut, true)
	t.Logf("cut the leader %s off", cut)
	time.Sleep(3 * time.Second)
	isolate(t, cl, cut, false)
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	log.mu.Lock()
	n, slow, slowW := len(log.done), log.slow, log.slowW
	log.mu.Unlock()
	t.Logf("%d system calls; longest pause after the kill %v; slowest call %v (%s)", n, log.stall(killed, time.Now()).Round(time.Millisecond), slow.Round(time.Millisecond), slowW)
	if slow > maxStall {
		t.Errorf("a system call took %v (%s); the bound is %v", slow, slowW, maxStall)
		keepLogs(t, cl, m.Log)
	}
	mu.Lock()
	defer mu.Unlock()
	var names []string
	for n := range expect {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		got, err := os.ReadFile(n)
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		if !bytes.Equal(got, expect[n].data) {
			t.Errorf("%s: %d bytes, want %d", n, len(got), len(expect[n].data))
		}
	}
	for w := 0; w < 2; w++ {
		ents, err := os.ReadDir(m.Path(fmt.Sprintf("app%d", w)))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			p := m.Path(fmt.Sprintf("app%d", w), e.Name())
			if _, ok := expect[p]; !ok && !e.IsDir() {
				t.Errorf("%s exists but was removed or renamed", p)
			}
		}
	}
	t.Logf("%d files checked", len(names))
}
