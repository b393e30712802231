package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacrepb"
	"nacre/internal/rpc"
)

// Tuning of the gRPC transport.
const (
	peerQueueLen   = 4096    // messages queued per remote process
	maxBatchMsgs   = 512     // messages per RaftBatch
	maxBatchBytes  = 4 << 20 // encoded bytes per RaftBatch
	snapChunkBytes = 1 << 20
	retryPause     = 50 * time.Millisecond // after a broken stream
)

// Filter decides whether a message leaves (true) or is dropped (false);
// fault injection and tests use it to cut replicas apart.
type Filter func(group uint64, to Peer, m *pb.Message) bool

// GRPCTransport is the Transport of a process over the Raft gRPC service
// (api/raft.proto). It keeps one connection, one ordered queue and one
// sender goroutine per remote address, shared by all groups: the sender
// drains its queue into a RaftBatch and writes it to a long-lived client
// stream, so messages are batched whenever they arrive faster than one
// stream write. Snapshots go over a separate stream each, so a large image
// never delays heartbeats.
type GRPCTransport struct {
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	filter atomic.Pointer[Filter]

	mu     sync.Mutex
	groups map[uint64]*groupEntry
	peers  map[string]*peerConn
	closed bool
	wg     sync.WaitGroup // sender goroutines
}

type groupEntry struct {
	h      Handler
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // snapshot sends
}

// NewGRPCTransport registers the Raft service on srv (a server from
// rpc.NewServer, which other services share) and returns the transport.
// Call it before srv.Serve. Peers are dialled with rpc.Dial on first use.
func NewGRPCTransport(srv *grpc.Server, log *slog.Logger) *GRPCTransport {
	if log == nil {
		log = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &GRPCTransport{
		log:    log.With("component", "raft-transport"),
		ctx:    ctx,
		cancel: cancel,
		groups: map[uint64]*groupEntry{},
		peers:  map[string]*peerConn{},
	}
	nacrepb.RegisterRaftServer(srv, raftService{t: t})
	return t
}

// SetFilter installs f (nil removes it).
func (t *GRPCTransport) SetFilter(f Filter) {
	if f == nil {
		t.filter.Store(nil)
		return
	}
	t.filter.Store(&f)
}

func (t *GRPCTransport) allowed(group uint64, to Peer, m *pb.Message) bool {
	f := t.filter.Load()
	return f == nil || (*f)(group, to, m)
}

// Register implements Transport.
func (t *GRPCTransport) Register(group uint64, h Handler) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return errors.New("raft transport closed")
	}
	if t.groups[group] != nil {
		return fmt.Errorf("raft group %d is already registered with this transport", group)
	}
	ctx, cancel := context.WithCancel(t.ctx)
	t.groups[group] = &groupEntry{h: h, ctx: ctx, cancel: cancel}
	return nil
}

// Unregister implements Transport.
func (t *GRPCTransport) Unregister(group uint64) {
	t.mu.Lock()
	ge := t.groups[group]
	delete(t.groups, group)
	t.mu.Unlock()
	if ge != nil {
		ge.cancel()
		ge.wg.Wait()
	}
}

func (t *GRPCTransport) handler(group uint64) Handler {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ge := t.groups[group]; ge != nil {
		return ge.h
	}
	return nil
}

func (t *GRPCTransport) reportUnreachable(group, id uint64) {
	if h := t.handler(group); h != nil {
		h.ReportUnreachable(id)
	}
}

// Send implements Transport.
func (t *GRPCTransport) Send(group uint64, to Peer, m *pb.Message) {
	if !t.allowed(group, to, m) {
		if m.GetType() == pb.MsgSnap {
			t.reportSnapshot(group, to.ID, raft.SnapshotFailure)
		}
		return
	}
	if m.GetType() == pb.MsgSnap {
		t.sendSnapshot(group, to, m)
		return
	}
	pc, err := t.peer(to.Addr)
	if err != nil {
		t.reportUnreachable(group, to.ID)
		return
	}
	select {
	case pc.q <- outMsg{group: group, m: m}:
	default:
		if pc.overflows.Add(1)%1000 == 1 {
			t.log.Warn("raft send queue full; dropping messages", "peer", to.ID, "addr", to.Addr)
		}
		t.reportUnreachable(group, to.ID)
	}
}

