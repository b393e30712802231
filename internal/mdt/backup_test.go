package mdt

import (
	"bytes"
	"strings"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/target"
)

// A backup of another MDT (another uuid) is not restored over one that
// holds files unless forced; over an empty MDT, or of the same MDT, it is.
func TestRestoreOfAnotherMDTsBackupNeedsForce(t *testing.T) {
	mk := func(files int) *Direct {
		d := newDirect(t, 1)
		for i := range files {
			create(t, d, 1, uint64(i+1), fid.Root, string(rune('a'+i)), nil, []uint32{0})
		}
		return d
	}
	idOf := func(uuid string) target.Identity {
		return target.Identity{Fsname: "test", Kind: target.MDT, UUID: uuid}
	}
	var bak bytes.Buffer
	if _, err := Backup(mk(2).T.db, idOf("other"), &bak); err != nil {
		t.Fatal(err)
	}
	restore := func(d *Direct, uuid string, force bool) error {
		_, err := Restore(d.T.db, idOf(uuid), bytes.NewReader(bak.Bytes()), force, nil)
		return err
	}
	full := mk(3)
	err := restore(full, "mine", false)
	if err == nil || !strings.Contains(err.Error(), "another MDT0000 (uuid other)") || !strings.Contains(err.Error(), "holds 4 objects") ||
		!strings.Contains(err.Error(), "--force") {
		t.Fatalf("restore of another MDT's backup over files: %v", err)
	}
	if _, err := full.T.Lookup(fid.Root, "c", &pb.Cred{}); err != nil {
		t.Fatalf("the refused restore changed the MDT: %v", err)
	}
	for _, c := range []struct {
		what  string
		d     *Direct
		uuid  string
		force bool
	}{{"forced", full, "mine", true}, {"over an empty MDT", mk(0), "mine", false}, {"of the same MDT", mk(3), "other", false}} {
		if err := restore(c.d, c.uuid, c.force); err != nil {
			t.Errorf("restore %s: %v", c.what, err)
		}
	}
}

// beforeWipe (where the caller removes the Raft log) runs once the whole
// backup was read and checked, while the store is still intact, and not
// at all for a damaged backup.
func TestRestoreRemovesTheLogOnlyOnceTheBackupIsGood(t *testing.T) {
	src := newDirect(t, 1)
	create(t, src, 1, 1, fid.Root, "a", nil, []uint32{0})
	var bak bytes.Buffer
	id := target.Identity{Fsname: "test", Kind: target.MDT, UUID: "u"}
	if _, err := Backup(src.T.db, id, &bak); err != nil {
		t.Fatal(err)
	}
	dst := newDirect(t, 1)
	create(t, dst, 1, 1, fid.Root, "old", nil, []uint32{0})
	calls := 0
	before := func() error {
		calls++
		if _, err := dst.T.Lookup(fid.Root, "old", &pb.Cred{}); err != nil {
			t.Errorf("the store was changed before beforeWipe: %v", err)
		}
		return nil
	}
	damaged := bytes.Clone(bak.Bytes())
	damaged[len(damaged)-2] ^= 0xff
	if _, err := Restore(dst.T.db, id, bytes.NewReader(damaged), false, before); err == nil {
		t.Fatal("a damaged backup was restored")
	}
	if calls != 0 {
		t.Fatalf("beforeWipe ran %d times for a damaged backup", calls)
	}
	if _, err := Restore(dst.T.db, id, bytes.NewReader(bak.Bytes()), false, before); err != nil {
		t.Fatal(err)
	}
	if calls != 1 {
		t.Fatalf("beforeWipe ran %d times, want 1", calls)
	}
}
