package acl

import (
	"errors"
	"slices"
	"testing"
)

func e(tag, perm uint16, id uint32) Entry {
	if tag != User && tag != Group {
		id = undefinedID
	}
	return Entry{tag, perm, id}
}

// named is user::rw-, user:1001:rwx, group::r--, group:50:rw-, mask::rw-,
// other::---.
var named = ACL{e(UserObj, 6, 0), e(User, 7, 1001), e(GroupObj, 4, 0), e(Group, 6, 50), e(Mask, 6, 0), e(Other, 0, 0)}

func TestParseRoundTripsAndSorts(t *testing.T) {
	shuffled := ACL{named[5], named[3], named[0], named[4], named[1], named[2]}
	got, err := Parse(shuffled.Encode())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, named) {
		t.Fatalf("got %v, want %v", got, named)
	}
	if got, err := Parse(named.Encode()[:4]); err != nil || len(got) != 0 {
		t.Errorf("header only: %v, %v; want an empty ACL", got, err)
	}
}

func TestParseRefusesMalformed(t *testing.T) {
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"short", []byte{2, 0, 0}},
		{"torn entry", append(named.Encode(), 1, 2, 3)},
		{"version 1", append([]byte{1, 0, 0, 0}, named.Encode()[4:]...)},
		{"no user::", ACL{e(GroupObj, 4, 0), e(Other, 0, 0)}.Encode()},
		{"two other::", ACL{e(UserObj, 6, 0), e(GroupObj, 4, 0), e(Other, 0, 0), e(Other, 4, 0)}.Encode()},
		{"named without mask", ACL{e(UserObj, 6, 0), e(User, 7, 9), e(GroupObj, 4, 0), e(Other, 0, 0)}.Encode()},
		{"same user twice", ACL{e(UserObj, 6, 0), e(User, 7, 9), e(User, 4, 9), e(GroupObj, 4, 0), e(Mask, 7, 0), e(Other, 0, 0)}.Encode()},
		{"bad perm", ACL{e(UserObj, 8, 0), e(GroupObj, 4, 0), e(Other, 0, 0)}.Encode()},
		{"bad tag", ACL{e(UserObj, 6, 0), e(GroupObj, 4, 0), e(Other, 0, 0), e(0x40, 0, 0)}.Encode()},
	} {
		if _, err := Parse(c.b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: want ErrInvalid, got %v", c.name, err)
		}
	}
}

func TestModeAndMinimal(t *testing.T) {
	if m, min := named.Mode(); m != 0o660 || min {
		t.Errorf("named: mode %o minimal %v, want 660 false", m, min)
	}
	base := ACL{e(UserObj, 7, 0), e(GroupObj, 5, 0), e(Other, 1, 0)}
	if m, min := base.Mode(); m != 0o751 || !min {
		t.Errorf("base: mode %o minimal %v, want 751 true", m, min)
	}
}

func TestChmodSetsTheMaskNotTheGroupEntry(t *testing.T) {
	got := named.Chmod(0o750)
	want := ACL{e(UserObj, 7, 0), e(User, 7, 1001), e(GroupObj, 4, 0), e(Group, 6, 50), e(Mask, 5, 0), e(Other, 0, 0)}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if named[4].Perm != 6 {
		t.Error("Chmod changed its receiver")
	}
}

func TestInherit(t *testing.T) {
	// A file made with 0666 gets the default ACL; its group bits are the
	// mask's.
	a, mode := Inherit(named, 0o100666)
	if mode != 0o100660 || !slices.Equal(a, named) {
		t.Errorf("0666: mode %o acl %v", mode, a)
	}
	// 0600: the mask drops to nothing, the named entries stay (limited by it).
	a, mode = Inherit(named, 0o100600)
	if mode != 0o100600 || a.find(User) < 0 || a[a.find(Mask)].Perm != 0 {
		t.Errorf("0600: mode %o acl %v", mode, a)
	}
	// A default ACL of base entries only gives no access ACL, just bits.
	base := ACL{e(UserObj, 7, 0), e(GroupObj, 5, 0), e(Other, 0, 0)}
	a, mode = Inherit(base, 0o40777)
	if a != nil || mode != 0o40750 {
		t.Errorf("base default on a directory: acl %v mode %o, want none and 40750", a, mode)
	}
}

func TestAllows(t *testing.T) {
	groups := func(gs ...uint32) func(uint32) bool { return func(g uint32) bool { return slices.Contains(gs, g) } }
	mode := uint32(0o660) // user::rw- mask::rw- other::---
	for _, c := range []struct {
		name string
		uid  uint32
		in   func(uint32) bool
		want uint32
		ok   bool
	}{
		{"owner reads", 10, groups(), 4, true},
		{"owner may not execute", 10, groups(), 1, false},
		{"named user: rwx limited by the mask", 1001, groups(), 6, true},
		{"named user: x masked out", 1001, groups(), 1, false},
		{"owning group reads", 11, groups(20), 4, true},
		{"owning group may not write", 11, groups(20), 2, false},
		{"named group writes", 12, groups(50), 2, true},
		{"either group: the one that grants wins", 13, groups(20, 50), 6, true},
		{"others: nothing", 14, groups(), 4, false},
	} {
		if got := named.Allows(mode, 10, 20, c.uid, c.in, c.want); got != c.ok {
			t.Errorf("%s: got %v, want %v", c.name, got, c.ok)
		}
	}
	// A group that matches but grants too little denies, even where other
	// would allow.
	a := ACL{e(UserObj, 6, 0), e(GroupObj, 0, 0), e(Mask, 7, 0), e(Other, 4, 0)}
	if a.Allows(0o674, 10, 20, 11, groups(20), 4) {
		t.Error("the owning group has ---, yet a member may read through other::")
	}
}
