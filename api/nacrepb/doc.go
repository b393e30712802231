// Package nacrepb holds the messages of Nacre's protocols and on-disk
// records, generated from api/*.proto by api/gen.sh: what the metadata
// RPC, the bulk protocol's extensions, the gRPC services (api/nacregrpc)
// and the MDT's store carry. It links no gRPC.
package nacrepb
