package client

import (
	"context"

	pb "nacre/api/nacrepb"
)

// Statfs is the file system's space and inodes: bytes summed over the
// OSTs, inodes over the MDTs, as each target reported in its last
// heartbeat to the MGS (at most a second old). Targets that are down are
// counted with their last report.
func (c *Client) Statfs(ctx context.Context) (*pb.Statfs, error) {
	cfg, err := c.Config(ctx)
	if err != nil {
		return nil, err
	}
	out := &pb.Statfs{}
	seen := map[[2]uint32]bool{}
	for _, ti := range sortTargets(cfg.Targets) {
		k := [2]uint32{uint32(ti.Kind), ti.Index}
		if ti.Statfs == nil || seen[k] {
			continue // replicas report the same target
		}
		seen[k] = true
		switch ti.Kind {
		case pb.TargetKind_TARGET_OST:
			out.BytesTotal += ti.Statfs.BytesTotal
			out.BytesFree += ti.Statfs.BytesFree
			out.BytesAvail += ti.Statfs.BytesAvail
		case pb.TargetKind_TARGET_MDT:
			out.InodesTotal += ti.Statfs.InodesTotal
			out.InodesFree += ti.Statfs.InodesFree
		}
	}
	return out, nil
}
