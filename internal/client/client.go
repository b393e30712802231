// Package client is Nacre's client library: the FUSE mount, the CLI, the
// checker's tests and the benchmarks all use it.
//
// A Client learns the cluster from the MGS, sends namespace operations to
// the MDT that owns a FID (FID location database), and moves file data to
// and from the OSTs directly over the framed data protocol (internal/bulk),
// striped RAID-0 and in parallel.
//
// Every mutation carries (client id, request id). A call that fails in a
// way a retry can fix (server restarting, connection lost, leader change)
// is retried with the same request id until Config.Timeout, and the MDT's
// reply cache makes the retry exactly-once. Each request also tells the MDT
// the lowest request id still waiting for its reply, so the MDT can drop
// the cached replies the client no longer needs.
package client

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/mdrpc"
	"nacre/internal/nodemap"
	"nacre/internal/pki"
	"nacre/internal/version"
)

// Config configures a Client.
type Config struct {
	// MGS is the management server's host:port.
	MGS string
	// Fsname, if set, must match the cluster's.
	Fsname string
	// Timeout bounds the retries of one operation (default 60 s).
	Timeout time.Duration
	// Cred is the identity used when a context carries none (default: the
	// process's uid, gid and groups).
	Cred *pb.Cred
	Log  *slog.Logger
	// FollowerReads spreads metadata reads over every replica of an MDT
	// instead of sending them to the leader; they stay linearizable
	// (replicas.go). cmd/nacre turns it on for its clients with
	// NACRE_FOLLOWER_READS=1.
	FollowerReads bool
	// OSTDownAfter, if set, is how long object I/O keeps retrying an OST
	// that cannot be reached (connection refused, reset, timed out) before
	// it fails with an *OSTDownError naming the OST. The clock runs per
	// OST: once an OST has been unreachable that long, further I/O to it
	// fails after one attempt, until the OST answers again. 0: retry until
	// Timeout, like every other failure. The FUSE mount uses 30 s, which
	// waits out an OST restart.
	OSTDownAfter time.Duration
	// FailFast: a command-line client fails at once, with the reason, when
	// the MGS refuses the connection or its name does not resolve, instead
	// of waiting up to 10 s for it to come up (as a mount does).
	FailFast bool
	// OnWait, if set, is told of a call that waits for a server that does
	// not answer: once it has waited a second, then every 5 s. It runs on
	// the call's goroutine.
	OnWait func(Wait)
	// RefreshEvery, if set, reads the configuration that often in the
	// background, so that a long-lived client (a mount) follows MGS
	// replicas replaced while it is idle (grpcx.SwapConn.Follow). 0: only on demand.
	RefreshEvery time.Duration
	// TLS, if set, are the client's credentials (internal/pki): every
	// connection, to every server, is TLS with them. A cluster whose
	// servers have TLS refuses a client without.
	TLS *pki.Creds
}

// Client is a connection to one Nacre file system. It is safe for
// concurrent use.
type Client struct {
	cfg Config
	id  uint64
	log *slog.Logger

	mgsConn *grpcx.SwapConn
	mgs     nacregrpc.MGSClient

	nextReq atomic.Uint64
	inMu    sync.Mutex
	inFlt   map[uint64]struct{}

	// lastStatfs is the last answer of Statfs, given again while the MGS
	// does not answer (df on a mount must not fail while files work).
	lastStatfs atomic.Pointer[pb.Statfs]

	mu     sync.Mutex
	fsname string
	mdts   map[uint32]*mdtConn
	osts   map[uint32]*ostConn
	fld    []*pb.SeqRange
	cfgAt  time.Time
	closed bool
	// stopRefresh ends refreshLoop (Config.RefreshEvery).
	stopRefresh chan struct{}
	refreshM    sync.Mutex

	held holds // hold.go
	// idmap: this client's nodemap, as the MGS last said (nodemap.go).
	idmap atomic.Pointer[nodemap.Map]

	// The changes kept for the MDTs' durability contract (durability.go).
	keptMu     sync.Mutex
	keptLogs   map[uint32]*keptLog
	recoveries uint64
	stopKeep   chan struct{} // closed by Close: the watchKept goroutines end

	// Owner changes on their way to the OST objects (ownerToObjects).
	owners   sync.WaitGroup
	ownerSem chan struct{}
}

