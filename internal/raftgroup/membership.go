package raftgroup

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/kv"
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
	if err := g.keepsQuorum(ctx, id); err != nil {
		return err
	}
	return g.changeMembership(ctx, pb.ConfChangeRemoveNode, id, "")
}

// keepsQuorum refuses to remove voter id when the voters left would not
// have a majority running (as etcd's strict reconfiguration check): with
// replica 5 of 5, 6, 7 down, removing 6 left 5 and 7, one of two running,
// and the group stopped, unable even to take the removal back. The leader
// knows who answered within the last election timeout; right after an
// election it may not have heard from everyone yet, so a refusal waits a
// moment for that.
func (g *Group) keepsQuorum(ctx context.Context, id uint64) error {
	deadline := time.Now().Add(2 * time.Second)
	for {
		st := g.Status()
		if st.State != "leader" || st.Progress == nil || !slices.Contains(st.Voters, id) {
			return nil // changeMembership says what is wrong, if anything
		}
		var left, running []uint64
		var down []string
		for _, v := range st.Voters {
			if v == id {
				continue
			}
			left = append(left, v)
			if v == st.ID || st.Progress[v].RecentActive {
				running = append(running, v)
			} else {
				down = append(down, fmt.Sprint(v))
			}
		}
		if len(running) > len(left)/2 {
			return nil
		}
		if time.Now().After(deadline) {
			return &memberError{kind: ErrWouldLoseQuorum, msg: fmt.Sprintf("%s: removing replica %d would leave %d of %d voters running (replica %s not answering): the group would lose its quorum and stop serving; bring the replicas that are down back first, or remove one of them instead",
				g.name(), id, len(running), len(left), strings.Join(down, ", "))}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (g *Group) changeMembership(ctx context.Context, typ pb.ConfChangeType, id uint64, addr string) error {
	if id == 0 {
		return errors.New("raftgroup: replica id must be > 0")
	}
	if typ != pb.ConfChangeRemoveNode && g.wasRemoved(id) {
		// A replica that comes back under an old id could be taken for
		// the old one: its votes and acknowledgements would count for a
		// log it never had.
		return fmt.Errorf("raftgroup: replica id %d was removed from this group; ids are never reused: give the new replica an id no replica ever had", id)
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
	peer, err := proto.Marshal(&nacrepb.RaftPeer{Id: id, Addr: addr})
	if err != nil {
		return err
	}
	// Raft takes one change at a time, and a new leader none until it has
	// applied its first entry: wait for those (briefly) rather than fail.
	for pause := 20 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		p := &proposal{seq: g.seq.Add(1), done: make(chan result, 1)}
		p.cc = &pb.ConfChangeV2{
			Changes: []*pb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}},
			Context: append(appendHeader(nil, g.id, p.seq), peer...),
		}
		g.in.push(func(it *inboxItems) { it.props = append(it.props, p) })
		g.signal()
		_, err := g.await(ctx, p)
		if errors.Is(err, ErrMembershipBusy) {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
				continue
			case <-ctx.Done():
				t.Stop()
			case <-g.done:
				t.Stop()
			}
		}
		if err != nil {
			return fmt.Errorf("membership change %s of replica %d: %w", typ, id, err)
		}
		return nil
	}
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
	if p.ID == g.id {
		g.tellSelf(p.Addr)
	}
	if err := g.db.Set(g.keys.peers, encodePeers(g.peers), false); err != nil {
		return fmt.Errorf("raft group %d: write address book: %w", g.gid, err)
	}
	return nil
}

// tellSelf gives the transport this replica's address, which it sends
// with every batch (learnAddr). A replica that joined learns its own
// address when it applies its addition, if its configuration did not
// name it.
func (g *Group) tellSelf(addr string) {
	if s, ok := g.tr.(interface{ setSelf(string) }); ok && addr != "" {
		s.setSelf(addr)
	}
}

func (g *Group) setPeerAddr(id uint64, addr string) {
	if err := g.UpdatePeer(Peer{ID: id, Addr: addr}); err != nil {
		g.log.Warn("address book not updated", "peer", id, "err", err)
	}
}

// mergePeers adds the addresses a snapshot carries (the leader's address
// book) for replicas this one has not heard of, and the ids removed from
// the group: the entries that removed them are behind the snapshot.
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
	for _, id := range ps.Removed {
		if err := g.noteRemoved(id); err != nil {
			g.log.Warn("removed replica id from a snapshot not recorded", "peer", id, "err", err)
		}
	}
}

