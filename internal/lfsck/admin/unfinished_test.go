package admin

import (
	"strings"
	"testing"

	"nacre/internal/lfsck"
)

// TestStartWaitFailsUnlessEveryComponentCompleted: start --wait exits
// non-zero, naming the component and the MDT, when a selected component
// ended failed, partial or stopped; components the run did not select do
// not count.
func TestStartWaitFailsUnlessEveryComponentCompleted(t *testing.T) {
	rep := func(types []string, st map[string]string) *lfsck.Report {
		r := &lfsck.Report{Target: "MDT0000", Params: lfsck.ReportParams{Types: types}, Components: map[string]*lfsck.ComponentReport{}}
		for name, s := range st {
			r.Components[name] = &lfsck.ComponentReport{Status: s}
		}
		return r
	}
	for _, tc := range []struct {
		name string
		reps []*lfsck.Report
		want string // "" for no error
	}{
		{"completed", []*lfsck.Report{rep([]string{"scrub", "namespace"}, map[string]string{"scrub": "completed", "namespace": "completed", "layout": "failed"})}, ""},
		{"failed", []*lfsck.Report{rep([]string{"namespace"}, map[string]string{"namespace": "failed"})}, "namespace failed on MDT0000"},
		{"partial", []*lfsck.Report{rep([]string{"layout"}, map[string]string{"layout": "partial"})}, "layout partial on MDT0000"},
		{"stopped", []*lfsck.Report{rep([]string{"scrub"}, map[string]string{"scrub": "stopped"})}, "scrub stopped"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := unfinished(tc.reps)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %q", err, tc.want)
			}
		})
	}
}
