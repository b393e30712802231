package mdt

import pb "nacre/api/nacrepb"

// cloneInode is proto.Clone for inodes, written out: the inode cache
// hands every reader and writer its own copy, several per operation, and
// reflection made proto.Clone about a tenth of the MDT's CPU in a create
// (BenchmarkCreatePipeline's profile). TestCloneInodeCopiesEveryField
// fills every field of the message tree by reflection, so a field added
// to the protocol without a line here fails it.
func cloneInode(in *pb.Inode) *pb.Inode {
	if in == nil {
		return nil
	}
	out := &pb.Inode{
		Fid: cloneFID(in.Fid), Mode: in.Mode, Uid: in.Uid, Gid: in.Gid, Projid: in.Projid, Nlink: in.Nlink,
		Size: in.Size, Blocks: in.Blocks, AtimeNs: in.AtimeNs, MtimeNs: in.MtimeNs, CtimeNs: in.CtimeNs,
		Rdev: in.Rdev, Flags: in.Flags, Layout: cloneLayout(in.Layout), Symlink: cloneBytes(in.Symlink),
		BtimeNs: in.BtimeNs, Generation: in.Generation, MtimeSetNs: in.MtimeSetNs, LinksOverflowIndex: in.LinksOverflowIndex,
	}
	if in.Links != nil {
		out.Links = make([]*pb.LinkEntry, len(in.Links))
		for i, l := range in.Links {
			if l != nil {
				out.Links[i] = &pb.LinkEntry{Parent: cloneFID(l.Parent), Name: cloneBytes(l.Name), Remote: l.Remote}
			}
		}
	}
	return out
}

func cloneFID(f *pb.FID) *pb.FID {
	if f == nil {
		return nil
	}
	return &pb.FID{Seq: f.Seq, Oid: f.Oid, Ver: f.Ver}
}

func cloneLayout(l *pb.Layout) *pb.Layout {
	if l == nil {
		return nil
	}
	out := &pb.Layout{Pattern: l.Pattern, StripeSize: l.StripeSize, StripeCount: l.StripeCount,
		StripeOffset: l.StripeOffset, Generation: l.Generation}
	if l.Objects != nil {
		out.Objects = make([]*pb.StripeObject, len(l.Objects))
		for i, o := range l.Objects {
			if o != nil {
				out.Objects[i] = &pb.StripeObject{Ost: o.Ost, Seq: o.Seq, Oid: o.Oid}
			}
		}
	}
	return out
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append(make([]byte, 0, len(b)), b...)
}