type mdtConn struct {
	index  uint32
	addr   string
	cli    mdrpc.MDSService
	closer io.Closer
}

type ostConn struct {
	index uint32
	addr  string
	wc    *bulk.Client
	up    bool
	// unreachableSince is when the current run of failed attempts to
	// reach the OST began (zero: it answered last); lastFailure is when
	// the latest one failed (file.go, retryIO).
	unreachableSince, lastFailure time.Time
}

// CheckMGSAddr checks the form of an MGS address list ("host:port", or
// the replicas' "h1:p1,h2:p2,h3:p3"), so that a typo fails at once
// instead of after the connection timeout.
func CheckMGSAddr(list string) error {
	for _, a := range strings.Split(list, ",") {
		if _, err := grpcx.CheckHostPort(strings.TrimSpace(a)); err != nil {
			return fmt.Errorf("MGS address %q is not HOST:PORT (like 127.0.0.1:41000; replicas: h1:p1,h2:p2,h3:p3): %v", a, err)
		}
	}
	return nil
}

// SameMGS reports whether two MGS addresses name the same server
// (127.0.0.1:7000 and localhost:7000 do). A replicated MGS is a list of
// HOST:PORT: two lists with an address in common name the same MGS, as
// after a replica was added or replaced the list a mount recorded and the
// one a command is given differ.
func SameMGS(a, b string) bool {
	if a == b {
		return true
	}
	if strings.Contains(a, ",") || strings.Contains(b, ",") {
		for _, x := range strings.Split(a, ",") {
			for _, y := range strings.Split(b, ",") {
				if x = strings.TrimSpace(x); x != "" && SameMGS(x, strings.TrimSpace(y)) {
					return true
				}
			}
		}
		return false
	}
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb {
		return false
	}
	ia, err1 := net.LookupHost(ha)
	ib, err2 := net.LookupHost(hb)
	if err1 != nil || err2 != nil {
		return false
	}
	for _, x := range ia {
		for _, y := range ib {
			if net.ParseIP(x).Equal(net.ParseIP(y)) {
				return true
			}
		}
	}
	return false
}

// NotAnMGS is the error for an address given as the MGS's whose server
// answered err, which says it is not one (rpc.NotTheService).
func NotAnMGS(addr string, err error) error {
	return fmt.Errorf("%s answers but is not an MGS (%v): give the MGS address that `nacre up` printed (NACRE_MGS=...) or that `nacre status --dir CLUSTER_DIR` shows", addr, err)
}

