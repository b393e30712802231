package cli

import (
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
)

// TestWebURLIsTheLeadingMGSsPage: `status --web` names the page of the
// MGS replica that leads (each serves one), or of one that is up; an MGS
// whose metrics listener is off loopback has none, and the reason says so.
func TestWebURLIsTheLeadingMGSsPage(t *testing.T) {
	mgs := func(id uint64, metrics, state string, leader bool) *pb.TargetInfo {
		return &pb.TargetInfo{Kind: pb.TargetKind_TARGET_MGS, ReplicaId: id, MetricsAddr: metrics, State: state, Leader: leader}
	}
	ost := &pb.TargetInfo{Kind: pb.TargetKind_TARGET_OST, MetricsAddr: "127.0.0.1:9", State: "up", Leader: true}
	for _, c := range []struct {
		name     string
		targets  []*pb.TargetInfo
		url, why string
	}{
		{"alone", []*pb.TargetInfo{ost, mgs(0, "127.0.0.1:9100", "up", true)}, "http://127.0.0.1:9100/ui/", ""},
		{"leader", []*pb.TargetInfo{mgs(1, "127.0.0.1:1", "up", false), mgs(2, "127.0.0.1:2", "up", true), mgs(3, "127.0.0.1:3", "up", false)}, "http://127.0.0.1:2/ui/", ""},
		{"none leads", []*pb.TargetInfo{mgs(1, "127.0.0.1:1", "down", false), mgs(2, "127.0.0.1:2", "up", false)}, "http://127.0.0.1:2/ui/", ""},
		{"off loopback", []*pb.TargetInfo{mgs(0, "0.0.0.0:9100", "up", true)}, "", "0.0.0.0:9100, not a loopback address"},
	} {
		url, why := webURL(c.targets)
		if url != c.url || (c.why == "") != (why == "") || !strings.Contains(why, c.why) {
			t.Errorf("%s: %q, %q; want %q, %q", c.name, url, why, c.url, c.why)
		}
	}
}
