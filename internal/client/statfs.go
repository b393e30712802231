package client

import (
	"context"

	"google.golang.org/protobuf/proto"

	pb "nacre/api/nacrepb"
)

// Statfs is the file system's space and inodes: bytes summed over the
// OSTs, inodes over the MDTs, as each target reported in its last
// heartbeat to the MGS (at most a second old). Targets that are down are
// left out, as `nacre df` leaves them out of its totals. While the MGS does
// not answer, the last answer is given again (files work without the MGS;
// df on a mount must not fail then).
func (c *Client) Statfs(ctx context.Context) (*pb.Statfs, error) {
	cfg, err := c.Config(ctx)
	if err != nil {
		if last := c.lastStatfs.Load(); last != nil {
			c.log.Debug("statfs: the MGS does not answer; giving the last figures", "err", err)
			return proto.Clone(last).(*pb.Statfs), nil
		}
		return nil, err
	}
	out := &pb.Statfs{}
	seen := map[[2]uint32]bool{}
	for _, ti := range sortTargets(cfg.Targets) {
		k := [2]uint32{uint32(ti.Kind), ti.Index}
		if ti.Statfs == nil || seen[k] || ti.State != "up" {
			continue // replicas report the same target; a down one counts nothing
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
	c.lastStatfs.Store(proto.Clone(out).(*pb.Statfs))
	return out, nil
}
