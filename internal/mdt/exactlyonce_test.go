package mdt

import (
	"bytes"
	"fmt"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/obs"
)

// TestReproposedCommandExecutesOnce is the second half of exactly-once: a
// new leader that has not applied a request's entry yet when the retry
// reaches it proposes the command again (with its own time, and for a
// create its own OST order), so the log holds the request twice. Apply
// must answer the second entry with the first entry's reply and change
// nothing but the applied index, for every mutation a client retries;
// each operation is one that a second execution would visibly break
// (EEXIST, ENOENT, a link count or a ctime that moves).
func TestReproposedCommandExecutesOnce(t *testing.T) {
	const client = 42
	type setup struct {
		d    *Direct
		file fid.FID // a regular file "f" in "dir", with mode 0600
		dir  fid.FID
	}
	cases := []struct {
		name string
		prep func(t *testing.T, s setup)
		op   func(s setup) *pb.Command
		// check looks at the state after the first entry (the reply
		// comes from it).
		check func(t *testing.T, s setup, r *pb.Reply)
	}{
		{name: "create",
			op: func(s setup) *pb.Command {
				return &pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: s.dir.PB(), Name: []byte("new"), Mode: syscall.S_IFREG | 0o644,
					Exclusive: true, Layout: &pb.Layout{StripeCount: 1}, Osts: []uint32{0, 1}}}}
			},
			check: func(t *testing.T, s setup, r *pb.Reply) {
				if got, err := s.d.T.Lookup(s.dir, "new", nil); err != nil || !proto.Equal(got.Fid, r.Inode.Fid) {
					t.Fatalf("lookup new: %v %v, want %v", got, err, r.Inode.Fid)
				}
			}},
		{name: "mkdir",
			op: func(s setup) *pb.Command {
				return &pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: s.dir.PB(), Name: []byte("sub"), Mode: syscall.S_IFDIR | 0o755, Exclusive: true}}}
			},
			check: func(t *testing.T, s setup, r *pb.Reply) {
				if d, _ := s.d.T.Getattr(s.dir, false); d.Nlink != 3 {
					t.Fatalf("parent nlink %d after mkdir, want 3", d.Nlink)
				}
			}},
		{name: "rename",
			op: func(s setup) *pb.Command {
				return &pb.Command{Op: &pb.Command_Rename{Rename: &pb.RenameOp{SrcParent: s.dir.PB(), SrcName: []byte("f"), DstParent: s.dir.PB(), DstName: []byte("g")}}}
			},
			check: func(t *testing.T, s setup, r *pb.Reply) {
				if got, err := s.d.T.Lookup(s.dir, "g", nil); err != nil || fid.FromPB(got.Fid) != s.file {
					t.Fatalf("lookup g: %v %v", got, err)
				}
			}},
		{name: "unlink",
			prep: func(t *testing.T, s setup) {
				if r, err := s.d.Do(&pb.Command{Op: &pb.Command_Link{Link: &pb.LinkOp{Fid: s.file.PB(), Parent: s.dir.PB(), Name: []byte("f2")}}}); err != nil || r.Errno != 0 {
					t.Fatalf("link f2: %v %v", r, err)
				}
			},
			op: func(s setup) *pb.Command {
				return &pb.Command{Op: &pb.Command_Unlink{Unlink: &pb.UnlinkOp{Parent: s.dir.PB(), Name: []byte("f")}}}
			},
			check: func(t *testing.T, s setup, r *pb.Reply) {
				if r.Inode.Nlink != 1 {
					t.Fatalf("unlink of one of two names left nlink %d", r.Inode.Nlink)
				}
			}},
		{name: "link",
			op: func(s setup) *pb.Command {
				return &pb.Command{Op: &pb.Command_Link{Link: &pb.LinkOp{Fid: s.file.PB(), Parent: s.dir.PB(), Name: []byte("f2")}}}
			},
			check: func(t *testing.T, s setup, r *pb.Reply) {
				if r.Inode.Nlink != 2 {
					t.Fatalf("link: nlink %d, want 2", r.Inode.Nlink)
				}
			}},
		{name: "setattr",
			// chmod sets ctime to the command's time: the re-proposed
			// command carries a later one.
			op: func(s setup) *pb.Command {
				return &pb.Command{Op: &pb.Command_Setattr{Setattr: &pb.SetattrOp{Fid: s.file.PB(), Valid: uint32(pb.SetattrValid_SETATTR_MODE), Mode: 0o640}}}
			},
			check: func(t *testing.T, s setup, r *pb.Reply) {
				if r.Inode.Mode&0o7777 != 0o640 || r.Inode.CtimeNs != r.TimeNs {
					t.Fatalf("chmod: mode %o ctime %d, want 0640 and the command's time %d", r.Inode.Mode, r.Inode.CtimeNs, r.TimeNs)
				}
			}},
	}
	for _, c := range cases {
		for _, sameBatch := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/same_batch=%v", c.name, sameBatch), func(t *testing.T) {
				d := newDirect(t, 2)
				clock := time.Unix(1_700_000_000, 0)
				d.Now = func() time.Time { clock = clock.Add(time.Millisecond); return clock }
				s := setup{d: d}
				dir, err := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: fid.Root.PB(), Name: []byte("dir"), Mode: syscall.S_IFDIR | 0o755}}})
				if err != nil || dir.Errno != 0 {
					t.Fatalf("mkdir: %v %v", dir, err)
				}
				s.dir = fid.FromPB(dir.Inode.Fid)
				f, err := d.Do(&pb.Command{Op: &pb.Command_Create{Create: &pb.CreateOp{Parent: s.dir.PB(), Name: []byte("f"), Mode: 0o600, Osts: []uint32{0}}}})
				if err != nil || f.Errno != 0 {
					t.Fatalf("create f: %v %v", f, err)
				}
				s.file = fid.FromPB(f.Inode.Fid)
				if c.prep != nil {
					c.prep(t, s)
				}
				// The client's request as the first leader proposed it,
				// and as a new leader proposes the retry: a later time
				// and, for a create, the OSTs in another order.
				cmd := c.op(s)
				cmd.ClientId, cmd.RequestId, cmd.AckedBelow = client, 7, 7
				cmd.NowNs = d.Now().UnixNano()
				again := proto.Clone(cmd).(*pb.Command)
				again.NowNs = d.Now().Add(time.Second).UnixNano()
				if cr := again.GetCreate(); cr != nil && len(cr.Osts) > 1 {
					cr.Osts = []uint32{cr.Osts[1], cr.Osts[0]}
				}
				e1 := Entry{Index: d.index + 1, Data: mustMarshal(cmd)}
				e2 := Entry{Index: d.index + 2, Data: mustMarshal(again)}

				var first, second *pb.Reply
				var afterFirst []byte
				if sameBatch {
					// The reference: a replica of the same state that
					// applies the first entry alone.
					afterFirst = replayAlone(t, d, e1)
					out, err := d.T.Apply([]Entry{e1, e2})
					if err != nil {
						t.Fatal(err)
					}
					first, second = out[0], out[1]
				} else {
					out, err := d.T.Apply([]Entry{e1})
					if err != nil {
						t.Fatal(err)
					}
					first = out[0]
					afterFirst = stateDump(t, d.T)
					if out, err = d.T.Apply([]Entry{e2}); err != nil {
						t.Fatal(err)
					}
					second = out[0]
				}
				if first.Errno != 0 {
					t.Fatalf("first execution failed: %s", first.Message)
				}
				if first.Index != e1.Index || first.TimeNs != cmd.NowNs {
					t.Fatalf("first reply index %d time %d, want %d %d", first.Index, first.TimeNs, e1.Index, cmd.NowNs)
				}
				c.check(t, s, first)
				if !proto.Equal(second, first) {
					t.Fatalf("the re-proposed command got\n  %v\nwant the original reply\n  %v", second, first)
				}
				if got := stateDump(t, d.T); !bytes.Equal(got, afterFirst) {
					t.Fatalf("the re-proposed command changed the state: %s", dumpDiff(afterFirst, got))
				}
				if r, ok := d.T.ReplyFor(client, 7); !ok || !proto.Equal(r, first) {
					t.Fatalf("reply cache holds %v, want the original reply", r)
				}
			})
		}
	}
}

