package mdt

import (
	"encoding/binary"
	"hash/fnv"

	"nacre/internal/fid"
)

const (
	pfxMeta   = 0x01
	pfxOI     = 'I'
	pfxObj    = 'O'
	pfxDirent = 'D'
	pfxXattr  = 'X'
	pfxReply  = 'R'
	pfxUnlink = 'U'
	pfxDtx    = 'T'
	// PfxChecker is reserved for the checker's state and trace.
	PfxChecker = 'K'
)

// RaftPrefix is the key range the Raft log lives in.
var RaftPrefix = []byte("\x00r")

func metaKey(name string) []byte { return append([]byte{pfxMeta}, name...) }

var (
	keyApplied   = metaKey("applied")
	keyNextLocal = metaKey("nextlocal")
	keyFidSeq    = metaKey("fidseq")
	keyInodes    = metaKey("inodes")
	keyOpensSeen = metaKey("opensseen")
)

func poolKey(ost uint32) []byte {
	k := metaKey("pool/")
	return binary.BigEndian.AppendUint32(k, ost)
}

// OIKey is the OI key of f.
func OIKey(f fid.FID) []byte {
	k := make([]byte, 1+fid.Size)
	k[0] = pfxOI
	f.Put(k[1:])
	return k
}

// ObjKey is the object key of a local key.
func ObjKey(local uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pfxObj}, local)
}

// DirentPrefix is the key prefix of all entries of the directory with the
// given local key.
func DirentPrefix(parentLocal uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pfxDirent}, parentLocal)
}

// DirentKey is the key of one directory entry.
func DirentKey(parentLocal uint64, name string) []byte {
	k := make([]byte, 0, 17+len(name))
	k = append(DirentPrefix(parentLocal), k...)
	k = binary.BigEndian.AppendUint64(k, NameHash(name))
	return append(k, name...)
}

func xattrPrefix(local uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{pfxXattr}, local)
}

func xattrKey(local uint64, name string) []byte {
	return append(xattrPrefix(local), name...)
}

func replyKey(client, req uint64) []byte {
	k := binary.BigEndian.AppendUint64([]byte{pfxReply}, client)
	return binary.BigEndian.AppendUint64(k, req)
}

func unlinkKey(ost uint32, seq, oid uint64) []byte {
	k := binary.BigEndian.AppendUint32([]byte{pfxUnlink}, ost)
	k = binary.BigEndian.AppendUint64(k, seq)
	return binary.BigEndian.AppendUint64(k, oid)
}

// minCookie keeps hash cookies clear of the small offsets a directory
// reader uses for "." and "..".
const minCookie = 16

// NameHash is the 63-bit hash that orders directory entries and serves as
// their readdir cookie.
func NameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	v := h.Sum64() >> 1
	if v < minCookie {
		v += minCookie
	}
	return v
}

// dirent value: child FID (16) + type (1).
func encodeDirent(f fid.FID, typ uint8) []byte {
	v := make([]byte, fid.Size+1)
	f.Put(v)
	v[fid.Size] = typ
	return v
}

func decodeDirent(v []byte) (fid.FID, uint8, bool) {
	if len(v) < fid.Size+1 {
		return fid.FID{}, 0, false
	}
	f, _ := fid.FromBytes(v)
	return f, v[fid.Size], true
}

// DecodeDirent parses a directory entry value (checker use).
func DecodeDirent(v []byte) (fid.FID, uint8, bool) { return decodeDirent(v) }

// EncodeDirent builds a directory entry value (checker and fault use).
func EncodeDirent(f fid.FID, typ uint8) []byte { return encodeDirent(f, typ) }

func u64(v []byte) uint64 {
	if len(v) < 8 {
		return 0
	}
	return binary.BigEndian.Uint64(v)
}

func putU64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
