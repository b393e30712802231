package raftgroup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	pb "go.etcd.io/raft/v3/raftpb"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	"nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/grpcx"
	"nacre/internal/pki"
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

	creds  *pki.Creds             // nil: no TLS
	self   atomic.Pointer[string] // this process's listen address, sent with every batch
	fast   atomic.Bool            // send over the fast path (fast.go)
	fastIn map[net.Conn]struct{}  // accepted fast connections
}

type groupEntry struct {
	h      Handler
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // snapshot sends
}

// TransportOption tunes NewGRPCTransport.
type TransportOption func(*GRPCTransport)

// WithTLS makes the transport reach its peers over TLS with c, on gRPC
// and on the fast path, and accept on the fast path only peers holding a
// node certificate of c's CA (srv checks its own connections:
// grpcx.WithServerTLS). A nil c: no TLS.
func WithTLS(c *pki.Creds) TransportOption { return func(t *GRPCTransport) { t.creds = c } }

// NewGRPCTransport registers the Raft service on srv (a server from
// grpcx.NewServer, which other services share) and returns the transport.
// Call it before srv.Serve. Peers are dialled with grpcx.Dial on first use.
func NewGRPCTransport(srv *grpc.Server, log *slog.Logger, opts ...TransportOption) *GRPCTransport {
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
		fastIn: map[net.Conn]struct{}{},
	}
	for _, o := range opts {
		o(t)
	}
	nacregrpc.RegisterRaftServer(srv, raftService{t: t})
	nacregrpc.RegisterRaftAdminServer(srv, adminService{t: t})
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

// FaultIsolate is the fault point (internal/fault) that cuts this
// process's replicas off from every other replica while it is armed with
// the error action: nothing is sent and everything received is dropped,
// as a network partition would. Clients can still reach the process.
const FaultIsolate = "raft.isolate"

// FaultLogSync, armed with the error action, fails the replica's next
// synced write of its Raft log as a disk returning EIO would: the group
// stops with the error, and the target's process exits with it.
const FaultLogSync = "raft.log.sync"

// FaultPowerCut, armed with the error action, emulates a power cut at the
// replica's next write or sync of its Raft log: what the log holds
// unsynced is zeroed, and the process kills itself (SIGKILL). The other
// stores' unsynced writes stay in the page cache, as after a power cut
// that kept them; a test that needs them lost uses a strict in-memory
// file system instead.
const FaultPowerCut = "raft.log.powercut"