// learnAddr records from as the address of the replicas that sent msgs,
// for those missing from the address book. Without it a replica that was
// down while another joined could never answer that one once it leads:
// its answers had no address to go to, so the leader would never learn
// that it lags and send it the snapshot that carries the address book.
func (g *Group) learnAddr(from string, msgs []*pb.Message) {
	var last uint64
	for _, m := range msgs {
		id := m.GetFrom()
		if id == last || id == 0 || id == g.id {
			continue
		}
		last = id
		if g.peerAddr(id) != "" || g.wasRemoved(id) {
			continue
		}
		g.log.Info("learned the address of a replica from its messages", "peer", id, "addr", from)
		g.setPeerAddr(id, from)
	}
}

// snapshotPeers is what a snapshot carries besides the state machine's
// image: the address book and the removed ids.
func (g *Group) snapshotPeers() []byte {
	g.peersMu.RLock()
	defer g.peersMu.RUnlock()
	ps := peersMsg(g.peers)
	for id := range g.removed {
		ps.Removed = append(ps.Removed, id)
	}
	slices.Sort(ps.Removed)
	v, _ := proto.MarshalOptions{Deterministic: true}.Marshal(ps)
	return v
}

// ErrAlreadyMember: AddReplica was asked to add a replica id that is
// already a voter or a learner of the group (at another address, or a
// voter as a learner). Raft keeps one replica per id: giving a member a
// new address only points the leader elsewhere and cuts the replica off.
// A replica moves by replacement: a new id at the new address, then the
// old id removed.
var ErrAlreadyMember = errors.New("raftgroup: the replica is already a member")

// ErrNotMember: the replica named is neither a voter nor a learner of the
// group.
var ErrNotMember = errors.New("raftgroup: no such replica in the group")

// ErrNotVoter: leadership can only go to a voter, not to a learner.
var ErrNotVoter = errors.New("raftgroup: the replica is a learner, not a voter")

// ErrWouldLoseQuorum: removing the replica would leave fewer running
// voters than a majority of the rest.
var ErrWouldLoseQuorum = errors.New("raftgroup: the removal would leave the group without a quorum")

// memberError is ErrAlreadyMember, ErrNotMember or ErrNotVoter with a
// message for operators: it names the replica, the group and what to do.
type memberError struct {
	kind error
	msg  string
}

func (e *memberError) Error() string { return e.msg }
func (e *memberError) Unwrap() error { return e.kind }

// name is how messages name the group: Config.Name, else its number.
func (g *Group) name() string {
	if g.cfg.Name != "" {
		return g.cfg.Name
	}
	return fmt.Sprintf("raft group %d", g.gid)
}

// target is the group's --target for `nacre replica` (Config.Target).
func (g *Group) target() string {
	if g.cfg.Target != "" {
		return g.cfg.Target
	}
	return "GROUP"
}

// roleIn returns "voter", "learner" or "" (not a member) for replica id in
// st.
func roleIn(st Status, id uint64) string {
	switch {
	case slices.Contains(st.Voters, id):
		return "voter"
	case slices.Contains(st.Learners, id):
		return "learner"
	}
	return ""
}

// notMember is the ErrNotMember of replica id, listing the members of st
// ("no replica 9 in MDT0000 (replicas 1, 2, 3)").
func (g *Group) notMember(st Status, id uint64) error {
	var ids []string
	for _, v := range st.Voters {
		ids = append(ids, fmt.Sprint(v))
	}
	for _, l := range st.Learners {
		ids = append(ids, fmt.Sprintf("%d (learner)", l))
	}
	return &memberError{kind: ErrNotMember, msg: fmt.Sprintf("no replica %d in %s (replicas %s)", id, g.name(), strings.Join(ids, ", "))}
}

// checkMember returns nil if replica id is a member of the group (a voter
// or, unless voterOnly, a learner) in this replica's view, else
// ErrNotMember or ErrNotVoter with a message naming the members.
func (g *Group) checkMember(id uint64, voterOnly bool) error {
	st := g.Status()
	switch roleIn(st, id) {
	case "voter":
		return nil
	case "learner":
		if !voterOnly {
			return nil
		}
		addr := g.peerAddr(id)
		if addr == "" {
			addr = "ITS_ADDRESS"
		}
		return &memberError{kind: ErrNotVoter, msg: fmt.Sprintf(
			"replica %d is a learner of %s and cannot lead; promote it to voter first (nacre replica add --target %s --id %d --addr %s)",
			id, g.name(), g.target(), id, addr)}
	}
	return g.notMember(st, id)
}

