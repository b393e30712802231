package mdt

import (
	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
)

// The linkEA (Inode.Links) names the object's parents and names, one
// entry per hard link. It lives in the object's record, which every
// operation on the object reads and writes whole, so a file with
// thousands of links made each of its operations cost in proportion:
// 1,000 more links took 22 s at 9,000 links against 2.1 s at 1,000
// (docs/benchmarks.md, "Hard links"). As Lustre does, the list is bounded:
// a name that would take it past LinksMaxBytes is not recorded, and
// LinksOverflowIndex says when that last happened (the log index of the
// command), so that neither fid2path nor the checker takes the list for
// every name. The checker records the left-out names again once they fit,
// and clears the mark. A log index, not a time: the checker compares it
// with the index its scan began after, and a command's time is stamped
// before it is proposed, not when it is applied.

// LinksMaxBytes bounds the linkEA: Lustre's 4 KiB, counted as LinkBytes
// does.
const LinksMaxBytes = 4096

// LinkBytes is what one linkEA entry counts against LinksMaxBytes: its name
// and 24 bytes for the parent's FID and the entry's framing (Lustre counts
// 18 plus the name, in a list with a 24-byte header).
func LinkBytes(name []byte) int { return 24 + len(name) }

// LinksBytes is what the linkEA of ino counts.
func LinksBytes(ino *pb.Inode) int {
	n := 0
	for _, l := range ino.Links {
		n += LinkBytes(l.Name)
	}
	return n
}

// addLink records a new name of ino, or marks the list overflowed by the
// command at log index index when the name does not fit.
func addLink(ino *pb.Inode, parent fid.FID, name []byte, index uint64) {
	if LinksBytes(ino)+LinkBytes(name) > LinksMaxBytes {
		ino.LinksOverflowIndex = index
		return
	}
	ino.Links = append(ino.Links, &pb.LinkEntry{Parent: parent.PB(), Name: name})
}

// removeLink forgets one name of ino. The overflow mark stays: other
// names may still be missing from the list.
func removeLink(ino *pb.Inode, parent fid.FID, name string) {
	for i, l := range ino.Links {
		if string(l.Name) == name && fid.FromPB(l.Parent) == parent {
			ino.Links = append(ino.Links[:i], ino.Links[i+1:]...)
			return
		}
	}
}

// replaceLink renames one name of ino in its linkEA.
func replaceLink(ino *pb.Inode, oldParent fid.FID, oldName string, newParent fid.FID, newName string, index uint64) {
	for i, l := range ino.Links {
		if string(l.Name) == oldName && fid.FromPB(l.Parent) == oldParent {
			ino.Links = append(ino.Links[:i], ino.Links[i+1:]...)
			break
		}
	}
	// A back-reference missing from a list that is not overflowed is the
	// checker's business; keep the rename consistent from here on. One
	// missing from an overflowed list was left out on purpose, and the new
	// name is recorded if it fits now.
	addLink(ino, newParent, []byte(newName), index)
}
