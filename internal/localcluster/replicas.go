package localcluster

// ReplicaHost makes and retires the replicas of the groups of the local
// cluster in Dir, for `nacre replica add|remove|replace --dir`
// (cli.ReplicaHost): replicas live in D/GROUP-rID, and retired ones in
// D/removed-GROUP-rID-TIME.
type ReplicaHost struct {
	ClusterDir string
	// Binary runs the new replicas (default: this executable).
	Binary string
}

// Dir is the cluster directory.
func (h ReplicaHost) Dir() string { return h.ClusterDir }

// RetiredIDs are the ids of the replicas of group retired here
// (RemovedReplicaIDs).
func (h ReplicaHost) RetiredIDs(group string) []uint64 { return RemovedReplicaIDs(h.ClusterDir, group) }

// NewReplica formats and starts replica id of group (NewReplica).
func (h ReplicaHost) NewReplica(group string, id uint64, peers map[uint64]string) (string, string, int, error) {
	return NewReplica(h.ClusterDir, group, id, peers, h.Binary)
}

// Retire stops replica id of group and moves its directory aside
// (RetireReplica).
func (h ReplicaHost) Retire(group string, id uint64) (string, error) {
	return RetireReplica(h.ClusterDir, group, id)
}

// SyncMGS records the MGS replicas in the cluster's targets
// (SyncMGSNodes).
func (h ReplicaHost) SyncMGS() (int, error) { return SyncMGSNodes(h.ClusterDir) }
