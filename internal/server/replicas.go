package server

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/grpcx"
	"nacre/internal/kv"
	"nacre/internal/mgs"
	"nacre/internal/obs"
	"nacre/internal/pki"
	"nacre/internal/raftgroup"
	"nacre/internal/target"
	"nacre/internal/webui"
)

// Replicated targets (MDTs and the MGS with --replicas 3).
//
// A replica's identity names its replica id and the Raft addresses of the
// group's replicas when it was formatted (Identity.Peers, replica id ->
// gRPC address: every replica serves the Raft service on its gRPC port).
// A replica whose own id is not among the peers joins an existing group:
// it starts empty and waits for the leader to add it (`nacre replica
// add`), which sends it a snapshot. After the first start the stored
// configuration wins; the peers only supply addresses.

// Replicated reports whether the target in id runs a Raft group with
// other replicas (or joins one).
func Replicated(id target.Identity) bool {
	return len(id.Peers) > 1 || joining(id)
}

// joining: the replica is not among the peers it was formatted with, so
// it joins the group they form.
func joining(id target.Identity) bool {
	if id.ReplicaID == 0 || len(id.Peers) == 0 {
		return false
	}
	_, self := id.Peers[id.ReplicaID]
	return !self
}

// newTransport registers the Raft and RaftAdmin services on g for a
// replicated target; nil for a single replica.
func newTransport(id target.Identity, g *grpc.Server, log *slog.Logger, sec security) *raftgroup.GRPCTransport {
	if !Replicated(id) {
		return nil
	}
	return raftgroup.NewGRPCTransport(g, log, raftgroup.WithTLS(sec.creds))
}

// raftConfig fills the parts of a group's configuration that come from
// the identity, the target directory and the options.
func raftConfig(id target.Identity, dir string, tr *raftgroup.GRPCTransport, c raftgroup.Config, ro RaftOptions) raftgroup.Config {
	rid := id.ReplicaID
	if rid == 0 {
		rid = 1
	}
	c.ID = rid
	c.Peers = []raftgroup.Peer{{ID: rid, Addr: id.Listen}}
	if len(id.Peers) > 1 || joining(id) {
		c.Peers = c.Peers[:0]
		for pid, addr := range id.Peers {
			c.Peers = append(c.Peers, raftgroup.Peer{ID: pid, Addr: addr})
		}
	}
	c.Join = joining(id)
	c.Fsname = id.Fsname
	c.VoteWhileEmpty = ro.VoteWhileEmpty
	c.LogDir = target.RaftLogDir(dir)
	if tr != nil {
		c.Transport = tr
		sd := target.RaftSnapDir(dir)
		if err := os.MkdirAll(sd, 0o700); err == nil {
			c.SnapshotDir = sd
			// Images of an earlier life are useless: raft asks again.
			if old, _ := filepath.Glob(filepath.Join(sd, "raft-image-*")); len(old) > 0 {
				for _, f := range old {
					os.Remove(f)
				}
			}
		}
	}
	if ro.KeepEntries > 0 {
		c.KeepEntries = ro.KeepEntries
	}
	if ro.NoLease {
		c.DisableLease = true
	}
	c.TickInterval = 100 * time.Millisecond
	return c
}

// handOff moves leadership to another replica before a clean stop, so
// that clients wait for one redirect instead of an election timeout.
func handOff(g *raftgroup.Group, log *slog.Logger) {
	if g == nil || !g.IsLeader() || !g.Replicated() {
		return
	}
	// A transfer to a live follower takes milliseconds; when the whole
	// group is stopping (nacre down) it cannot succeed, so do not wait long.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	if err := g.TransferLeadership(ctx, 0); err != nil {
		log.Warn("could not hand leadership over before stopping", "err", err)
		return
	}
	log.Info("handed leadership over before stopping", "leader", g.Leader(), "took", time.Since(start))
}

