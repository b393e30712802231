package raftgroup

import (
	"io"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
)

// Transport carries raft messages between the replicas of groups. One
// transport serves every group of a process; messages name their group.
type Transport interface {
	// Register makes the transport deliver the messages of group to h.
	Register(group uint64, h Handler) error
	// Unregister stops delivery to group's handler; when it returns, the
	// transport no longer calls the handler's OpenSnapshot (so the state
	// machine's store may be closed).
	Unregister(group uint64)
	// Send queues m for replica to of group. It never blocks: messages
	// to one replica leave in order, and a message that cannot be queued
	// or sent is dropped and reported with Handler.ReportUnreachable.
	// A MsgSnap is sent with the image from Handler.OpenSnapshot, and its
	// outcome reported with Handler.ReportSnapshot.
	Send(group uint64, to Peer, m *pb.Message)
}

// Handler is a group's side of a Transport; Start registers one per
// group. None of its methods block on the group's loop.
type Handler interface {
	// Deliver hands received messages to the group; from is the
	// sending process's listen address, if the transport knows it.
	Deliver(from string, msgs []*pb.Message)
	// ReportUnreachable tells raft a message to replica id was lost.
	ReportUnreachable(id uint64)
	// ReportSnapshot tells raft whether a snapshot reached replica id.
	ReportSnapshot(id uint64, status raft.SnapshotStatus)
	// OpenSnapshot returns the state machine image to send with a MsgSnap.
	OpenSnapshot() (SnapshotData, error)
	// ReceiveSnapshot reads the image that came with m (a MsgSnap) from
	// r, stores it, then delivers m.
	ReceiveSnapshot(m *pb.Message, r io.Reader) error
}

// handler is the Handler of a Group.
type handler struct{ g *Group }

func (h handler) Deliver(from string, msgs []*pb.Message) {
	g := h.g
	if from != "" {
		g.learnAddr(from, msgs)
	}
	dropped := false
	g.in.push(func(it *inboxItems) {
		if len(it.msgs)+len(msgs) > maxInboxMsgs {
			dropped = true
			return
		}
		it.msgs = append(it.msgs, msgs...)
	})
	if dropped {
		g.log.Warn("raft inbox full; messages dropped", "count", len(msgs))
	}
	g.signal()
}

func (h handler) ReportUnreachable(id uint64) {
	h.g.in.push(func(it *inboxItems) { it.reports = append(it.reports, report{id: id, unreachable: true}) })
	h.g.signal()
}

func (h handler) ReportSnapshot(id uint64, status raft.SnapshotStatus) {
	failed := status == raft.SnapshotFailure
	if failed {
		h.g.log.Warn("snapshot not delivered", "to", id)
	} else {
		h.g.log.Info("snapshot delivered", "to", id)
	}
	h.g.in.push(func(it *inboxItems) { it.reports = append(it.reports, report{id: id, snapFailed: failed}) })
	h.g.signal()
}

func (h handler) OpenSnapshot() (SnapshotData, error) {
	select {
	case <-h.g.done:
		return nil, ErrStopped
	default:
	}
	return h.g.sm.Snapshot()
}

func (h handler) ReceiveSnapshot(m *pb.Message, r io.Reader) error {
	g := h.g
	sp, err := newSpool(g.cfg.SnapshotDir, r)
	if err != nil {
		return err
	}
	idx := m.GetSnapshot().GetMetadata().GetIndex()
	g.log.Info("received snapshot image", "from", m.GetFrom(), "index", idx, "bytes", sp.size)
	g.in.mu.Lock()
	if g.in.closed {
		g.in.mu.Unlock()
		sp.release()
		return ErrStopped
	}
	// Keep only the newest image: raft never goes back to an older one.
	for i, old := range g.in.spools {
		if i <= idx {
			old.release()
			delete(g.in.spools, i)
		}
	}
	g.in.spools[idx] = sp
	g.in.it.msgs = append(g.in.it.msgs, m)
	g.in.mu.Unlock()
	g.signal()
	return nil
}

// takeSpool removes and returns the image received for index idx, and
// releases older ones (raft never goes back to them).
func (g *Group) takeSpool(idx uint64) *spool {
	g.in.mu.Lock()
	defer g.in.mu.Unlock()
	sp := g.in.spools[idx]
	delete(g.in.spools, idx)
	for i, o := range g.in.spools {
		if i < idx {
			o.release()
			delete(g.in.spools, i)
		}
	}
	return sp
}
