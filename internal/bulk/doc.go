// Package bulk is Nacre's bulk-data protocol: the framed binary protocol
// that clients use to read and write OST objects, and that the OSS serves
// next to its gRPC control service. It exists because file data should not
// pay for a protobuf copy and HTTP/2 flow control (see the design notes on
// dependencies): a frame is a fixed header, a small op-specific extension
// and a raw payload, checksummed end to end with CRC32C.
//
// # Frames
//
// Every request and every reply is one frame:
//
//	header (64 bytes) | extension (ext length bytes) | payload (payload length bytes)
//
// All integers are little-endian. The header, byte by byte:
//
//	offset size field
//	 0     4    magic: the bytes "NCRW" (0x4e 0x43 0x52 0x57)
//	 4     2    version: the sender's protocol version (internal/version.Protocol)
//	 6     1    opcode (below)
//	 7     1    flags: bit 0 = REPLY, set on every reply; other bits are zero
//	 8     8    request id: chosen by the client, echoed by the reply
//	16     8    object sequence
//	24     8    object id
//	32     8    offset
//	40     8    length
//	48     2    status: 0 on requests and on successful replies, else a Linux errno
//	50     2    ext length: bytes of extension after the header, at most 256
//	52     4    payload length: at most MaxPayload (4 MiB)
//	56     4    payload CRC32C (Castagnoli) of the payload bytes (0 when empty)
//	60     4    header CRC32C of bytes 0..59 followed by the extension bytes
//
// A reply echoes the request's opcode, request id and object, and carries
// the replying side's version.
//
// # Opcodes
//
//	1 HELLO     handshake, first frame on every connection (below)
//	2 READ      offset, length (at most MaxPayload). Reply payload: the bytes
//	            read; shorter than length only at the object's end; holes
//	            read as zeros. Reply length = payload length.
//	3 WRITE     offset, length = payload length, payload = data, optional
//	            meta extension. Reply: status only.
//	4 PUNCH     offset, length: deallocate the range (fallocate
//	            PUNCH_HOLE|KEEP_SIZE); the size does not change.
//	5 TRUNCATE  offset = the new object size, optional meta extension.
//	6 GETATTR   reply extension: attr (below).
//	7 SYNC      make the object's data and attribute record durable.
//	8 SETATTR   meta extension (required): change owner, project or PFID.
//
// WRITE and TRUNCATE carry the meta extension so that the OST can record the
// object's parent file (PFID), its place in the layout and its owner on the
// first write, as Lustre's OST does with its filter_fid; later writes leave
// a recorded PFID alone. Every op is idempotent, which is what lets a client
// resend a request after a broken connection.
//
// The meta extension (48 bytes):
//
//	 0  8  parent FID sequence
//	 8  4  parent FID object id
//	12  4  parent FID version
//	16  4  stripe index
//	20  4  stripe size
//	24  4  stripe count
//	28  4  layout generation
//	32  4  uid
//	36  4  gid
//	40  4  project id
//	44  4  valid: bit 0 PFID (parent, stripe fields, generation),
//	       bit 1 owner (uid, gid), bit 2 project id; 0 means all
//
// The attr extension of a GETATTR reply (32 bytes):
//
//	 0  8  size in bytes
//	 8  8  512-byte blocks allocated
//	16  8  mtime, nanoseconds since the Unix epoch (signed)
//	24  4  flags: bit 0 = the object exists
//	28  4  zero
//
// A receiver rejects an extension shorter than its op's struct and ignores
// bytes beyond it (room for additions that older peers may skip).
//
// # Errors
//
// A failed request gets a reply with the errno in status, no extension and,
// optionally, a short UTF-8 message in the payload (at most 4 KiB) when the
// server has something to add to the errno: a CRC mismatch, a refused
// handshake, a malformed request. Handler errors travel as their errno
// alone; the server logs the details. The client turns the errno into an
// *errno.Errno whose Op names the operation, the OST and the object, e.g.
// "write OST0001 object 0x100000000:0x2a at 1048576: no space left on device".
//
// # CRC rules
//
// The header CRC protects the framing. A receiver that finds it wrong (or a
// bad magic, an unknown flag, an extension or payload over the limits)
// cannot trust any length in the frame: it drops the connection. A server
// that can still parse the header of an oversized frame first replies
// EMSGSIZE with a message naming the limit.
//
// The payload CRC protects the data and does not desynchronise the stream:
// the frame has been read in full. A server that finds a request payload
// corrupt replies EIO and counts it (Stats.CRCErrors); a client that finds a
// READ reply corrupt resends the read once, then fails with EIO naming the
// object and offset.
//
// # Epochs
//
// The replies to WRITE, PUNCH, TRUNCATE, SYNC and SETATTR carry the
// server's epoch in length (ServerOptions.Epoch; 0 from a server that has
// none): it changes when a restart may have lost writes the server had
// acknowledged but not synced (internal/ost, epoch.go). A client compares
// the epoch its writes got with the one its SYNC gets, as NFS compares
// write verifiers.
//
// # Handshake and versioning
//
// The client opens each connection with HELLO: version = its protocol
// version, payload = the file system name it expects (empty: any). The
// server answers with its own version, offset = its target index and
// payload = its file system name, or refuses with EPROTO and a message that
// names both versions (errno.VersionMismatch) or both file system names, and
// closes the connection. Any other first frame is refused the same way. The
// client also refuses a server that answers with another version.
//
// The first 8 header bytes and the HELLO exchange are frozen across protocol
// versions, so that any two releases can refuse each other with a clear
// message. Any other change to the format bumps version.Protocol; frames of
// another version after the handshake are refused with EPROTO.
//
// # Connections
//
// A client keeps a small pool of TCP connections per server (TCP_NODELAY)
// and sends one request at a time on each, waiting for its reply; parallel
// requests use parallel connections. The server handles the requests of one
// connection in order, so a pipelining client would get its replies in
// order. A client drops any connection on which a call was cancelled or
// failed midway, so a half-read frame never meets the next request.
//
// The server bounds what a connection costs it (ServerOptions): a frame
// must arrive whole within IOTimeout of its first byte, and a reply be
// taken within it; a connection without a request for IdleTimeout is
// closed; a payload is read into pooled buffers of 64 KiB, 256 KiB,
// 1 MiB and 4 MiB, taking the next class only once the one before is
// full, so a header claiming MaxPayload reserves 64 KiB until its bytes
// arrive; a peer IP holds at most MaxConnsPerPeer connections; warnings
// about a peer's bad frames come at most once per WarnEvery. A client
// whose pooled connection was closed while idle sends the request again
// on a connection it dials, as after any broken connection.
//
// With TLS (ServerOptions.TLS, ClientOptions.TLS: internal/pki's
// configurations) a connection starts with a TLS 1.3 handshake, both
// sides' certificates checked, within pki.HandshakeTimeout; the frames
// travel inside it unchanged, CRCs included (they catch what TLS cannot:
// a disk or a buffer that changed the data before it was sealed). A peer
// the handshake refuses is logged with its address and why.
package bulk
