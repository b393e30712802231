package raftgroup

import (
	"encoding/binary"
	"errors"
	"sync"
	"time"

	pb "go.etcd.io/raft/v3/raftpb"
)

// Proposal identity.
//
// Every entry this package proposes starts with a header naming the
// replica that proposed it and a per-replica sequence number:
//
//	0x01 | uvarint(replica id) | uvarint(sequence) | payload
//
// (for a membership change the header is the ConfChangeV2's Context,
// followed by a RaftPeer). The proposer keeps a waiter per sequence number
// and the loop hands the entry's Apply result to the waiter whose replica
// id, sequence number and term all match, so a caller gets its own entry's
// result even when the same bytes are proposed twice. The term check makes
// the sequence number safe across restarts: only the leader proposes, a
// replica that restarts can lead again only in a higher term, and every
// entry it proposes carries the term it was proposed in, so an entry left
// over from an earlier life never matches a new waiter.
const proposalTag = 0x01

var errBadHeader = errors.New("raftgroup: log entry without a valid proposal header")

func encodeProposal(id, seq uint64, payload []byte) []byte {
	b := make([]byte, 0, 1+2*binary.MaxVarintLen64+len(payload))
	b = appendHeader(b, id, seq)
	return append(b, payload...)
}

func appendHeader(b []byte, id, seq uint64) []byte {
	b = append(b, proposalTag)
	b = binary.AppendUvarint(b, id)
	return binary.AppendUvarint(b, seq)
}

// decodeProposal splits an entry's data into header and payload. The
// payload of a non-empty entry is never nil, so the state machine can
// tell an empty command from raft's own entries.
func decodeProposal(d []byte) (id, seq uint64, payload []byte, err error) {
	if len(d) == 0 || d[0] != proposalTag {
		return 0, 0, nil, errBadHeader
	}
	d = d[1:]
	id, n := binary.Uvarint(d)
	if n <= 0 {
		return 0, 0, nil, errBadHeader
	}
	d = d[n:]
	seq, n = binary.Uvarint(d)
	if n <= 0 {
		return 0, 0, nil, errBadHeader
	}
	return id, seq, d[n:len(d):len(d)], nil
}

// proposal is a command (or membership change) waiting for its entry.
type proposal struct {
	seq  uint64
	data []byte           // header + payload, for a command
	cc   *pb.ConfChangeV2 // a membership change instead (Context holds the header)
	term uint64           // set by the loop: the term the entry is proposed in
	lazy bool             // ProposeLazy: may be answered before its entry is synced
	done chan result      // buffered: the loop never blocks on it
}

type result struct {
	v   any
	err error
}

func (p *proposal) finish(v any, err error) { p.done <- result{v, err} }

// readReq is one ReadIndex call; the loop batches every request that is
// queued at once into a single raft read (one heartbeat round).
type readReq struct{ done chan readResult }

type readResult struct {
	index uint64
	retry bool // the request was lost with a leader change: ask again
}

type readBatch struct {
	reqs []*readReq
	tick uint64 // when it was issued, to expire requests raft dropped
	// sent and epoch are when the read was handed to raft (lease.go) and
	// the leadership-transfer epoch then: a leader's completed read
	// proves a quorum heard from it after sent.
	sent  time.Duration
	epoch uint64
	renew bool // a lease renewal, no callers
}

// inbox is how other goroutines hand work to the loop: callers append
// under the mutex and signal Group.wake; the loop swaps the whole inbox
// out at once, so a burst of proposals becomes one raft Step and one
// Ready.
type inbox struct {
	mu     sync.Mutex
	it     inboxItems
	spools map[uint64]*spool // received snapshot images, by index
	closed bool              // the loop has exited: keep no more images
}

type inboxItems struct {
	props   []*proposal
	msgs    []*pb.Message
	reads   []*readReq
	reports []report
	calls   []func() // run on the loop (leadership transfer)
}

type report struct {
	id          uint64
	unreachable bool // else a snapshot status
	snapFailed  bool
}

// maxInboxMsgs bounds the raft messages queued for the loop; beyond it
// messages are dropped, which raft recovers from by retransmitting.
const maxInboxMsgs = 16384

func (in *inbox) push(f func(*inboxItems)) {
	in.mu.Lock()
	f(&in.it)
	in.mu.Unlock()
}

// empty reports whether nothing is queued.
func (in *inbox) empty() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.it.empty()
}

// take swaps the inbox with spare (emptied) and returns what was queued.
func (in *inbox) take(spare inboxItems) inboxItems {
	spare.props = spare.props[:0]
	spare.msgs = spare.msgs[:0]
	spare.reads = spare.reads[:0]
	spare.reports = spare.reports[:0]
	spare.calls = spare.calls[:0]
	in.mu.Lock()
	it := in.it
	in.it = spare
	in.mu.Unlock()
	return it
}

func (it *inboxItems) empty() bool {
	return len(it.props) == 0 && len(it.msgs) == 0 && len(it.reads) == 0 && len(it.reports) == 0 && len(it.calls) == 0
}

// clear drops references so the spare buffers do not pin messages.
func (it *inboxItems) clear() {
	clear(it.props)
	clear(it.msgs)
	clear(it.reads)
	clear(it.calls)
}
