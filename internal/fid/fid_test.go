package fid

import (
	"testing"

	"nacre/api/nacrepb"
)

func TestParseFormatRoundTrip(t *testing.T) {
	cases := []struct {
		in   string
		want FID
	}{
		{"[0x200000007:0x1:0x0]", Root},
		{"0x200000400:0x1f:0x2", FID{0x200000400, 0x1f, 2}},
		{"[200000400:1f:0]", FID{0x200000400, 0x1f, 0}},
	}
	for _, c := range cases {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Fatalf("Parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		back, err := Parse(got.String())
		if err != nil || back != got {
			t.Fatalf("round trip of %v gave %v, %v", got, back, err)
		}
	}
	for _, bad := range []string{"", "[1:2]", "[x:1:0]", "[1:100000000:0]"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestBinaryOrderMatchesFIDOrder(t *testing.T) {
	a := FID{1, 0xffffffff, 0}.Bytes()
	b := FID{2, 0, 0}.Bytes()
	if string(a) >= string(b) {
		t.Fatal("binary form must sort by sequence first")
	}
	f, err := FromBytes(FID{7, 8, 9}.Bytes())
	if err != nil || f != (FID{7, 8, 9}) {
		t.Fatalf("FromBytes round trip: %v %v", f, err)
	}
	if _, err := FromBytes([]byte{1, 2}); err == nil {
		t.Fatal("short slice accepted")
	}
}

func TestMDTOf(t *testing.T) {
	fld := []*nacrepb.SeqRange{{Start: SeqNormal, End: SeqNormal + 64, Mdt: 0}, {Start: SeqNormal + 64, End: SeqNormal + 128, Mdt: 1}}
	for _, tc := range []struct {
		f      FID
		mdt    uint32
		routed bool
	}{
		{Root, 0, true},
		{DotNacreFid, 0, true},
		{FID{Seq: SeqNormal + 3, Oid: 1}, 0, true},
		{FID{Seq: SeqNormal + 64, Oid: 1}, 1, true},
		{FID{Seq: SeqNormal + 128, Oid: 1}, 0, false},
	} {
		if mdt, ok := MDTOf(fld, tc.f); mdt != tc.mdt || ok != tc.routed {
			t.Errorf("MDTOf(%s) = %d %v, want %d %v", tc.f, mdt, ok, tc.mdt, tc.routed)
		}
	}
}