// stateDump is every key and value of the MDT's store but the applied
// index, in a form that compares byte for byte.
func stateDump(t *testing.T, tg *Target) []byte {
	t.Helper()
	it, err := tg.DB().NewIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	var buf bytes.Buffer
	for it.First(); it.Valid(); it.Next() {
		if bytes.Equal(it.Key(), keyApplied) {
			continue
		}
		fmt.Fprintf(&buf, "%q=%q\n", it.Key(), it.Value())
	}
	return buf.Bytes()
}

// replayAlone copies d's store into a new one, opens it as another
// replica would, applies e there and returns its state.
func replayAlone(t *testing.T, d *Direct, e Entry) []byte {
	t.Helper()
	db, err := kv.OpenMem()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	it, err := d.T.DB().NewIter(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	for it.First(); it.Valid(); it.Next() {
		b.Set(bytes.Clone(it.Key()), bytes.Clone(it.Value()))
	}
	it.Close()
	if err := b.Commit(false); err != nil {
		t.Fatal(err)
	}
	b.Close()
	tg, err := Open(db, d.T.id, obs.Discard())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tg.Apply([]Entry{e}); err != nil {
		t.Fatal(err)
	}
	return stateDump(t, tg)
}

// dumpDiff names the lines of two dumps that differ.
func dumpDiff(a, b []byte) string {
	la, lb := map[string]bool{}, map[string]bool{}
	for _, l := range bytes.Split(a, []byte("\n")) {
		la[string(l)] = true
	}
	for _, l := range bytes.Split(b, []byte("\n")) {
		lb[string(l)] = true
	}
	var out bytes.Buffer
	for l := range la {
		if !lb[l] {
			fmt.Fprintf(&out, "\n  - %s", l)
		}
	}
	for l := range lb {
		if !la[l] {
			fmt.Fprintf(&out, "\n  + %s", l)
		}
	}
	return out.String()
}
