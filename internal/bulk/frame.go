package bulk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"nacre/internal/fid"
)

const (
	// HeaderSize is the size of the fixed frame header.
	HeaderSize = 64
	// MaxPayload bounds a frame's payload. Larger reads and writes are
	// split by the client.
	MaxPayload = 4 << 20
	// MaxExt bounds a frame's extension.
	MaxExt = 256
	// maxMsg bounds the message of an error reply.
	maxMsg = 4 << 10
	// metaSize and attrSize are the lengths of the extension structs.
	metaSize = 48
	attrSize = 32
	// maxFsname bounds the HELLO payload.
	maxFsname = 255
)

// flagReply marks a reply frame.
const flagReply = 0x01

var (
	magic = [4]byte{'N', 'C', 'R', 'W'}
	le    = binary.LittleEndian
	// castagnoli is the CRC32C table; the hash/crc32 package uses the
	// SSE4.2 instruction for it on amd64.
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// Framing errors. A connection that produced one of them is closed: its
// byte stream can no longer be trusted.
var (
	ErrBadMagic      = errors.New("bulk: not a Nacre data frame (bad magic)")
	ErrHeaderCRC     = errors.New("bulk: header CRC32C mismatch")
	ErrBadFrame      = errors.New("bulk: malformed frame")
	ErrFrameTooLarge = errors.New("bulk: frame too large")
)

// Op is a frame's opcode.
type Op uint8

// Opcodes; see the package documentation.
const (
	OpHello    Op = 1
	OpRead     Op = 2
	OpWrite    Op = 3
	OpPunch    Op = 4
	OpTruncate Op = 5
	OpGetAttr  Op = 6
	OpSync     Op = 7
	OpSetAttr  Op = 8
)

var opNames = [...]string{
	OpHello: "hello", OpRead: "read", OpWrite: "write", OpPunch: "punch",
	OpTruncate: "truncate", OpGetAttr: "getattr", OpSync: "sync", OpSetAttr: "setattr",
}

// Ops lists every opcode, e.g. for metrics.
var Ops = []Op{OpHello, OpRead, OpWrite, OpPunch, OpTruncate, OpGetAttr, OpSync, OpSetAttr}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", uint8(o))
}

// header is the decoded fixed header. extLen is implied by the extension
// slice that travels with it.
type header struct {
	version    uint16
	op         Op
	flags      uint8
	reqID      uint64
	obj        fid.ObjID
	off        uint64
	length     uint64
	status     uint16
	payloadLen uint32
	payloadCRC uint32
}

// put encodes h into b[:HeaderSize]; b[HeaderSize:] must already hold the
// extension, which the header CRC covers.
func (h *header) put(b []byte) {
	ext := b[HeaderSize:]
	copy(b[0:4], magic[:])
	le.PutUint16(b[4:], h.version)
	b[6] = byte(h.op)
	b[7] = h.flags
	le.PutUint64(b[8:], h.reqID)
	le.PutUint64(b[16:], h.obj.Seq)
	le.PutUint64(b[24:], h.obj.Oid)
	le.PutUint64(b[32:], h.off)
	le.PutUint64(b[40:], h.length)
	le.PutUint16(b[48:], h.status)
	le.PutUint16(b[50:], uint16(len(ext)))
	le.PutUint32(b[52:], h.payloadLen)
	le.PutUint32(b[56:], h.payloadCRC)
	le.PutUint32(b[60:], headerCRC(b[:60], ext))
}

func headerCRC(fixed, ext []byte) uint32 {
	return crc32.Update(crc32.Update(0, castagnoli, fixed), castagnoli, ext)
}

