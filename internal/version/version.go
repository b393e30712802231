// Package version holds the numbers that peers and stores compare before
// they trust each other: the protocol version spoken on every connection and
// the on-disk format version of every target.
package version

// Protocol is the version of the gRPC services and of the framed data
// protocol. Peers with different versions refuse each other with a message
// naming both. 2: an OST repair can be a conditional destroy
// (LfsckObjRepair.destroy_if_empty), which an OSS of protocol 1 would
// take for a record change.
const Protocol = 2

// Format is the on-disk format version of MGS, MDT and OST directories.
const Format = 1

// Software is the release of this build, shown by `nacre version`.
var Software = "0.1.0-dev"