// New connects to the cluster whose MGS is cfg.MGS.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.MGS == "" {
		return nil, errors.New("no MGS address: pass --mgs HOST:PORT or set NACRE_MGS")
	}
	if err := CheckMGSAddr(cfg.MGS); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Cred == nil {
		cfg.Cred = ProcessCred()
	}
	var idb [8]byte
	rand.Read(idb[:])
	c := &Client{cfg: cfg, id: binary.LittleEndian.Uint64(idb[:]) | 1, log: cfg.Log,
		inFlt: map[uint64]struct{}{}, mdts: map[uint32]*mdtConn{}, osts: map[uint32]*ostConn{},
		ownerSem: make(chan struct{}, ownerPushes), stopKeep: make(chan struct{})}
	cc, err := grpcx.DialSwap(cfg.MGS, grpcx.WithTLS(cfg.TLS))
	if err != nil {
		return nil, err
	}
	c.mgsConn, c.mgs = cc, nacregrpc.NewMGSClient(cc)
	h, err := c.hello(ctx)
	if err != nil {
		cc.Close()
		if errno.CodeOf(err) == errno.FailedPrecondition {
			return nil, fmt.Errorf("MGS at %s refused this client: %w", cfg.MGS, err)
		}
		if errno.CodeOf(err) == errno.Unimplemented {
			return nil, NotAnMGS(cfg.MGS, err)
		}
		return nil, err
	}
	if h.ProtocolVersion != version.Protocol {
		cc.Close()
		return nil, fmt.Errorf("MGS at %s: %s", cfg.MGS, errno.VersionMismatch(fmt.Sprint(h.ProtocolVersion), version.Protocol, "the MGS", "this client"))
	}
	c.fsname = h.Fsname
	if err := c.refresh(ctx); err != nil {
		c.Close()
		return nil, err
	}
	if cfg.RefreshEvery > 0 {
		c.stopRefresh = make(chan struct{})
		go c.refreshLoop(cfg.RefreshEvery, c.stopRefresh)
	}
	return c, nil
}

// refreshLoop reads the configuration every d until stop is closed.
func (c *Client) refreshLoop(d time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			if err := c.refresh(ctx); err != nil {
				c.log.Debug("background configuration read", "err", err)
			}
			cancel()
		}
	}
}

// ProcessCred is the identity of the running process.
func ProcessCred() *pb.Cred {
	c := &pb.Cred{Uid: uint32(os.Getuid()), Gid: uint32(os.Getgid())}
	if gs, err := os.Getgroups(); err == nil {
		for _, g := range gs {
			c.Groups = append(c.Groups, uint32(g))
		}
	}
	return c
}

// Fsname is the file system's name.
func (c *Client) Fsname() string { return c.fsname }

// ID is this client's id in the MDTs' reply caches.
func (c *Client) ID() uint64 { return c.id }

// MGS is the MGS client (for status and admin commands).
func (c *Client) MGS() nacregrpc.MGSClient { return c.mgs }

// Close drops every connection.
func (c *Client) Close() error {
	c.Settle()
	c.closeHolds()
	// A client that leaves makes the changes it was answered durable:
	// nobody would give them back to an MDT that lost them.
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := c.SyncMDTs(sctx); err != nil {
		c.log.Warn("sync the MDTs before closing", "err", err)
	}
	cancel()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	close(c.stopKeep)
	if c.stopRefresh != nil {
		close(c.stopRefresh)
	}
	for _, m := range c.mdts {
		m.closer.Close()
	}
	for _, o := range c.osts {
		o.wc.Close()
	}
	return c.mgsConn.Close()
}

// Config fetches the cluster configuration from the MGS. The read is
// idempotent, so an Unavailable answer is tried again until the deadline:
// with replicated MGSs it is what a call gets while the replica it went
// to, or the leader that replica forwards to, has just died, and the
// connection moves on to another replica and a new leader is elected
// within seconds.
// HasOST reports whether the client knows an OST of that index (from the
// configuration it last read; it reads it again every few seconds).
func (c *Client) HasOST(index uint32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.osts[index] != nil
}