// runMGS serves the MGS: its Raft group (one replica, or one of several),
// and for a replica, a registrar that lists it with the MGS like any other
// target so that `nacre status` shows every replica and which one leads.
func runMGS(id target.Identity, dir string, db *kv.DB, ln net.Listener, reg *prometheus.Registry, sm *obs.ServerMetrics, log *slog.Logger, mh *obs.HTTP, ro RaftOptions, sec security, fatal chan error) (func(), error) {
	g := grpcx.NewServer(nil, grpcx.WithInFlight(sm.InFlight.WithLabelValues("grpc")), grpcx.WithServerTLS(sec.creds, sec.warn))
	tr := newTransport(id, g, log, sec)
	self := mgs.SelfInfo(id, ln.Addr().String(), mh.Addr(), absDir(dir))
	self.Security = sec.mode
	srv, err := mgs.New(mgs.Config{ID: id, DB: db, Log: log, Reg: reg, Self: self, TLS: sec.creds,
		Group: func(sm raftgroup.StateMachine) (*raftgroup.Group, error) {
			return startGroup(id, dir, raftConfig(id, dir, tr, raftgroup.Config{
				GroupID: MGSGroup, DB: db, Prefix: []byte("\x00r"), SM: sm, Log: log, Name: "MGS", Target: "mgs",
			}, ro), sec.creds)
		}})
	if err != nil {
		if tr != nil {
			tr.Close()
		}
		return nil, err
	}
	srv.Attach(g)
	reg.MustRegister(raftgroup.NewCollector(srv.Group(), id.Name()))
	go watchGroup(srv.Group(), id, dir, fatal) // serve.go
	if tr != nil {
		go askIfRemoved(srv.Group(), id.ReplicaID, sec.creds)
	}
	if tr == nil {
		raftgroup.RegisterSoloAdmin(g, srv.Group()) // nacre replica list shows it too
	}
	if tr != nil {
		ln = tr.Listener(ln) // raft messages share the gRPC port (raftgroup/fast.go)
	}
	go serveGRPC(g, ln, fatal)
	var r *mgs.Registrar
	if tr != nil {
		info := proto.Clone(self).(*pb.TargetInfo)
		info.ReplicaId = id.ReplicaID
		// Through its own server, which forwards to the leader it knows
		// from the group: the peers recorded at format go stale as
		// replicas are replaced (a replica added after all of them were
		// could reach none and showed down for good).
		r, err = mgs.StartRegistrar(id.Listen,
			func() *pb.TargetInfo { return info },
			func() *pb.HeartbeatRequest {
				return &pb.HeartbeatRequest{Kind: pb.TargetKind_TARGET_MGS, Uuid: id.UUID, ReplicaId: id.ReplicaID, Leader: srv.IsLeader(), Role: replicaRole(srv.Group(), id)}
			}, log, sec.creds)
		if err != nil {
			stopGRPC(g)
			srv.Stop()
			tr.Close()
			return nil, err
		}
		go forward(r.Fatal(), fatal)
		go quietWhenRemoved(srv.Group(), r) // serve.go
	}
	// The cluster's web page, on the metrics listener: every replica
	// serves it, asking the leader for the targets as clients do.
	ui := webui.New(webui.Config{Listen: mh.Addr(), Log: log,
		Cluster: func(ctx context.Context) (*pb.ClusterConfig, error) {
			return srv.GetConfig(ctx, &pb.GetConfigRequest{})
		}})
	ui.Attach(mh)
	uiCtx, uiStop := context.WithCancel(context.Background())
	uiDone := make(chan struct{})
	go func() { defer close(uiDone); ui.Run(uiCtx) }()
	return func() {
		uiStop()
		<-uiDone
		if r != nil {
			handOff(srv.Group(), log)
			r.Stop()
		}
		srv.Stop()
		if tr != nil {
			tr.Close()
		}
		stopGRPC(g)
	}, nil
}

// MGSGroup is the Raft group id of the MGS (MDT n uses n+1).
const MGSGroup = 1 << 32

// MGSAddrs is the address list of a replicated MGS ("a,b,c", in replica
// order), as targets and clients name it.
func MGSAddrs(id target.Identity) string {
	ids := make([]uint64, 0, len(id.Peers))
	for rid := range id.Peers {
		ids = append(ids, rid)
	}
	slices.Sort(ids)
	var out []string
	for _, rid := range ids {
		out = append(out, id.Peers[rid])
	}
	if len(out) == 0 {
		return id.Listen
	}
	return strings.Join(out, ",")
}

// kicker makes a registrar heartbeat at once (set once it exists).
type kicker struct{ r atomic.Pointer[mgs.Registrar] }

func (k *kicker) set(r *mgs.Registrar) { k.r.Store(r) }

func (k *kicker) kick() {
	if r := k.r.Load(); r != nil {
		r.Kick()
	}
}

// startGroup starts a replica's raft group. A founding replica starting
// for the first time asks its peers, in the background, whether the
// group's log already holds entries: if so, its store is newer than the
// group's log (a replica started late, or one whose store was lost and
// that was formatted again under its old id), and it must not help elect
// a candidate that may lack what it had acknowledged before its store was
// lost (raftgroup.Group.GuardEmptyVotes). The peers answer within
// moments, well before an election timeout.
func startGroup(id target.Identity, dir string, c raftgroup.Config, creds *pki.Creds) (*raftgroup.Group, error) {
	first := len(id.Peers) > 1 && !c.Join && !target.HasRun(dir, id)
	g, err := raftgroup.Start(c)
	if err == nil && first {
		go func() {
			if peersHaveLog(id, creds) {
				g.GuardEmptyVotes(true)
				c.Log.Warn("this replica's store is new, but the group already had a log: it votes for no other replica until a leader has sent it the log " +
					"(if its store was lost and it was formatted again under its old id, stop it and replace it: nacre replica replace --id N --new-id M)")
			}
		}()
	}
	return g, err
}

// peersHaveLog asks the other founding replicas whether the group's log
// holds entries beyond its starting point, for up to 3 s while some do
// not answer.
func peersHaveLog(id target.Identity, creds *pki.Creds) bool {
	deadline := time.Now().Add(3 * time.Second)
	answered := map[uint64]bool{}
	for {
		for pid, addr := range id.Peers {
			if pid == id.ReplicaID || answered[pid] {
				continue
			}
			last, err := peerLastIndex(addr, creds)
			if err != nil {
				continue
			}
			answered[pid] = true
			if last > 1 { // raftgroup's starting point is index 1
				return true
			}
		}
		if len(answered) == len(id.Peers)-1 || time.Now().After(deadline) {
			return false
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// peerLastIndex asks a replica's RaftAdmin service for its last log index.
func peerLastIndex(addr string, creds *pki.Creds) (uint64, error) {
	cc, err := grpcx.Dial(addr, grpcx.WithTLS(creds))
	if err != nil {
		return 0, err
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	m, err := nacregrpc.NewRaftAdminClient(cc).Members(ctx, &pb.RaftMembersRequest{})
	if err != nil {
		return 0, err
	}
	return m.LastIndex, nil
}
