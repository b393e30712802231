package admin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"nacre/internal/cli"
	"nacre/internal/lfsck"
)

// TestQueryOfSeveralMDTsAddsThemUp: -A prints each MDT's report and the
// figures added over them, in JSON and in text.
func TestQueryOfSeveralMDTsAddsThemUp(t *testing.T) {
	mk := func(mdt uint32, checked, found, repaired uint64) *lfsck.Report {
		return &lfsck.Report{MDT: mdt, Target: "MDT000" + string(rune('0'+mdt)), Components: map[string]*lfsck.ComponentReport{
			"namespace": {Status: "completed", Checked: checked, Inconsistent: found, Repaired: repaired,
				Counters: map[string]lfsck.Count{"remote_dangling": {Inconsistent: found, Repaired: repaired}}, Stats: map[string]uint64{"remote_dirents": 2}},
		}}
	}
	reps := []*lfsck.Report{mk(0, 10, 1, 1), mk(1, 5, 2, 0)}
	var out bytes.Buffer
	if err := printReports(cli.Env{Out: &out}, reps, true); err != nil {
		t.Fatal(err)
	}
	var all AllReports
	if err := json.Unmarshal(out.Bytes(), &all); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	ns := all.Total["namespace"]
	if len(all.MDTs) != 2 || ns == nil || ns.Checked != 15 || ns.Inconsistent != 3 || ns.Repaired != 1 ||
		ns.Counters["remote_dangling"] != (lfsck.Count{Inconsistent: 3, Repaired: 1}) || ns.Stats["remote_dirents"] != 4 {
		t.Fatalf("total: %+v", ns)
	}
	out.Reset()
	if err := printReports(cli.Env{Out: &out}, reps, false); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "total of 2 MDTs:") || !strings.Contains(out.String(), "checked 15") {
		t.Fatalf("text:\n%s", out.String())
	}
}