// AddReplica adds replica id, serving at addr and started with
// Config.Join, the safe way: as a learner first, so that the group's
// quorum never waits for a replica that is still catching up, and then,
// once its log has reached the leader's commit index, as a voter (unless
// learnerOnly).
//
// A replica id that is already a member is refused with ErrAlreadyMember
// when addr is not its address (moving a replica is a replacement), or
// when it is a voter and learnerOnly (a voter is not demoted). With its
// own address the call is idempotent, so that a caller may retry it, e.g.
// against a new leader after the old one lost leadership mid-way: a
// learner is only promoted (this is also how a replica added with
// learnerOnly becomes a voter), a voter is left alone.
func (g *Group) AddReplica(ctx context.Context, id uint64, addr string, learnerOnly bool) error {
	if err := g.checkLeader(); err != nil {
		return err
	}
	st := g.Status()
	role := roleIn(st, id)
	if role != "" {
		cur := g.peerAddr(id)
		at := cur
		if at == "" {
			at = "an unknown address"
		}
		switch {
		case addr != "" && cur != "" && addr != cur:
			return &memberError{kind: ErrAlreadyMember, msg: fmt.Sprintf(
				"replica %d is already a %s of %s at %s; to move it, use nacre replica replace", id, role, g.name(), at)}
		case role == "voter" && learnerOnly:
			return &memberError{kind: ErrAlreadyMember, msg: fmt.Sprintf(
				"replica %d is already a voter of %s at %s; a voter does not become a learner again", id, g.name(), at)}
		case cur == "" && addr != "":
			// A member missing from the address book: record it.
			if err := g.UpdatePeer(Peer{ID: id, Addr: addr}); err != nil {
				return err
			}
		}
	}
	if role == "voter" {
		return nil
	}
	if role == "" {
		if err := g.AddLearner(ctx, id, addr); err != nil {
			return err
		}
		g.log.Info("learner added; waiting for it to catch up", "learner", id, "addr", addr)
	}
	if learnerOnly {
		return nil
	}
	if err := g.waitCaughtUp(ctx, id); err != nil {
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
			// Kept as a learner (it holds no vote, so the group's
			// majority is unchanged): a retry promotes it.
			return &errno.Error{Code: errno.CodeOf(err), Reason: errno.LearnerKept, Cause: err,
				Msg: fmt.Sprintf("%v; it stays a learner of %s, which costs the group nothing: once its process runs and reaches the group, run the same command again to make it a voter, or take it out with nacre replica remove (its id %d is then never used again)",
					err, g.name(), id)}
		}
		return err
	}
	if err := g.AddVoter(ctx, id, ""); err != nil {
		return err
	}
	g.log.Info("learner caught up and promoted to voter", "replica", id)
	return nil
}

// waitCaughtUp waits until replica id has every entry committed when the
// wait began (leader only).
func (g *Group) waitCaughtUp(ctx context.Context, id uint64) error {
	target := g.commit.Load()
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		st := g.Status()
		if st.State != "leader" {
			return g.notLeader()
		}
		if pr, ok := st.Progress[id]; ok && pr.Match >= target {
			return nil
		}
		select {
		case <-ctx.Done():
			pr := st.Progress[id]
			return fmt.Errorf("replica %d has not caught up (it has index %d of %d, state %s): %w", id, pr.Match, target, pr.State, ctx.Err())
		case <-g.done:
			return g.stoppedErr()
		case <-t.C:
		}
	}
}

// wasRemoved reports whether replica id was ever removed from the group.
func (g *Group) wasRemoved(id uint64) bool {
	g.peersMu.RLock()
	defer g.peersMu.RUnlock()
	return g.removed[id]
}

// removedIDs lists the ids removed from the group, in order.
func (g *Group) removedIDs() []uint64 {
	g.peersMu.RLock()
	defer g.peersMu.RUnlock()
	out := make([]uint64, 0, len(g.removed))
	for id := range g.removed {
		out = append(out, id)
	}
	slices.Sort(out)
	return out
}

// noteRemoved records that replica id left the group (every replica
// applies the change, so each keeps the record).
func (g *Group) noteRemoved(id uint64) error {
	g.peersMu.Lock()
	defer g.peersMu.Unlock()
	if g.removed[id] {
		return nil
	}
	g.removed[id] = true
	if err := g.db.Set(g.keys.removed, encodeRemoved(g.removed), false); err != nil {
		return fmt.Errorf("raft group %d: record removed replica %d: %w", g.gid, id, err)
	}
	return nil
}

func loadRemoved(db *kv.DB, k keys) (map[uint64]bool, error) {
	v, err := db.Get(k.removed)
	if errors.Is(err, kv.ErrNotFound) {
		return map[uint64]bool{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read removed replica ids: %w", err)
	}
	if len(v)%8 != 0 {
		return nil, fmt.Errorf("read removed replica ids: %d bytes, not a list of 8-byte ids", len(v))
	}
	m := make(map[uint64]bool, len(v)/8)
	for i := 0; i < len(v); i += 8 {
		m[binary.BigEndian.Uint64(v[i:])] = true
	}
	return m, nil
}

func encodeRemoved(m map[uint64]bool) []byte {
	ids := make([]uint64, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	v := make([]byte, 0, 8*len(ids))
	for _, id := range ids {
		v = binary.BigEndian.AppendUint64(v, id)
	}
	return v
}
