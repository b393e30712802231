// Package frpc is Nacre's framed RPC for metadata requests: protobuf
// messages in length-prefixed, checksummed frames over plain TCP, one
// request at a time per connection, with a pool of connections per server.
//
// It exists because the metadata path is latency-bound: measured on this
// project's 2-core machines, a gRPC unary call cost the client about 200 µs
// of CPU (HTTP/2 framing, a reader and a writer goroutine per connection,
// several syscalls and wake-ups per call), while a synchronous exchange on
// a pooled connection is one write and one read on the caller's goroutine.
// gRPC stays for control and admin services, where its features matter
// more than its cost (see docs/architecture.md, "Dependencies").
//
// # Frames
//
// Little-endian; request and reply share one header of 24 bytes:
//
//	0  4  magic "NCRM"
//	4  2  protocol version (internal/version.Protocol)
//	6  2  request: method id; reply: status (0 ok, else a gRPC code)
//	8  8  request id (echoed by the reply)
//	16 4  payload length (at most MaxPayload)
//	20 4  CRC32C (Castagnoli) of the payload
//
// The payload is the protobuf-encoded request or reply; a reply with a
// non-zero status carries a UTF-8 error message instead. The first request
// on every connection is method 0 (hello) with payload "fsname"; a server
// of another version or file system answers FailedPrecondition with a
// message naming both, and closes the connection.
package frpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
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
var ErrBadFrame = errors.New("frpc: bad frame")

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

// readFrame reads one frame into buf (grown as needed).
func readFrame(r io.Reader, buf []byte) (header, []byte, error) {
	var hb [HeaderSize]byte
	if _, err := io.ReadFull(r, hb[:]); err != nil {
		return header{}, buf, err
	}
	h, err := parseHeader(hb[:])
	if err != nil {
		return h, buf, err
	}
	if cap(buf) < int(h.n) {
		buf = make([]byte, h.n)
	}
	buf = buf[:h.n]
	if _, err := io.ReadFull(r, buf); err != nil {
		return h, buf, err
	}
	if crc32.Checksum(buf, castagnoli) != h.crc {
		return h, buf, fmt.Errorf("%w: payload CRC32C mismatch", ErrBadFrame)
	}
	return h, buf, nil
}

// frame builds header+payload in one buffer, for one write syscall.
func frame(dst []byte, h header, payload []byte) []byte {
	h.n = uint32(len(payload))
	h.crc = crc32.Checksum(payload, castagnoli)
	dst = append(dst[:0], make([]byte, HeaderSize)...)
	h.put(dst)
	return append(dst, payload...)
}