// Send implements Transport.
func (t *GRPCTransport) Send(group uint64, to Peer, m *pb.Message) {
	if !t.allowed(group, to, m) || fault.Hit(FaultIsolate) != nil {
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
	if pc.direct(group, m) {
		return
	}
	pc.busy.Add(1)
	select {
	case pc.q <- outMsg{group: group, m: m}:
	default:
		pc.busy.Add(-1)
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
	cc, err := grpcx.Dial(addr, grpcx.WithTLS(t.creds))
	if err != nil {
		return nil, err
	}
	pc := &peerConn{t: t, addr: addr, cc: cc, client: nacregrpc.NewRaftClient(cc), q: make(chan outMsg, peerQueueLen)}
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
	for c := range t.fastIn {
		c.Close()
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
	client    nacregrpc.RaftClient
	q         chan outMsg
	overflows atomic.Uint64

	// The fast path (fast.go): the connection, and how many messages are
	// queued or being sent. While none is, Send writes a message itself
	// (direct) instead of waking the sender goroutine: one goroutine
	// hand-off less on each side of a commit's round trip.
	wmu  sync.Mutex // guards fc and every write on it
	fc   *fastConn
	busy atomic.Int64
}

// directWrite bounds a write done by the group's loop itself: a peer
// that does not read would otherwise stall the loop.
const directWrite = 20 * time.Millisecond

// direct sends ms at once, in one frame, on the caller's goroutine if the
// fast connection is open and idle; false means queue them.
func (pc *peerConn) direct(group uint64, ms ...*pb.Message) bool {
	if !pc.t.fast.Load() || pc.busy.Load() != 0 || !pc.wmu.TryLock() {
		return false
	}
	defer pc.wmu.Unlock()
	if pc.fc != nil && pc.fc.dead.Load() {
		pc.fc.close()
		pc.fc = nil // the sender goroutine dials again
	}
	if pc.fc == nil || pc.busy.Load() != 0 {
		return false
	}
	batch := &nacrepb.RaftBatch{Messages: make([]*nacrepb.RaftMessage, 0, len(ms)), From: pc.t.selfAddr()}
	for _, m := range ms {
		b, err := proto.Marshal(m)
		if err != nil {
			return false
		}
		batch.Messages = append(batch.Messages, &nacrepb.RaftMessage{Group: group, Message: b})
	}
	if err := pc.fc.send(batch, directWrite); err != nil {
		// A partial frame may be out: the connection is done for.
		pc.fc.close()
		pc.fc = nil
		pc.t.reportUnreachable(group, ms[0].GetTo())
	}
	return true
}

// SendBatch sends several messages to one replica, in order: on the fast
// path in one frame written by the caller when the connection is idle.
func (t *GRPCTransport) SendBatch(group uint64, to Peer, ms []*pb.Message) {
	plain := true
	for _, m := range ms {
		if m.GetType() == pb.MsgSnap || !t.allowed(group, to, m) {
			plain = false
		}
	}
	if plain && len(ms) > 0 && fault.Hit(FaultIsolate) == nil {
		if pc, err := t.peer(to.Addr); err == nil && pc.direct(group, ms...) {
			return
		}
	}
	for _, m := range ms {
		t.Send(group, to, m)
	}
}

func (pc *peerConn) run() {
	defer pc.t.wg.Done()
	var stream grpc.ClientStreamingClient[nacrepb.RaftBatch, nacrepb.RaftAck]
	var noFastUntil time.Time
	defer func() {
		if stream != nil {
			stream.CloseSend()
		}
		pc.wmu.Lock()
		if pc.fc != nil {
			pc.fc.close()
			pc.fc = nil
		}
		pc.wmu.Unlock()
	}()
	items := make([]outMsg, 0, maxBatchMsgs)
	for {
		select {
		case om := <-pc.q:
			items = append(items[:0], om)
		case <-pc.t.ctx.Done():
			return
		}
		batch := &nacrepb.RaftBatch{From: pc.t.selfAddr()}
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
		if pc.t.fast.Load() && time.Now().After(noFastUntil) {
			// The fast path (fast.go).
			pc.wmu.Lock()
			if pc.fc != nil && pc.fc.dead.Load() {
				pc.fc.close()
				pc.fc = nil
			}
			if pc.fc == nil {
				pc.fc, err = dialFast(pc.addr, pc.t.creds)
				if errors.Is(err, errNoFastPath) {
					pc.t.log.Info("peer does not speak the raft fast path; using the gRPC stream", "addr", pc.addr)
					noFastUntil = time.Now().Add(time.Minute)
				}
			}
			if pc.fc != nil {
				if err = pc.fc.send(batch, 5*time.Second); err != nil {
					pc.fc.close()
					pc.fc = nil
				}
			}
			pc.wmu.Unlock()
		} else {
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
		}
		pc.busy.Add(-int64(len(items)))
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
			pc.busy.Add(-1)
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
	nacregrpc.UnimplementedRaftServer
	t *GRPCTransport
}

func (s raftService) Send(stream grpc.ClientStreamingServer[nacrepb.RaftBatch, nacrepb.RaftAck]) error {
	// Receive on a goroutine of its own so that closing the transport ends
	// the stream (and a graceful stop of the gRPC server need not wait for
	// the other replicas to hang up).
	errc := make(chan error, 1)
	go func() { errc <- s.receive(stream) }()
	select {
	case err := <-errc:
		return err
	case <-s.t.ctx.Done():
		return errno.New(errno.Unavailable, "raft transport closed")
	}
}

func (s raftService) receive(stream grpc.ClientStreamingServer[nacrepb.RaftBatch, nacrepb.RaftAck]) error {
	for {
		b, err := stream.Recv()
		if err == io.EOF {
			return stream.SendAndClose(&nacrepb.RaftAck{})
		}
		if err != nil {
			return err
		}
		if fault.Hit(FaultIsolate) != nil {
			continue
		}
		s.t.deliver(b)
	}
}

// setSelf records the address the group's peers reach this process at
// (Start calls it with the replica's own entry of the address book).
func (t *GRPCTransport) setSelf(addr string) { t.self.Store(&addr) }

func (t *GRPCTransport) selfAddr() string {
	if p := t.self.Load(); p != nil {
		return *p
	}
	return ""
}

// deliver hands a received batch to its groups, a run of messages of one
// group at a time (usually the whole batch, as a process rarely hosts
// several groups yet).
func (t *GRPCTransport) deliver(b *nacrepb.RaftBatch) {
	var msgs []*pb.Message
	var cur uint64
	flush := func() {
		if len(msgs) == 0 {
			return
		}
		if h := t.handler(cur); h != nil {
			h.Deliver(b.From, msgs)
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
			t.log.Warn("undecodable raft message dropped", "group", rm.Group, "err", err)
			continue
		}
		msgs = append(msgs, m)
	}
	flush()
}

func (s raftService) Snapshot(stream grpc.ClientStreamingServer[nacrepb.RaftSnapshotChunk, nacrepb.RaftAck]) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	if fault.Hit(FaultIsolate) != nil {
		return errno.New(errno.Unavailable, "isolated by fault point "+FaultIsolate)
	}
	m := new(pb.Message)
	if err := proto.Unmarshal(first.Message, m); err != nil || m.GetType() != pb.MsgSnap {
		return errno.Errorf(errno.InvalidArgument, "snapshot stream must start with a MsgSnap message (%v)", err)
	}
	h := s.t.handler(first.Group)
	if h == nil {
		return errno.Errorf(errno.NotFound, "raft group %d is not hosted here", first.Group)
	}
	r := &chunkReader{stream: stream, cur: first.Data}
	if err := h.ReceiveSnapshot(m, r); err != nil {
		return errno.Errorf(errno.Unavailable, "receive snapshot for group %d: %v", first.Group, err)
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
