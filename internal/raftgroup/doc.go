// Package raftgroup hosts one replica of one Raft group on etcd raft
// (go.etcd.io/raft/v3): the metadata target (MDT) runs its deterministic
// state machine on it, with one replica by default and three for high
// availability. A Group is started with Start and used with Propose (a
// command, answered with the state machine's result once it is applied
// on this replica), ReadIndex (a linearizable read barrier), Status and
// the membership calls. Several groups can live in one process: each has
// its own key prefix in the store, and one Transport serves them all
// (every message names its group).
//
// # Threading model
//
// One goroutine, the loop, owns the RawNode and the log storage, except
// for inline turns (below). Other goroutines never touch them: Propose, ReadIndex, the transport's
// receivers and its failure reports append to a mutex-protected inbox and
// wake the loop, which swaps the whole inbox out at once. Raft runs with
// AsyncStorageWrites, and the loop plays both of raft's storage
// "threads" itself, in this order:
//
//  1. Step everything the inbox holds. All queued proposals become one
//     MsgProp, hence one append and one fsync.
//  2. Take a Ready. Messages to other replicas go to the transport at once:
//     the leader's appends leave before its own fsync, so leader and
//     followers write in parallel. Append and apply work is queued. An
//     empty append that only spreads a new commit index is held until
//     the next message to that follower (the next append, or the
//     heartbeat of the next tick), which it rides along with or which
//     supersedes it (holdCommitOnly).
//  3. If there is apply work, apply it with one StateMachine.Apply call,
//     answer the waiting callers, yield the processor so that they can
//     queue their next proposals, and go back to 1. Committed entries are
//     durable already, so applying them need not wait for the fsync of
//     newer entries; answering first is what lets the callers' next
//     proposals join the next fsync instead of the one after.
//  4. Otherwise write all queued append work (entries, hard state,
//     snapshot) in one batch, synced when raft attached responses to it
//     (acknowledgements and votes, which promise durability) and it holds
//     entries, a snapshot or a new term or vote not yet synced (a write
//     that only moves the commit index needs no fsync: the commit index
//     is recovered), then deliver those responses.
//
// A follower persists before it applies: its acknowledgement is what the
// leader's commit waits for, and no caller waits for its applies.
//
// Ticks, Status requests and Stop are served between steps. Apply
// results reach callers over buffered channels, and OnLeaderChange runs
// on a goroutine of its own, so no caller can stall the loop. The gRPC
// transport (grpc.go) has one ordered, bounded queue and sender goroutine
// per remote process; Send never blocks, and a message it cannot queue or
// deliver is reported to raft as unreachable. MemNetwork is its in-memory
// twin (the same queues, no sockets); the cluster tests run over both.
//
// Stats counts Ready structs, synced batches and the entries they made
// durable: Stats.EntriesPerSync is the batching achieved.
//
// # What is stored where
//
// The log lives in its own directory, Config.LogDir (internal/raftlog: a
// run of segment files written at their full size before use, so that a
// synced append is an fdatasync of blocks the file system already has,
// cheaper than a sync of pebble's WAL, whose files grow). Its records:
//
//	'E'  one entry, raftpb.Entry encoding
//	'H'  HardState (term, vote, commit), raftpb encoding; the last wins
//	'T'  truncation point: SnapshotMetadata (index, term, and the
//	     configuration as of index); the log holds the entries after
//	     index, and entries at or below it are gone
//	'R'  reset by a snapshot install: SnapshotMetadata; every entry is
//	     gone and the log restarts after index
//
// Every segment starts with the current 'T' and 'H' (its prologue), so
// the segments that hold only entries below the truncation point can be
// dropped without losing either; a replay may find entries missing below
// the final truncation point, never above it. An entry appended again at
// an index the log holds (a new leader overwriting an uncommitted tail)
// replaces it and everything after it.
//
// The kv.DB the group shares with the state machine keeps, under
// Config.Prefix (P below), only what is not on the hot path:
//
//	P 'v'             log format (uint64, big endian): 2 (format 1 kept the
//	                  log itself in the DB; such a store is moved over at
//	                  start, see migrateV1)
//	P 'p'             present only while a snapshot install is under way:
//	                  the SnapshotMetadata being installed
//	P 'a'             address book: replica id -> address (RaftPeers)
//	P 'x'             ids removed from the group, never to be added again
//	P 'i'             this replica's id (a store answers for one replica only)
//	                  (8-byte big-endian ids, sorted)
//
// A new group writes a log holding a truncation point at index 1, term 1,
// that holds the initial voters (etcd raft's recommended bootstrap, with
// no synthetic configuration entries), then P 'v'. Index 1 rather than 0
// means that no log anywhere starts at the beginning, so a replica added
// later always receives a snapshot, which carries the configuration,
// instead of replaying entries that never mention the initial voters. A
// replica started with Config.Join begins empty, at 0, and waits for it.
// The state machine's keys, including its applied index, are its own
// business and lie outside P. Every entry's data starts with a proposal
// header (proposal.go) that Apply never sees.
//
// Memory holds the term and log position of every retained entry (so
// raft's Term calls never read the disk) and the bodies of the newest
// entries up to Config.CacheBytes (so appends are read back, for
// replication and apply, without a disk read); older bodies are read from
// the log.
//
// The log is compacted after apply: once more than Config.KeepEntries
// entries lie behind the applied index, the store is synced (the applies
// are not synced one by one), a 'T' record moves the truncation point up
// a quarter of KeepEntries at a time with the configuration as of it, and
// once that record is synced the segments before the one holding the
// first retained entry are recycled. A follower that needs a dropped
// entry gets a snapshot.
//
// # Crash safety
//
//   - Entries and the hard state are synced before any message or local
//     step that relies on them: raft attaches acknowledgements, votes and
//     the leader's self-acknowledgement (which advances the commit index)
//     to the append work, and they are delivered only after the log write
//     is synced. A record of a new commit index alone is not synced, nor
//     even written, until the next write: the commit index is recovered.
//   - The state machine applies only committed entries that are durable
//     in the local log, writing its state and applied index atomically,
//     without sync. If a crash loses an apply, the entry is still in the
//     log and is applied again: at start raft is told that only the
//     truncation point is applied, re-delivers everything after it, and
//     the loop skips what the state machine's applied index already
//     covers. Propose answers only after apply, which is after commit, so
//     nothing acknowledged can be lost while the disk survives.
//   - The commit index may reach the log after the applies it allowed
//     (step 3 runs before step 4), or not at all. At start, Group.recover
//     raises it to the applied index: whatever was applied was committed
//     (but not past the last entry: after a snapshot whose image is newer
//     than its index, a follower's state machine may be ahead of its log).
//   - Compaction drops only applied entries, and only after the store is
//     synced, so the state machine is never behind the truncation point
//     after a crash; the 'T' record is synced before any segment goes, so
//     a replay never finds entries missing above its truncation point.
//   - A snapshot install writes the P 'p' marker, then the state machine
//     restores the image (Restore is atomic) and the store is synced, then
//     an 'R' record resets the log (synced), then the marker is deleted
//     (synced, so that a restart never resets the log again over entries
//     appended after the install). At start a marker means the install was
//     interrupted: if the log's truncation point reached the snapshot the
//     reset was done; otherwise, if the state machine's applied index
//     reached it, the reset is redone, and if not, the marker is dropped
//     and the old log, never touched, is used.
//   - The configuration is not stored apart from the log. The truncation
//     point carries it as of its index, and raft rebuilds later changes
//     from the entries it re-delivers at start; raft refuses to campaign
//     while committed configuration changes are unapplied, so a restarted
//     replica never acts on a stale configuration.
//   - A torn tail of the newest segment ends the log where the first
//     record fails its checksum, and that segment is sealed there before
//     anything new is written (internal/raftlog), so bytes that were
//     written but never synced cannot come back later as entries.
//
// # Lazy commit
//
// With Config.CommitWindow set, a group whose only member is this
// replica answers ProposeLazy calls before an fsync covers their
// entries: persistStage writes a batch that holds only such entries
// without syncing it and delivers raft's acknowledgements at once, so the
// entries commit, apply and are answered; a timer syncs the log within
// the window. Any other batch (a plain Propose, a new term or vote, a
// snapshot, a follower's append) is synced as before, and its sync covers
// the lazy writes before it; Sync syncs on demand. SyncedIndex says how
// far the log is durable, StartIndex where it ended at start. A process
// crash loses nothing (the written pages survive it); a power cut can
// lose the unsynced tail, and then the store may hold applies the log
// lost: recover restarts the log after the applied index instead of
// refusing to start, and the state machine's owner gets the lost entries
// back from elsewhere (the MDS: from its clients). A replicated group
// never answers before its quorum synced: the window applies only to a
// single replica.
//
// A lazy proposer on such a replica does the loop's work itself when
// the loop is idle (inline.go): it takes the loop's turn (a mutex every
// step of the loop holds too), steps its proposal and whatever else is
// queued, writes, applies and answers, and gives the turn back. That
// saves the two goroutine wake-ups of a hand-off to the loop and back, a
// third of a metadata server's CPU per create with one client
// (docs/benchmarks.md). Ticks, the window's sync, Status and anything a
// replicated group does stay on the loop goroutine; a turn that fails
// stops the group as a failed loop step does.
//
// # Proposals, reads and leadership
//
// Only the leader takes proposals (raft's forwarding is off): a follower
// answers NotLeaderError with the leader's id and address, and clients
// follow the redirect. Each proposal carries (replica id, sequence) in a
// header, and its result goes to the waiter whose id, sequence and term
// match the applied entry (proposal.go). When this replica loses
// leadership, pending proposals fail at once with ErrProposalDropped:
// their entries may still commit under the next leader, which the MDT's
// reply cache makes harmless for a retry. ReadIndex uses raft's ReadIndex
// (ReadOnlySafe: one heartbeat round to a quorum), batched per loop
// iteration, on the leader or on followers (Read adds the leader's lease,
// below); on a new leader it also waits
// for the first entry of the leader's term, because raft answers a single
// voter at once with a commit index that may not yet cover entries
// acknowledged before a restart. PreVote and CheckQuorum are
// on: a cut-off leader steps down after an election timeout and fails its
// pending proposals. A single-voter group campaigns at once, and Start
// returns when it leads and has applied everything committed before.
//
// # Snapshots and membership
//
// Raft's snapshot is metadata only (snapshot.go); the state machine image
// is streamed by the transport when it sends the MsgSnap, spooled by the
// receiver, and restored by the loop. AddVoter, AddLearner and RemovePeer
// propose single-step ConfChangeV2 changes and return once the change is
// applied on the leader; the new replica's address travels in the change.
//
// # Leases, leadership transfer, fast path, administration
//
// Read is ReadIndex made cheap on the leader: while it holds a lease -
// renewed by a ReadIndex round every other tick, and valid for
// ElectionTicks-2 ticks from when that round began - it serves reads at
// its commit index with no network round. lease.go gives the argument
// (CheckQuorum's in-lease rule; a restarted replica holds its vote for an
// election timeout; a transfer ends the lease first). TransferLeadership
// hands over to the most up-to-date voter (used before a clean stop and
// by `nacre replica transfer`); AddReplica adds a replica as a learner and
// promotes it once it has caught up. Raft messages travel over plain TCP
// on the gRPC port when the process serves its listener through
// GRPCTransport.Listener (fast.go: a commit round trip costs less than
// over a gRPC stream), snapshots over gRPC streams. The RaftAdmin service (admin.go) exposes members,
// add/remove/transfer to `nacre replica`; GroupErr turns a group's refusal
// into the typed redirect clients follow (errno.NotLeader). The fault point raft.isolate
// (FaultIsolate) cuts a process's replicas off from the others, for
// partition tests.
//
// # Not done yet
//
//   - Images for multi-gigabyte state: RestoreKV builds one batch in
//     memory; a pebble checkpoint or SSTable ingestion would scale.
//   - Many groups per process share nothing but the transport: each has
//     its own loop goroutine and ticker; hundreds of groups would want a
//     shared scheduler and quiescence of idle groups.
//   - Automatic removal of dead replicas, and learners promoted other than
//     by AddReplica.
package raftgroup
