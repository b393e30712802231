package mdt

import (
	"bytes"
	"encoding/binary"

	pb "nacre/api/nacrepb"
	"nacre/internal/kv"
)

// flagNoXattrs marks, in a reply only, an object the MDT found without
// extended attributes other than its ACLs (which flagACL and
// flagDefaultACL mark). `ls -l` asks every file for security.selinux and
// its access ACL, and copying tools list every file's attributes; with the
// flag a client answers those from the attributes it already holds
// instead of with one MDS round trip per file. Computed when read, never
// stored: a store written before the flag existed needs no upgrade, and an
// inode returned without it (a reply of a change) only costs the round trip.
const flagNoXattrs = uint32(pb.InodeFlag_INODE_FLAG_NO_XATTRS)

// xattrProbe answers, for one object after another, whether it has
// extended attributes besides its ACLs, with one iterator over every
// object's attributes (a readdir asks for each entry).
type xattrProbe struct {
	it  *kv.Iter
	key []byte
}

func newXattrProbe(r kv.Reader) (*xattrProbe, error) {
	it, err := r.NewIter([]byte{pfxXattr}, []byte{pfxXattr + 1})
	if err != nil {
		return nil, err
	}
	return &xattrProbe{it: it}, nil
}

func (p *xattrProbe) close() { p.it.Close() }

// has reports whether object local has an extended attribute that is not
// an ACL.
func (p *xattrProbe) has(local uint64) bool {
	p.key = binary.BigEndian.AppendUint64(append(p.key[:0], pfxXattr), local)
	for ok := p.it.SeekGE(p.key); ok; ok = p.it.Next() {
		k := p.it.Key()
		if !bytes.HasPrefix(k, p.key) {
			return false
		}
		if !isACLName(string(k[len(p.key):])) {
			return true
		}
	}
	return false
}

// markNoXattrs sets flagNoXattrs on ino (a copy for a reply) if the object
// has no extended attributes besides its ACLs. An error reading them
// leaves the flag off: the client then asks.
func (t *Target) markNoXattrs(local uint64, ino *pb.Inode) {
	p, err := newXattrProbe(t.db)
	if err != nil {
		return
	}
	defer p.close()
	markProbed(p, local, ino)
}

func markProbed(p *xattrProbe, local uint64, ino *pb.Inode) {
	if !p.has(local) && p.it.Error() == nil {
		ino.Flags |= flagNoXattrs
	}
}