// readHeader reads one header and its extension from r into buf, which
// must hold HeaderSize+MaxExt bytes, and checks everything that can be
// checked before the payload: magic, limits, header CRC, flags. The
// returned extension aliases buf. A clean end of stream before the first
// byte gives io.EOF. With ErrFrameTooLarge the header is valid and returned,
// so that the server can name the request in its refusal.
func readHeader(r io.Reader, buf []byte) (header, []byte, error) {
	var h header
	if _, err := io.ReadFull(r, buf[:HeaderSize]); err != nil {
		return h, nil, err
	}
	if !bytes.Equal(buf[0:4], magic[:]) {
		return h, nil, fmt.Errorf("%w: starts with % x", ErrBadMagic, buf[0:4])
	}
	extLen := int(le.Uint16(buf[50:]))
	if extLen > MaxExt {
		return h, nil, fmt.Errorf("%w: extension of %d bytes, limit %d", ErrBadFrame, extLen, MaxExt)
	}
	ext := buf[HeaderSize : HeaderSize+extLen]
	if _, err := io.ReadFull(r, ext); err != nil {
		return h, nil, noEOF(err)
	}
	if got, want := headerCRC(buf[:60], ext), le.Uint32(buf[60:]); got != want {
		return h, nil, fmt.Errorf("%w: computed %#08x, frame says %#08x", ErrHeaderCRC, got, want)
	}
	h = header{
		version:    le.Uint16(buf[4:]),
		op:         Op(buf[6]),
		flags:      buf[7],
		reqID:      le.Uint64(buf[8:]),
		obj:        fid.ObjID{Seq: le.Uint64(buf[16:]), Oid: le.Uint64(buf[24:])},
		off:        le.Uint64(buf[32:]),
		length:     le.Uint64(buf[40:]),
		status:     le.Uint16(buf[48:]),
		payloadLen: le.Uint32(buf[52:]),
		payloadCRC: le.Uint32(buf[56:]),
	}
	if h.flags&^flagReply != 0 {
		return h, nil, fmt.Errorf("%w: unknown flags %#02x", ErrBadFrame, h.flags)
	}
	if h.payloadLen > MaxPayload {
		return h, ext, fmt.Errorf("%w: payload of %d bytes exceeds the %d-byte limit", ErrFrameTooLarge, h.payloadLen, MaxPayload)
	}
	return h, ext, nil
}

func payloadCRC(p []byte) uint32 {
	if len(p) == 0 {
		return 0
	}
	return crc32.Checksum(p, castagnoli)
}

// readPayload fills p from r and returns the CRC32C of the bytes read. It
// checksums each piece as it arrives rather than the whole payload at the
// end, so that on a 2-core machine the receiver's checksum overlaps the
// sender still writing, instead of adding to every round trip.
func readPayload(r io.Reader, p []byte) (uint32, error) {
	return readPayloadOn(r, p, 0)
}

// readPayloadOn is readPayload continuing the CRC32C crc of the bytes
// before p.
func readPayloadOn(r io.Reader, p []byte, crc uint32) (uint32, error) {
	for got := 0; got < len(p); {
		n, err := r.Read(p[got:])
		crc = crc32.Update(crc, castagnoli, p[got:got+n])
		got += n
		if err != nil && got < len(p) {
			return crc, noEOF(err)
		}
	}
	return crc, nil
}

// noEOF turns an EOF inside a frame into ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// MetaValid says which groups of ObjMeta fields a request carries.
type MetaValid uint32

const (
	// MetaPFID: Parent, StripeIndex, StripeSize, StripeCount, LayoutGen.
	MetaPFID MetaValid = 1 << iota
	// MetaOwner: UID and GID.
	MetaOwner
	// MetaProjID: ProjID.
	MetaProjID
	// MetaAll is every group.
	MetaAll = MetaPFID | MetaOwner | MetaProjID
)

// ObjMeta is what a client tells an OST about an object's place in the
// namespace: its parent file (PFID), its slot in the layout and its owner.
type ObjMeta struct {
	Parent      fid.FID
	StripeIndex uint32
	StripeSize  uint32
	StripeCount uint32
	LayoutGen   uint32
	UID         uint32
	GID         uint32
	ProjID      uint32
	// Valid selects the groups that are set; zero means all of them.
	Valid MetaValid
}

// Has reports whether m carries the group v.
func (m *ObjMeta) Has(v MetaValid) bool { return m.Valid == 0 || m.Valid&v != 0 }

