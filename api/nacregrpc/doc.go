// Package nacregrpc holds the gRPC services of Nacre's servers (MGS, MDS,
// OSS, LDLM, OpenFiles, Lfsck, Fault, Raft, RaftAdmin), generated from
// api/services.proto by api/gen.sh. Their messages are in api/nacrepb.
// Only what speaks gRPC imports it; internal/grpcx sets the connections up.
package nacregrpc
