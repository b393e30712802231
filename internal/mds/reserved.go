package mds

import (
	"syscall"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// dotNacre is the root's entry that holds the checker's lost+found
// (fid.DotNacre), made by the first repair that needs it.
const dotNacre = ".nacre"

// reservedName refuses, before it is logged, a client's command that
// would give the name /.nacre to anything but the file system's own
// directory: it is reserved (as Lustre reserves /.lustre), since a user's
// /.nacre kept the checker from making lost+found, and every orphan from
// being adopted. The file system's own /.nacre can be neither renamed
// nor removed by clients (its lost+found holds what the checker saved); a
// user's, made before the name was reserved, can (to make room).
func (s *Server) reservedName(cmd *pb.Command) *pb.Reply {
	named := func(parent *pb.FID, name []byte) bool {
		return string(name) == dotNacre && fid.FromPB(parent) == fid.Root
	}
	ours := func() bool {
		ino, err := s.t.Lookup(fid.Root, dotNacre, nil)
		return err == nil && fid.FromPB(ino.Fid) == fid.DotNacre
	}
	var rn *pb.RenameOp
	var un *pb.UnlinkOp
	what := ""
	switch o := cmd.Op.(type) {
	case *pb.Command_Create:
		if named(o.Create.Parent, o.Create.Name) {
			what = "create /.nacre"
		}
	case *pb.Command_Link:
		if named(o.Link.Parent, o.Link.Name) {
			what = "link as /.nacre"
		}
	case *pb.Command_Rename:
		rn = o.Rename
	case *pb.Command_OpenRename:
		rn = o.OpenRename.Rename
	case *pb.Command_Unlink:
		un = o.Unlink
	case *pb.Command_OpenUnlink:
		un = o.OpenUnlink.Unlink
	}
	switch {
	case rn != nil && named(rn.DstParent, rn.DstName):
		what = "rename to /.nacre"
	case rn != nil && named(rn.SrcParent, rn.SrcName) && ours():
		what = "rename /.nacre"
	case un != nil && named(un.Parent, un.Name) && ours():
		what = "remove /.nacre"
	}
	if what == "" {
		return nil
	}
	return &pb.Reply{Errno: int32(syscall.EPERM), Message: what + ": /.nacre is reserved for the file system's own use (the checker's lost+found)"}
}