func (c *Client) Config(ctx context.Context) (*pb.ClusterConfig, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var cfg *pb.ClusterConfig
	err := whileUnavailable(ctx, time.Now().Add(10*time.Second), 50*time.Millisecond, time.Second, func() (err error) {
		cfg, err = c.mgs.GetConfig(ctx, &pb.GetConfigRequest{}, grpc.WaitForReady(true))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("get configuration from the MGS at %s: %w", c.cfg.MGS, err)
	}
	// A mount running while every MGS replica is replaced, one after
	// the other, keeps reaching the MGS.
	c.mgsConn.Follow(cfg.GetMgsAddrs(), c.log)
	return cfg, nil
}

// whileUnavailable runs call again while it answers Unavailable (a replica
// gone, a leader being elected), waiting wait between attempts, doubled up
// to maxWait, until deadline or the end of ctx; it returns call's last
// error.
func whileUnavailable(ctx context.Context, deadline time.Time, wait, maxWait time.Duration, call func() error) error {
	for {
		err := call()
		if errno.CodeOf(err) != errno.Unavailable || time.Now().After(deadline) || ctx.Err() != nil {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, maxWait)
	}
}

// refresh (re)reads the configuration and connects to new or moved
// targets. Concurrent callers share one refresh.
func (c *Client) refresh(ctx context.Context) error {
	c.refreshM.Lock()
	defer c.refreshM.Unlock()
	c.mu.Lock()
	fresh := time.Since(c.cfgAt) < 200*time.Millisecond
	c.mu.Unlock()
	if fresh {
		return nil
	}
	cfg, err := c.Config(ctx)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cfgAt = time.Now()
	c.fld = cfg.Fld
	c.setNodemap(cfg.Nodemap)
	mdtReps := map[uint32][]*pb.TargetInfo{}
	for _, ti := range sortTargets(cfg.Targets) {
		switch ti.Kind {
		case pb.TargetKind_TARGET_MDT:
			// Every replica of the MDT; the group routes to the leader
			// (replicas.go).
			mdtReps[ti.Index] = append(mdtReps[ti.Index], ti)
		case pb.TargetKind_TARGET_OST:
			o := c.osts[ti.Index]
			if o != nil && o.addr == ti.DataAddr {
				o.up = ti.State == "up"
				continue
			}
			bo := bulk.ClientOptions{Fsname: c.fsname, Target: fmt.Sprintf("OST%04x", ti.Index), Conns: ioParallel}
			if c.cfg.TLS != nil {
				bo.TLS = c.cfg.TLS.ClientConfig()
			}
			wc, err := bulk.Dial(ti.DataAddr, bo)
			if err != nil {
				return err
			}
			if o != nil {
				o.wc.Close()
			}
			c.osts[ti.Index] = &ostConn{index: ti.Index, addr: ti.DataAddr, wc: wc, up: ti.State == "up"}
		}
	}
	for idx, tis := range mdtReps {
		m := c.mdts[idx]
		if m == nil {
			g := newMDTGroup(idx, c.fsname, c.cfg.FollowerReads, c.cfg.TLS)
			m = &mdtConn{index: idx, cli: g, closer: g}
			c.mdts[idx] = m
		}
		if err := m.cli.(*mdtGroup).update(tis); err != nil {
			return err
		}
		m.addr = m.cli.(*mdtGroup).describe()
	}
	if len(c.mdts) == 0 {
		return fmt.Errorf("file system %q has no MDT registered with the MGS at %s", c.fsname, c.cfg.MGS)
	}
	return nil
}

func sortTargets(ts []*pb.TargetInfo) []*pb.TargetInfo {
	out := append([]*pb.TargetInfo(nil), ts...)
	sort.SliceStable(out, func(i, j int) bool { return out[i].Leader && !out[j].Leader })
	return out
}

// mdtFor routes a FID to its MDT through the FLD. A sequence the FLD it
// read last does not know was granted since: it reads the FLD again.
func (c *Client) mdtFor(f fid.FID) (*mdtConn, error) {
	m, known, err := c.mdtFromFLD(f)
	if known {
		return m, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.refresh(ctx); err != nil {
		return nil, fmt.Errorf("route FID %s: its sequence is not in the FLD this client has, and reading it again failed: %w", f, err)
	}
	if m, known, err = c.mdtFromFLD(f); known {
		return m, err
	}
	return nil, fmt.Errorf("route FID %s: no MDT serves its sequence (the MGS's FLD does not list it)", f)
}

func (c *Client) mdtFromFLD(f fid.FID) (*mdtConn, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	idx, known := fid.MDTOf(c.fld, f)
	if !known {
		if len(c.mdts) == 1 && c.mdts[0] != nil {
			return c.mdts[0], true, nil // one MDT: nothing to choose
		}
		return nil, false, nil
	}
	m := c.mdts[idx]
	if m == nil {
		return nil, true, fmt.Errorf("no connection to MDT%04x (FID %s)", idx, f)
	}
	return m, true, nil
}

func (c *Client) ost(index uint32) (*ostConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := c.osts[index]
	if o == nil {
		return nil, fmt.Errorf("OST%04x is not in the configuration", index)
	}
	return o, nil
}

// beginReq allocates a request id and returns the acknowledgement
// watermark to send with it.
func (c *Client) beginReq() (id, ackedBelow uint64) {
	id = c.nextReq.Add(1)
	c.inMu.Lock()
	c.inFlt[id] = struct{}{}
	ackedBelow = id
	for k := range c.inFlt {
		if k < ackedBelow {
			ackedBelow = k
		}
	}
	c.inMu.Unlock()
	return id, ackedBelow
}

func (c *Client) endReq(id uint64) {
	c.inMu.Lock()
	delete(c.inFlt, id)
	c.inMu.Unlock()
}

// retry runs f, a call to the MDT of the FID on, until it succeeds, fails
// for good, or the timeout passes. Between attempts it refreshes the
// configuration (a target may have moved or a new leader been elected),
// and tells Config.OnWait of a wait that lasts.
func (c *Client) retry(ctx context.Context, what string, on fid.FID, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(c.cfg.Timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	backoff := 20 * time.Millisecond
	start := time.Now()
	notes := waitNotes{c: c}
	var cause error
	for attempt := 0; ; attempt++ {
		actx, cancel := context.WithDeadline(ctx, deadline)
		err := f(actx)
		cut := actx.Err() != nil
		cancel()
		if err != nil && (cause == nil || !cut) {
			// The attempt cut short by the deadline fails with a timeout
			// whatever is wrong ("i/o timeout" for a server that refuses
			// connections): the one before says why.
			cause = err
		}
		if err == nil || !errno.Retryable(err) || time.Now().After(deadline) || ctx.Err() != nil {
			// Our own deadline passing is giving up too (a replicated
			// MDT with no leader holds calls until then), not an error
			// of the call.
			timedOut := cut && ctx.Err() == nil && (errno.CodeOf(err) == errno.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded))
			if err != nil && (errno.Retryable(err) || timedOut) {
				return &gaveUpError{what: what, attempts: attempt + 1, took: time.Since(start), err: cause}
			}
			return err
		}
		if errno.ReasonOf(err) == errno.Recovering {
			rctx, rcancel := context.WithDeadline(ctx, deadline)
			c.recoveringOn(rctx, on)
			rcancel()
		} else if attempt == 3 {
			c.log.Warn("retrying", "op", what, "err", err)
		}
		c.noteMDTWait(&notes, what, on, start, deadline, cause)
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		// Short pauses: a new leader is usually elected within one to two
		// seconds, and the client should notice it soon after.
		if backoff < 250*time.Millisecond {
			backoff *= 2
		}
		c.mu.Lock()
		c.cfgAt = time.Time{}
		c.mu.Unlock()
		c.refresh(ctx)
	}
}

type credKey struct{}

// WithCred returns a context whose operations run as cred.
func WithCred(ctx context.Context, cred *pb.Cred) context.Context {
	return context.WithValue(ctx, credKey{}, cred)
}

func (c *Client) cred(ctx context.Context) *pb.Cred {
	if v, ok := ctx.Value(credKey{}).(*pb.Cred); ok && v != nil {
		return v
	}
	return c.cfg.Cred
}

// MDTOf is the index of the MDT that holds f (through the FLD).
func (c *Client) MDTOf(f fid.FID) (uint32, error) {
	m, err := c.mdtFor(f)
	if err != nil {
		return 0, err
	}
	return m.index, nil
}
