package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// MemNetwork connects in-process transports without sockets: the
// in-memory twin of GRPCTransport, for tests that want replicas cheaply
// and cut links at will. Each MemTransport plays one process, known by an
// address of the test's choosing.
type MemNetwork struct {
	mu    sync.Mutex
	nodes map[string]*MemTransport
}

// NewMemNetwork returns an empty network.
func NewMemNetwork() *MemNetwork { return &MemNetwork{nodes: map[string]*MemTransport{}} }

// Transport returns a new transport reachable at addr; it replaces one
// that was closed under the same address (a restarted process).
func (n *MemNetwork) Transport(addr string) *MemTransport {
	ctx, cancel := context.WithCancel(context.Background())
	t := &MemTransport{net: n, addr: addr, ctx: ctx, cancel: cancel,
		groups: map[uint64]*memGroup{}, peers: map[string]*memPeer{}}
	n.mu.Lock()
	n.nodes[addr] = t
	n.mu.Unlock()
	return t
}

func (n *MemNetwork) lookup(addr string) *MemTransport {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[addr]
}

// MemTransport is a Transport on a MemNetwork. Like GRPCTransport it keeps
// one ordered, bounded queue and goroutine per destination, so the loop
// never blocks and messages to one replica arrive in order; messages are
// cloned on the way, as if encoded.
type MemTransport struct {
	net    *MemNetwork
	addr   string
	ctx    context.Context
	cancel context.CancelFunc
	filter atomic.Pointer[Filter]

	mu     sync.Mutex
	groups map[uint64]*memGroup
	peers  map[string]*memPeer
	closed bool
	wg     sync.WaitGroup
}

type memGroup struct {
	h      Handler
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type memPeer struct {
	addr string
	q    chan outMsg
}

var _ Transport = (*MemTransport)(nil)

// Addr is the transport's address on its network.
func (t *MemTransport) Addr() string { return t.addr }

// SetFilter installs f (nil removes it); see GRPCTransport.SetFilter.
func (t *MemTransport) SetFilter(f Filter) {
	if f == nil {
		t.filter.Store(nil)
		return
	}
	t.filter.Store(&f)
}

// Register implements Transport.
func (t *MemTransport) Register(group uint64, h Handler) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("raft transport closed")
	}
	if t.groups[group] != nil {
		return fmt.Errorf("raft group %d is already registered with this transport", group)
	}
	ctx, cancel := context.WithCancel(t.ctx)
	t.groups[group] = &memGroup{h: h, ctx: ctx, cancel: cancel}
	return nil
}

// Unregister implements Transport.
func (t *MemTransport) Unregister(group uint64) {
	t.mu.Lock()
	g := t.groups[group]
	delete(t.groups, group)
	t.mu.Unlock()
	if g != nil {
		g.cancel()
		g.wg.Wait()
	}
}

func (t *MemTransport) handler(group uint64) Handler {
	t.mu.Lock()
	defer t.mu.Unlock()
	if g := t.groups[group]; g != nil && !t.closed {
		return g.h
	}
	return nil
}

// Send implements Transport.
func (t *MemTransport) Send(group uint64, to Peer, m *pb.Message) {
	if f := t.filter.Load(); f != nil && !(*f)(group, to, m) {
		if m.GetType() == pb.MsgSnap {
			if h := t.handler(group); h != nil {
				h.ReportSnapshot(to.ID, raft.SnapshotFailure)
			}
		}
		return
	}
	m = proto.Clone(m).(*pb.Message)
	if m.GetType() == pb.MsgSnap {
		t.sendSnapshot(group, to, m)
		return
	}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return
	}
	p := t.peers[to.Addr]
	if p == nil {
		p = &memPeer{addr: to.Addr, q: make(chan outMsg, peerQueueLen)}
		t.peers[to.Addr] = p
		t.wg.Add(1)
		go t.deliver(p)
	}
	t.mu.Unlock()
	select {
	case p.q <- outMsg{group: group, m: m}:
	default:
		if h := t.handler(group); h != nil {
			h.ReportUnreachable(to.ID)
		}
	}
}

// deliver hands queued messages to the destination, in order, in batches.
func (t *MemTransport) deliver(p *memPeer) {
	defer t.wg.Done()
	for {
		var om outMsg
		select {
		case om = <-p.q:
		case <-t.ctx.Done():
			return
		}
		msgs := []*pb.Message{om.m}
		group := om.group
	batch:
		for len(msgs) < maxBatchMsgs {
			select {
			case next := <-p.q:
				if next.group != group {
					t.hand(p.addr, group, msgs)
					msgs, group = nil, next.group
				}
				msgs = append(msgs, next.m)
			default:
				break batch
			}
		}
		t.hand(p.addr, group, msgs)
	}
}

func (t *MemTransport) hand(addr string, group uint64, msgs []*pb.Message) {
	dst := t.net.lookup(addr)
	var h Handler
	if dst != nil {
		h = dst.handler(group)
	}
	if h == nil {
		if src := t.handler(group); src != nil {
			for _, m := range msgs {
				src.ReportUnreachable(m.GetTo())
			}
		}
		return
	}
	h.Deliver(t.addr, msgs)
}

func (t *MemTransport) sendSnapshot(group uint64, to Peer, m *pb.Message) {
	t.mu.Lock()
	g := t.groups[group]
	if g == nil || t.closed {
		t.mu.Unlock()
		return
	}
	g.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer g.wg.Done()
		status := raft.SnapshotFailure
		defer func() { g.h.ReportSnapshot(to.ID, status) }()
		dst := t.net.lookup(to.Addr)
		if dst == nil {
			return
		}
		h := dst.handler(group)
		if h == nil {
			return
		}
		data, err := g.h.OpenSnapshot()
		if err != nil {
			return
		}
		defer data.Close()
		if err := h.ReceiveSnapshot(m, data); err == nil {
			status = raft.SnapshotFinish
		}
	}()
}

// Close stops the transport's goroutines; the address stops answering.
func (t *MemTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	groups := make([]*memGroup, 0, len(t.groups))
	for _, g := range t.groups {
		groups = append(groups, g)
	}
	t.mu.Unlock()
	t.cancel()
	for _, g := range groups {
		g.wg.Wait()
	}
	t.wg.Wait()
	t.net.mu.Lock()
	if t.net.nodes[t.addr] == t {
		delete(t.net.nodes, t.addr)
	}
	t.net.mu.Unlock()
	return nil
}
