package mdt

import (
	"syscall"
	"testing"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/obs"
	"nacre/internal/target"
	"nacre/test/nstest"
)

func newDirect(t *testing.T, osts int) *Direct {
	t.Helper()
	db, err := kv.OpenMem()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tg, err := Open(db, target.Identity{Fsname: "test", Kind: target.MDT}, obs.Discard())
	if err != nil {
		t.Fatal(err)
	}
	d := NewDirect(tg)
	var list []uint32
	for i := 0; i < osts; i++ {
		list = append(list, uint32(i))
	}
	if err := d.Setup(fid.SeqNormal, list, fid.OSTSeq(0), 100000); err != nil {
		t.Fatal(err)
	}
	return d
}

// directNS adapts Direct to the conformance suite.
type directNS struct {
	d    *Direct
	cred *pb.Cred
	osts []uint32
	req  *uint64
}

func (n directNS) do(op any) (*pb.Reply, error) {
	*n.req++
	cmd := &pb.Command{ClientId: 7, RequestId: *n.req, Cred: n.cred}
	switch o := op.(type) {
	case *pb.CreateOp:
		o.Osts = n.osts
		cmd.Op = &pb.Command_Create{Create: o}
	case *pb.LinkOp:
		cmd.Op = &pb.Command_Link{Link: o}
	case *pb.UnlinkOp:
		cmd.Op = &pb.Command_Unlink{Unlink: o}
	case *pb.RenameOp:
		cmd.Op = &pb.Command_Rename{Rename: o}
	case *pb.SetattrOp:
		cmd.Op = &pb.Command_Setattr{Setattr: o}
	case *pb.SetxattrOp:
		cmd.Op = &pb.Command_Setxattr{Setxattr: o}
	case *pb.RemovexattrOp:
		cmd.Op = &pb.Command_Removexattr{Removexattr: o}
	case *pb.TmpfileOp:
		o.Osts = n.osts
		cmd.Op = &pb.Command_Tmpfile{Tmpfile: o}
	}
	r, err := n.d.Do(cmd)
	if err != nil {
		return nil, err
	}
	if r.Errno != 0 {
		return nil, errf(syscall.Errno(r.Errno), "%s", r.Message)
	}
	return r, nil
}

func (n directNS) inode(op any) (*pb.Inode, error) {
	r, err := n.do(op)
	if err != nil {
		return nil, err
	}
	return r.Inode, nil
}

func (n directNS) Create(p fid.FID, name string, mode uint32, excl bool) (*pb.Inode, error) {
	return n.inode(&pb.CreateOp{Parent: p.PB(), Name: []byte(name), Mode: mode, Exclusive: excl})
}
func (n directNS) Mkdir(p fid.FID, name string, mode uint32) (*pb.Inode, error) {
	return n.inode(&pb.CreateOp{Parent: p.PB(), Name: []byte(name), Mode: syscall.S_IFDIR | mode, Exclusive: true})
}
func (n directNS) Symlink(p fid.FID, name, target string) (*pb.Inode, error) {
	return n.inode(&pb.CreateOp{Parent: p.PB(), Name: []byte(name), Mode: syscall.S_IFLNK | 0o777, Symlink: []byte(target), Exclusive: true})
}
func (n directNS) Link(f, p fid.FID, name string) (*pb.Inode, error) {
	return n.inode(&pb.LinkOp{Fid: f.PB(), Parent: p.PB(), Name: []byte(name)})
}
func (n directNS) Unlink(p fid.FID, name string) error {
	_, err := n.do(&pb.UnlinkOp{Parent: p.PB(), Name: []byte(name)})
	return err
}
func (n directNS) Rmdir(p fid.FID, name string) error {
	_, err := n.do(&pb.UnlinkOp{Parent: p.PB(), Name: []byte(name), Dir: true})
	return err
}
func (n directNS) Rename(sp fid.FID, sn string, dp fid.FID, dn string, flags uint32) error {
	_, err := n.do(&pb.RenameOp{SrcParent: sp.PB(), SrcName: []byte(sn), DstParent: dp.PB(), DstName: []byte(dn), Flags: flags})
	return err
}
func (n directNS) Lookup(p fid.FID, name string) (*pb.Inode, error) {
	return n.d.T.Lookup(p, name, n.cred)
}
func (n directNS) Getattr(f fid.FID) (*pb.Inode, error) { return n.d.T.Getattr(f, false) }
func (n directNS) Readdir(f fid.FID) ([]string, error) {
	var names []string
	var cookie uint64
	for {
		ents, eof, err := n.d.T.Readdir(f, cookie, 7, false, n.cred)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			names = append(names, string(e.Name))
			cookie = e.Cookie
		}
		if eof {
			return names, nil
		}
	}
}
func (n directNS) Setattr(op *pb.SetattrOp) (*pb.Inode, error) { return n.inode(op) }
func (n directNS) Setxattr(f fid.FID, name string, v []byte, flags uint32) error {
	_, err := n.do(&pb.SetxattrOp{Fid: f.PB(), Name: []byte(name), Value: v, Flags: flags})
	return err
}
func (n directNS) Getxattr(f fid.FID, name string) ([]byte, error) {
	return n.d.T.Getxattr(f, name, n.cred)
}
func (n directNS) Listxattr(f fid.FID) ([]string, error) { return n.d.T.Listxattr(f, n.cred) }
func (n directNS) Removexattr(f fid.FID, name string) error {
	_, err := n.do(&pb.RemovexattrOp{Fid: f.PB(), Name: []byte(name)})
	return err
}
func (n directNS) As(uid, gid uint32) nstest.NS {
	n.cred = &pb.Cred{Uid: uid, Gid: gid}
	return n
}

func TestNamespaceConformance(t *testing.T) {
	d := newDirect(t, 2)
	var req uint64
	nstest.Run(t, directNS{d: d, cred: &pb.Cred{}, osts: []uint32{0, 1}, req: &req})
}
