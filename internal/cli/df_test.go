package cli

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
)

func TestUsePercentIsUsedOverUsedPlusAvail(t *testing.T) {
	cases := []struct {
		used, avail uint64
		want        int
	}{
		{0, 100, 0},
		{50, 50, 50},
		{1, 1000, 1},  // rounded up, as df(1)
		{60, 20, 75},  // size 100 with 20 reserved: 75%, not 60%
		{100, 0, 100}, // full for users even if size > used
	}
	for _, c := range cases {
		if got := usePercent(c.used, c.avail); got == nil || *got != c.want {
			t.Errorf("usePercent(%d, %d) = %v, want %d", c.used, c.avail, got, c.want)
		}
	}
	if got := usePercent(0, 0); got != nil {
		t.Errorf("usePercent(0, 0) = %d, want none", *got)
	}
}

func TestDfLeavesDownTargetsOutOfTheTotals(t *testing.T) {
	targets := []TargetStatus{
		{Name: "MGS", Kind: "mgs", State: "up", BytesTotal: 1 << 40},
		{Name: "fs-MDT0000", Kind: "mdt", State: "up", BytesTotal: 1000, BytesUsed: 600, BytesAvail: 200, InodesTotal: 100, InodesUsed: 10},
		{Name: "fs-OST0000", Kind: "ost", State: "up", BytesTotal: 1000, BytesUsed: 600, BytesAvail: 200},
		{Name: "fs-OST0001", Kind: "ost", State: "down", BytesTotal: 5000, BytesUsed: 100, BytesAvail: 4900}, // the MGS's last copy
		{Name: "fs-OST0002", Kind: "ost", State: "up", BytesTotal: 1000, BytesUsed: 200, BytesAvail: 800},
	}
	out := dfTable("fs", targets)
	if len(out.Targets) != 4 {
		t.Fatalf("rows %+v", out.Targets)
	}
	tot := out.Total
	if tot.BytesTotal != 2000 || tot.BytesUsed != 800 || tot.BytesAvail != 1000 || tot.InodesTotal != 100 || tot.InodesUsed != 10 {
		t.Fatalf("totals %+v", tot)
	}
	if tot.UsePercent == nil || *tot.UsePercent != 45 { // 800 / 1800, rounded up
		t.Fatalf("total use%% %v", tot.UsePercent)
	}
	if tot.State != "1 down" {
		t.Fatalf("total state %q", tot.State)
	}
	down := out.Targets[2]
	if down.State != "down" || down.BytesTotal != 0 || down.BytesUsed != 0 || down.UsePercent != nil {
		t.Fatalf("down row %+v", down)
	}
	if p := out.Targets[1].UsePercent; p == nil || *p != 75 {
		t.Fatalf("OST0000 use%% %v, want 75", p)
	}

	var text bytes.Buffer
	writeDf(&text, out)
	lines := strings.Split(text.String(), "\n")
	var ost0, ost1, total string
	for _, l := range lines {
		switch {
		case strings.Contains(l, "OST0000"):
			ost0 = l
		case strings.Contains(l, "OST0001"):
			ost1 = l
		case strings.HasPrefix(strings.TrimSpace(l), "fs "):
			total = l
		}
	}
	if !strings.Contains(ost0, "75%") || !strings.Contains(total, "45%") || !strings.Contains(total, "1 down") {
		t.Fatalf("text:\n%s", text.String())
	}
	if strings.ContainsAny(strings.Replace(ost1, "fs-OST0001", "", 1), "%0123456789") {
		t.Fatalf("down row shows figures:\n%s", text.String())
	}

	var js bytes.Buffer
	if err := JSON(&js, out); err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	json.Unmarshal(js.Bytes(), &back)
	if back["filesystem"].(map[string]any)["use_percent"] != float64(45) {
		t.Fatalf("JSON: %s", js.String())
	}
}

func TestOSTIndexMustBeInTheFileSystem(t *testing.T) {
	targets := []*pb.TargetInfo{
		{Kind: pb.TargetKind_TARGET_MGS},
		{Kind: pb.TargetKind_TARGET_MDT, Index: 0},
		{Kind: pb.TargetKind_TARGET_OST, Index: 2},
		{Kind: pb.TargetKind_TARGET_OST, Index: 0},
		{Kind: pb.TargetKind_TARGET_OST, Index: 1},
	}
	for _, i := range []int{0, 1, 2} {
		if err := checkOSTIndex(i, targets); err != nil {
			t.Errorf("OST %d: %v", i, err)
		}
	}
	for _, i := range []int{3, 7, 1 << 40} {
		err := checkOSTIndex(i, targets)
		if err == nil || !strings.Contains(err.Error(), "valid indexes are 0, 1, 2") {
			t.Errorf("OST %d: %v", i, err)
		}
	}
	if err := checkOSTIndex(0, targets[:2]); err == nil || !strings.Contains(err.Error(), "no OSTs") {
		t.Errorf("no OSTs: %v", err)
	}
}

func TestPartialNameIsHiddenUniqueAndFits(t *testing.T) {
	a, b := partialName("big.iso"), partialName("big.iso")
	if a == b || !strings.HasPrefix(a, ".big.iso.nacre-partial-") {
		t.Fatalf("%q %q", a, b)
	}
	long := partialName(strings.Repeat("x", 255))
	if len(long) > 255 || !strings.HasPrefix(long, ".xxx") {
		t.Fatalf("%d bytes: %q", len(long), long)
	}
}