func (m *ObjMeta) put(b []byte) {
	le.PutUint64(b[0:], m.Parent.Seq)
	le.PutUint32(b[8:], m.Parent.Oid)
	le.PutUint32(b[12:], m.Parent.Ver)
	le.PutUint32(b[16:], m.StripeIndex)
	le.PutUint32(b[20:], m.StripeSize)
	le.PutUint32(b[24:], m.StripeCount)
	le.PutUint32(b[28:], m.LayoutGen)
	le.PutUint32(b[32:], m.UID)
	le.PutUint32(b[36:], m.GID)
	le.PutUint32(b[40:], m.ProjID)
	le.PutUint32(b[44:], uint32(m.Valid))
}

func decodeMeta(b []byte) (ObjMeta, error) {
	if len(b) < metaSize {
		return ObjMeta{}, fmt.Errorf("%w: meta extension of %d bytes, want %d", ErrBadFrame, len(b), metaSize)
	}
	return ObjMeta{
		Parent:      fid.FID{Seq: le.Uint64(b[0:]), Oid: le.Uint32(b[8:]), Ver: le.Uint32(b[12:])},
		StripeIndex: le.Uint32(b[16:]),
		StripeSize:  le.Uint32(b[20:]),
		StripeCount: le.Uint32(b[24:]),
		LayoutGen:   le.Uint32(b[28:]),
		UID:         le.Uint32(b[32:]),
		GID:         le.Uint32(b[36:]),
		ProjID:      le.Uint32(b[40:]),
		Valid:       MetaValid(le.Uint32(b[44:])),
	}, nil
}

// ObjAttr is the reply to GETATTR: what a client needs to compute a file's
// size from its objects (Lustre's glimpse).
type ObjAttr struct {
	Size    uint64 // bytes
	Blocks  uint64 // 512-byte blocks allocated
	MtimeNs int64  // last data modification
	Exists  bool
}

const attrExists = 0x01

func (a *ObjAttr) put(b []byte) {
	le.PutUint64(b[0:], a.Size)
	le.PutUint64(b[8:], a.Blocks)
	le.PutUint64(b[16:], uint64(a.MtimeNs))
	var flags uint32
	if a.Exists {
		flags |= attrExists
	}
	le.PutUint32(b[24:], flags)
	le.PutUint32(b[28:], 0)
}

func decodeAttr(b []byte) (ObjAttr, error) {
	if len(b) < attrSize {
		return ObjAttr{}, fmt.Errorf("%w: attr extension of %d bytes, want %d", ErrBadFrame, len(b), attrSize)
	}
	return ObjAttr{
		Size:    le.Uint64(b[0:]),
		Blocks:  le.Uint64(b[8:]),
		MtimeNs: int64(le.Uint64(b[16:])),
		Exists:  le.Uint32(b[24:])&attrExists != 0,
	}, nil
}

// Handler is the object target behind a server: internal/ost implements
// it. Errors carry their errno (errors.As to syscall.Errno); anything else
// is reported to the client as EIO. Methods are called concurrently, from
// one goroutine per connection.
type Handler interface {
	// Read fills p from offset off; n < len(p) only at the object's end.
	Read(obj fid.ObjID, off uint64, p []byte) (n int, err error)
	// Write stores data at off. meta, if not nil, is recorded when the
	// object has no PFID yet. An object that does not exist is ENOENT.
	Write(obj fid.ObjID, off uint64, data []byte, meta *ObjMeta) error
	// Punch deallocates [off, off+length) without changing the size.
	Punch(obj fid.ObjID, off, length uint64) error
	// Truncate sets the object's size; meta as for Write.
	Truncate(obj fid.ObjID, size uint64, meta *ObjMeta) error
	// GetAttr returns the object's attributes; a missing object is not an
	// error but Exists == false.
	GetAttr(obj fid.ObjID) (ObjAttr, error)
	// Sync makes the object's data and attribute record durable.
	Sync(obj fid.ObjID) error
	// SetAttr changes the groups of the attribute record that meta names.
	SetAttr(obj fid.ObjID, meta *ObjMeta) error
}
