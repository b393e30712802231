// Package version holds the numbers that peers and stores compare before
// they trust each other: the protocol version spoken on every connection and
// the on-disk format version of every target.
package version

// Protocol is the version of the gRPC services, the metadata RPC and the
// bulk data protocol. Peers with different versions refuse each other with
// a message naming both. Version 3: a failed metadata RPC carries a
// pb.Failure (code, message, the leader of a not-the-leader refusal)
// instead of text.
const Protocol = 3

// Format is the on-disk format version of MGS, MDT and OST directories.
const Format = 1

// Software is the release of this build, shown by `nacre version`.
var Software = "0.1.0-dev"
