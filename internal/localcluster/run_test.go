package localcluster

import "testing"

// TestSummaryCountsOSTsAndReplicas: up's summary counts the MDTs and OSTs
// by their names (not the MDTs' or the MGS's replicas) and says how many
// replicas a replicated cluster runs.
func TestSummaryCountsOSTsAndReplicas(t *testing.T) {
	cases := []struct {
		targets []string
		want    string
	}{
		{[]string{"MGS", "MDT0000", "OST0000", "OST0001"}, "MGS 127.0.0.1:7000, 1 MDT, 2 OSTs"},
		{[]string{"MGS", "MDT0000", "OST0000"}, "MGS 127.0.0.1:7000, 1 MDT, 1 OST"},
		{[]string{"MGS-r1", "MGS-r2", "MGS-r3", "MDT0000-r1", "MDT0000-r2", "MDT0000-r3", "OST0000", "OST0001", "OST0002"},
			"MGS 127.0.0.1:7000, 1 MDT (MGS and MDT: 3 replicas each), 3 OSTs"},
		{[]string{"MGS", "MDT0000", "MDT0001", "OST0000", "OST0001"}, "MGS 127.0.0.1:7000, 2 MDTs, 2 OSTs"},
		{[]string{"MGS-r1", "MGS-r2", "MGS-r3", "MDT0000-r1", "MDT0000-r2", "MDT0000-r3", "MDT0001-r1", "MDT0001-r2", "MDT0001-r3", "OST0000"},
			"MGS 127.0.0.1:7000, 2 MDTs (MGS and each MDT: 3 replicas), 1 OST"},
	}
	for _, tc := range cases {
		c := &Cluster{MGS: "127.0.0.1:7000"}
		for _, n := range tc.targets {
			c.Targets = append(c.Targets, Proc{Name: n})
		}
		if got := c.Summary(); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.targets, got, tc.want)
		}
	}
	if CheckOSTs(0) == nil || CheckOSTs(1) != nil {
		t.Errorf("CheckOSTs: 0 must be refused, 1 accepted")
	}
}
