package itest

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
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