func (t *GRPCTransport) reportSnapshot(group, id uint64, st raft.SnapshotStatus) {
	if h := t.handler(group); h != nil {
		h.ReportSnapshot(id, st)
	}
}

// peer returns the connection to addr, dialling it on first use.
func (t *GRPCTransport) peer(addr string) (*peerConn, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("raft transport closed")
	}
	if pc := t.peers[addr]; pc != nil {
		return pc, nil
	}
	cc, err := rpc.Dial(addr)
	if err != nil {
		return nil, err
	}
	pc := &peerConn{t: t, addr: addr, cc: cc, client: nacrepb.NewRaftClient(cc), q: make(chan outMsg, peerQueueLen)}
	t.peers[addr] = pc
	t.wg.Add(1)
	go pc.run()
	return pc, nil
}

// Close stops every sender, cancels snapshot transfers and closes the
// connections. Stop the groups first; the gRPC server is the caller's.
func (t *GRPCTransport) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	groups := make([]*groupEntry, 0, len(t.groups))
	for _, ge := range t.groups {
		groups = append(groups, ge)
	}
	t.mu.Unlock()
	t.cancel()
	for _, ge := range groups {
		ge.wg.Wait()
	}
	t.wg.Wait()
	var first error
	for _, pc := range t.peers {
		if err := pc.cc.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

type outMsg struct {
	group uint64
	m     *pb.Message
}

// peerConn is the ordered path to one remote process.
type peerConn struct {
	t         *GRPCTransport
	addr      string
	cc        *grpc.ClientConn
	client    nacrepb.RaftClient
	q         chan outMsg
	overflows atomic.Uint64
}

func (pc *peerConn) run() {
	defer pc.t.wg.Done()
	var stream grpc.ClientStreamingClient[nacrepb.RaftBatch, nacrepb.RaftAck]
	defer func() {
		if stream != nil {
			stream.CloseSend()
		}
	}()
	items := make([]outMsg, 0, maxBatchMsgs)
	for {
		select {
		case om := <-pc.q:
			items = append(items[:0], om)
		case <-pc.t.ctx.Done():
			return
		}
		batch := &nacrepb.RaftBatch{}
		size := 0
		for {
			om := items[len(items)-1]
			b, err := proto.Marshal(om.m)
			if err != nil {
				pc.t.log.Error("cannot encode raft message", "type", om.m.GetType(), "err", err)
			} else {
				batch.Messages = append(batch.Messages, &nacrepb.RaftMessage{Group: om.group, Message: b})
				size += len(b)
			}
			if len(items) == maxBatchMsgs || size >= maxBatchBytes {
				break
			}
			select {
			case om := <-pc.q:
				items = append(items, om)
				continue
			default:
			}
			break
		}
		var err error
		if stream == nil {
			stream, err = pc.client.Send(pc.t.ctx)
		}
		if err == nil {
			err = stream.Send(batch)
			if err != nil {
				// The stream is broken; CloseAndRecv has the reason.
				if _, rerr := stream.CloseAndRecv(); rerr != nil {
					err = rerr
				}
				stream = nil
			}
		}
		if err != nil {
			if pc.t.ctx.Err() != nil {
				return
			}
			pc.t.log.Debug("raft messages to peer lost", "addr", pc.addr, "count", len(items), "err", err)
			pc.fail(items)
			select {
			case <-time.After(retryPause):
			case <-pc.t.ctx.Done():
				return
			}
		}
	}
}

// fail reports every (group, replica) of lost messages as unreachable,
// together with everything queued behind them, which is stale by now.
func (pc *peerConn) fail(items []outMsg) {
	type gid struct{ group, id uint64 }
	seen := map[gid]bool{}
	report := func(om outMsg) {
		k := gid{om.group, om.m.GetTo()}
		if !seen[k] {
			seen[k] = true
			pc.t.reportUnreachable(om.group, om.m.GetTo())
		}
	}
	for _, om := range items {
		report(om)
	}
	for {
		select {
		case om := <-pc.q:
			report(om)
		default:
			return
		}
	}
}

// sendSnapshot streams the state machine image with m on its own stream.
func (t *GRPCTransport) sendSnapshot(group uint64, to Peer, m *pb.Message) {
	t.mu.Lock()
	ge := t.groups[group]
	if ge == nil || t.closed {
		t.mu.Unlock()
		return
	}
	ge.wg.Add(1)
	t.mu.Unlock()
	go func() {
		defer ge.wg.Done()
		start := time.Now()
		n, err := t.streamSnapshot(ge, group, to, m)
		if err != nil {
			t.log.Warn("snapshot transfer failed", "group", group, "to", to.ID, "addr", to.Addr, "err", err)
			ge.h.ReportSnapshot(to.ID, raft.SnapshotFailure)
			return
		}
		t.log.Info("snapshot transferred", "group", group, "to", to.ID, "bytes", n, "took", time.Since(start))
		ge.h.ReportSnapshot(to.ID, raft.SnapshotFinish)
	}()
}

func (t *GRPCTransport) streamSnapshot(ge *groupEntry, group uint64, to Peer, m *pb.Message) (int64, error) {
	data, err := ge.h.OpenSnapshot()
	if err != nil {
		return 0, fmt.Errorf("open state machine image: %w", err)
	}
	defer data.Close()
	pc, err := t.peer(to.Addr)
	if err != nil {
		return 0, err
	}
	mb, err := proto.Marshal(m)
	if err != nil {
		return 0, err
	}
	stream, err := pc.client.Snapshot(ge.ctx)
	if err != nil {
		return 0, err
	}
	buf := make([]byte, snapChunkBytes)
	var total int64
	first := true
	for {
		n, rerr := io.ReadFull(data, buf)
		if n > 0 || first {
			c := &nacrepb.RaftSnapshotChunk{Data: buf[:n]}
			if first {
				c.Group, c.Message, first = group, mb, false
			}
			if err := stream.Send(c); err != nil {
				_, rerr := stream.CloseAndRecv()
				return total, fmt.Errorf("send image: %w (%v)", err, rerr)
			}
			total += int64(n)
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			break
		}
		if rerr != nil {
			stream.CloseSend()
			return total, fmt.Errorf("read state machine image: %w", rerr)
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		return total, err
	}
	return total, nil
}

// raftService is the server side of the Raft gRPC service.
type raftService struct {
	nacrepb.UnimplementedRaftServer
	t *GRPCTransport
}

func (s raftService) Send(stream grpc.ClientStreamingServer[nacrepb.RaftBatch, nacrepb.RaftAck]) error {
	var msgs []*pb.Message
	for {
		b, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&nacrepb.RaftAck{})
		}
		if err != nil {
			return err
		}
		// Deliver runs of messages of one group at once (usually the whole
		// batch, as a process rarely hosts several groups yet).
		var cur uint64
		flush := func() {
			if len(msgs) == 0 {
				return
			}
			if h := s.t.handler(cur); h != nil {
				h.Deliver(msgs)
			}
			msgs = nil
		}
		for _, rm := range b.Messages {
			if rm.Group != cur {
				flush()
				cur = rm.Group
			}
			m := new(pb.Message)
			if err := proto.Unmarshal(rm.Message, m); err != nil {
				s.t.log.Warn("undecodable raft message dropped", "group", rm.Group, "err", err)
				continue
			}
			msgs = append(msgs, m)
		}
		flush()
	}
}

