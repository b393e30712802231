package mdrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"nacre/internal/netguard"
)

// HeaderSize is the size of every frame header.
const HeaderSize = 24

// MaxPayload bounds one message (a readdir page, a large xattr).
const MaxPayload = 16 << 20

// MethodHello is the handshake method.
const MethodHello = 0

var magic = [4]byte{'N', 'C', 'R', 'M'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type header struct {
	version uint16
	code    uint16 // method (request) or status (reply)
	id      uint64
	n       uint32
	crc     uint32
}

func (h header) put(b []byte) {
	copy(b, magic[:])
	binary.LittleEndian.PutUint16(b[4:], h.version)
	binary.LittleEndian.PutUint16(b[6:], h.code)
	binary.LittleEndian.PutUint64(b[8:], h.id)
	binary.LittleEndian.PutUint32(b[16:], h.n)
	binary.LittleEndian.PutUint32(b[20:], h.crc)
}

// ErrBadFrame is returned for frames that are not Nacre framed RPC.
var ErrBadFrame = errors.New("mdrpc: bad frame")

func parseHeader(b []byte) (header, error) {
	if [4]byte(b[:4]) != magic {
		return header{}, fmt.Errorf("%w: bad magic %q (is this a Nacre MDS data port?)", ErrBadFrame, b[:4])
	}
	h := header{
		version: binary.LittleEndian.Uint16(b[4:]),
		code:    binary.LittleEndian.Uint16(b[6:]),
		id:      binary.LittleEndian.Uint64(b[8:]),
		n:       binary.LittleEndian.Uint32(b[16:]),
		crc:     binary.LittleEndian.Uint32(b[20:]),
	}
	if h.n > MaxPayload {
		return header{}, fmt.Errorf("%w: payload of %d bytes (limit %d)", ErrBadFrame, h.n, MaxPayload)
	}
	return h, nil
}

// keepBuf is the largest receive buffer a connection keeps between
// frames; a larger one, grown for one large message, goes back to the
// collector, so that idle connections do not pin megabytes each.
const keepBuf = 64 << 10

// readFrame reads one frame into buf (grown as needed). The payload's
// buffer grows as its bytes arrive (netguard.ReadGrowing): a header may
// claim up to MaxPayload, and a peer that sends one and stops must not
// make the server reserve it.
func readFrame(r io.Reader, buf []byte) (header, []byte, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, buf, err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return h, buf, err
	}
	buf, err = netguard.ReadGrowing(r, buf, int(h.n))
	if err != nil {
		return h, buf, noEOF(err)
	}
	if crc32.Checksum(buf, castagnoli) != h.crc {
		return h, buf, fmt.Errorf("%w: payload CRC32C mismatch", ErrBadFrame)
	}
	return h, buf, nil
}

// noEOF turns an end of stream inside a frame into ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// frame builds header+payload in one buffer, for one write syscall.
func frame(dst []byte, h header, payload []byte) []byte {
	return seal(append(headroom(dst), payload...), h)
}

// headroom is dst emptied, with room for a header before the payload
// that is appended to it (seal fills the header in).
func headroom(dst []byte) []byte { return append(dst[:0], make([]byte, HeaderSize)...) }

// seal fills in the header of b, a frame whose payload follows the
// headroom.
func seal(b []byte, h header) []byte {
	payload := b[HeaderSize:]
	h.n = uint32(len(payload))
	h.crc = crc32.Checksum(payload, castagnoli)
	h.put(b)
	return b
}
