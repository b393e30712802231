package raftgroup

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacrepb"
)

// ErrMembershipBusy: raft refused a membership change because an earlier
// one is not applied yet. Retry once it is.
var ErrMembershipBusy = errors.New("raftgroup: another membership change is still in progress; retry")

// AddVoter adds replica id, serving at addr, as a voter, and returns once
// the change is applied on this replica (the leader). Start the new
// replica with Config.Join first. A replica that is far behind is better
// added as a learner first and promoted with AddVoter once it caught up,
// so that the group's quorum never waits for it.
func (g *Group) AddVoter(ctx context.Context, id uint64, addr string) error {
	return g.changeMembership(ctx, pb.ConfChangeAddNode, id, addr)
}

// AddLearner adds replica id, serving at addr, as a learner: it receives
// the log but does not vote.
func (g *Group) AddLearner(ctx context.Context, id uint64, addr string) error {
	return g.changeMembership(ctx, pb.ConfChangeAddLearnerNode, id, addr)
}

// RemovePeer removes replica id (voter or learner) from the group. A
// leader that removes itself steps down once the change is applied.
func (g *Group) RemovePeer(ctx context.Context, id uint64) error {
	return g.changeMembership(ctx, pb.ConfChangeRemoveNode, id, "")
}

func (g *Group) changeMembership(ctx context.Context, typ pb.ConfChangeType, id uint64, addr string) error {
	if id == 0 {
		return errors.New("raftgroup: replica id must be > 0")
	}
	if err := g.checkLeader(); err != nil {
		return err
	}
	if addr != "" {
		// The leader must reach the new replica before the change is
		// applied: raft starts replicating to it as soon as it is appended.
		if err := g.UpdatePeer(Peer{ID: id, Addr: addr}); err != nil {
			return err
		}
	}
	p := &proposal{seq: g.seq.Add(1), done: make(chan result, 1)}
	peer, err := proto.Marshal(&nacrepb.RaftPeer{Id: id, Addr: addr})
	if err != nil {
		return err
	}
	p.cc = &pb.ConfChangeV2{
		Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}},
		Context: append(appendHeader(nil, g.id, p.seq), peer...),
	}
	g.in.push(func(it *inboxItems) { it.props = append(it.props, p) })
	g.signal()
	if _, err := g.await(ctx, p); err != nil {
		return fmt.Errorf("membership change %s of replica %d: %w", typ, id, err)
	}
	return nil
}

// decodeChangeContext reads the proposal header and the peer from a
// membership change's context; changes proposed by other code (none
// today) have neither.
func decodeChangeContext(ctx []byte) (id, seq uint64, peer *nacrepb.RaftPeer) {
	id, seq, rest, err := decodeProposal(ctx)
	if err != nil {
		return 0, 0, nil
	}
	peer = new(nacrepb.RaftPeer)
	if proto.Unmarshal(rest, peer) != nil {
		peer = nil
	}
	return id, seq, peer
}

// UpdatePeer records (or changes) the address of a replica, e.g. when the
// MGS reports that a replica moved. The address book is stored next to
// the raft log.
func (g *Group) UpdatePeer(p Peer) error {
	g.peersMu.Lock()
	defer g.peersMu.Unlock()
	if g.peers[p.ID] == p.Addr {
		return nil
	}
	g.peers[p.ID] = p.Addr
	if err := g.db.Set(g.keys.peers, encodePeers(g.peers), false); err != nil {
		return fmt.Errorf("raft group %d: write address book: %w", g.gid, err)
	}
	return nil
}

func (g *Group) setPeerAddr(id uint64, addr string) {
	if err := g.UpdatePeer(Peer{ID: id, Addr: addr}); err != nil {
		g.log.Warn("address book not updated", "peer", id, "err", err)
	}
}

// mergePeers adds the addresses a snapshot carries (the leader's address
// book) for replicas this one has not heard of.
func (g *Group) mergePeers(data []byte) {
	if len(data) == 0 {
		return
	}
	var ps nacrepb.RaftPeers
	if err := proto.Unmarshal(data, &ps); err != nil {
		g.log.Warn("snapshot carries an unreadable address book", "err", err)
		return
	}
	for _, p := range ps.Peers {
		if p.Addr != "" && g.peerAddr(p.Id) == "" {
			g.setPeerAddr(p.Id, p.Addr)
		}
	}
}

func (g *Group) encodedPeers() []byte {
	g.peersMu.RLock()
	defer g.peersMu.RUnlock()
	return encodePeers(g.peers)
}