func (s raftService) Snapshot(stream grpc.ClientStreamingServer[nacrepb.RaftSnapshotChunk, nacrepb.RaftAck]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	m := new(pb.Message)
	if err := proto.Unmarshal(first.Message, m); err != nil || m.GetType() != pb.MsgSnap {
		return status.Errorf(codes.InvalidArgument, "snapshot stream must start with a MsgSnap message (%v)", err)
	}
	h := s.t.handler(first.Group)
	if h == nil {
		return status.Errorf(codes.NotFound, "raft group %d is not hosted here", first.Group)
	}
	r := &chunkReader{stream: stream, cur: first.Data}
	if err := h.ReceiveSnapshot(m, r); err != nil {
		return status.Errorf(codes.Unavailable, "receive snapshot for group %d: %v", first.Group, err)
	}
	return stream.SendAndClose(&nacrepb.RaftAck{})
}

// chunkReader reads the image bytes of a snapshot stream.
type chunkReader struct {
	stream grpc.ClientStreamingServer[nacrepb.RaftSnapshotChunk, nacrepb.RaftAck]
	cur    []byte
}

func (r *chunkReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		c, err := r.stream.Recv()
		if err != nil {
			return 0, err // io.EOF at the end of the image
		}
		r.cur = c.Data
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}
