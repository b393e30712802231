// Package mdrpc is the metadata RPC: the framed protocol that carries the
// metadata service (api/services.proto) between clients and MDSs: protobuf
// messages in length-prefixed, checksummed frames over plain TCP, one
// request at a time per connection, with a pool of connections per server.
//
// It exists because the metadata path is latency-bound: a gRPC unary call
// costs the client several times the CPU of the exchange itself (HTTP/2
// framing, a reader and a writer goroutine per connection, several
// syscalls and wake-ups per call), while a synchronous exchange on a
// pooled connection is one write and one read on the caller's goroutine.
// gRPC stays for control and admin services, where its features matter
// more than its cost (see docs/architecture.md, "Dependencies").
//
// # Frames
//
// Little-endian; request and reply share one header of 24 bytes:
//
//	0  4  magic "NCRM"
//	4  2  protocol version (internal/version.Protocol)
//	6  2  request: method id; reply: status (0 ok, else an errno.Code)
//	8  8  request id (echoed by the reply)
//	16 4  payload length (at most MaxPayload)
//	20 4  CRC32C (Castagnoli) of the payload
//
// The payload is the protobuf-encoded request or reply; a reply with a
// non-zero status carries the error instead, as a pb.Failure (its code,
// message, and the leader of a not-the-leader refusal: errno.FromFailure
// gives the caller the *errno.Error back), or as UTF-8 text to a peer of
// another protocol version, which may not read this version's Failure.
// The first request on every connection is method 0 (hello) with payload
// "fsname"; a server of another version or file system answers
// FailedPrecondition with a message naming both, and closes the
// connection.
//
// # Connections
//
// A client keeps a pool of connections and sends one request at a time on
// each. The server bounds what a connection costs it (ServerOptions): a
// frame must arrive whole within FrameTimeout of its first byte, and a
// reply be taken within it; a connection without a request for
// IdleTimeout is closed; a frame's payload buffer grows as its bytes
// arrive, so a header claiming MaxPayload reserves 64 KiB until they do;
// a peer IP holds at most MaxConnsPerPeer connections; warnings about a
// peer's bad frames come at most once per WarnEvery. A client whose
// pooled connection was closed while idle sends the request again once,
// on a connection it dials.
//
// With TLS (ServerOptions.TLS, ClientOptions.TLS: internal/pki's
// configurations) a connection starts with a TLS 1.3 handshake, both
// sides' certificates checked, within pki.HandshakeTimeout; the frames
// above travel inside it unchanged. A peer the handshake refuses is
// logged (at most once per WarnEvery) with its address and why.
//
// # The MDS binding
//
// mds.go binds the metadata service to the frames: the method ids (never
// renumbered, only appended), the server-side table that dispatches to a
// MDSService (MDSMethods), and MDS, the client the client library
// uses on the metadata hot path.
package mdrpc
