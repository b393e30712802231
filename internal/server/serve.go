// Package server runs the target in a target directory: it loads and checks
// the identity, opens the store, binds the listeners (keeping the ports of
// earlier starts), starts the MGS, MDS or OSS, registers with the MGS and
// heartbeats, serves metrics, and shuts down cleanly when asked.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/diskio"
	"nacre/internal/grpcx"
	"nacre/internal/kv"
	"nacre/internal/mdrpc"
	"nacre/internal/mds"
	"nacre/internal/mgs"
	"nacre/internal/netguard"
	"nacre/internal/obs"
	"nacre/internal/oss"
	"nacre/internal/pki"
	"nacre/internal/ports"
	"nacre/internal/raftgroup"
	"nacre/internal/reserve"
	"nacre/internal/target"
	"nacre/internal/target/proc"
	"nacre/internal/version"
)

// Options configure Run. cmd/nacre fills the knobs from the
// environment (`nacre help environment`); their zero values are the
// defaults.
type Options struct {
	Log *slog.Logger
	// Ready, if set, is called once the target serves.
	Ready func(id target.Identity)
	// GCPercent, if not 0, is the Go collector's target percentage
	// (debug.SetGCPercent). Servers keep little garbage-free state on the
	// Go heap (pebble's cache is off-heap) and memory is plentiful:
	// cmd/nacre trades some of it for less collector CPU on the metadata
	// path (400) unless GOGC is set.
	GCPercent int
	// Raft tunes the Raft groups of the MGS and of an MDT.
	Raft RaftOptions
	// MDS tunes a metadata server.
	MDS mds.Options
	// MaxConnsPerPeer bounds the connections one peer IP holds open on
	// each of the target's ports (gRPC, data): over it, a connection is
	// closed at once, counted (nacre_net_refused_connections_total) and
	// logged, at most a line per peer every 10 s (0:
	// netguard.DefaultMaxPerPeer; negative: no bound).
	MaxConnsPerPeer int
	// Insecure lets a target without TLS credentials listen on an
	// address other than loopback (checkBinding), with a warning.
	Insecure bool
}

// security is what a target's links are made with.
type security struct {
	creds *pki.Creds       // nil: no TLS
	warn  *netguard.Warner // logs the peers refused on the gRPC port
	mode  string           // pb.TargetInfo.Security
}

// RaftOptions tune a target's Raft group (raftgroup.Config).
type RaftOptions struct {
	// VoteWhileEmpty lets a replica with an empty log vote and be
	// elected (raftgroup.Config.VoteWhileEmpty): the way out when every
	// replica lost its log.
	VoteWhileEmpty bool
	// KeepEntries, if not 0, is how many applied entries the log keeps
	// behind a snapshot (tests shorten it to exercise snapshots).
	KeepEntries uint64
	// NoLease turns the leader's read lease off: every read takes a
	// ReadIndex round.
	NoLease bool
	// CommitWindow is how long a single-replica MDT may leave answered
	// changes unsynced (raftgroup.Config.CommitWindow; 0:
	// mds.DefaultCommitWindow; negative: every answer waits for its
	// sync). The MGS syncs every change.
	CommitWindow time.Duration
}

// Run serves the target in dir until ctx is done or a fatal error occurs.
func Run(ctx context.Context, dir string, o Options) error {
	id, err := target.Load(dir)
	if err != nil {
		return err
	}
	log := o.Log.With("target", id.Name())
	if o.GCPercent != 0 {
		debug.SetGCPercent(o.GCPercent)
	}
	if err := proc.Claim(dir); err != nil {
		return err
	}
	// A target formatted by an older release has its data directories
	// 0755: they become its owner's alone before it serves.
	if err := target.MakePrivate(dir); err != nil {
		return fmt.Errorf("%s: %w", id.Name(), err)
	}
	defer os.Remove(filepath.Join(dir, proc.PidFile))

	creds, err := loadCreds(dir, id)
	if err != nil {
		return err
	}
	if err := checkBinding(id, creds != nil, o.Insecure, log); err != nil {
		return err
	}

	ln, err := listen(id.Listen, id, "gRPC")
	if err != nil {
		return err
	}
	defer ln.Close()
	var dataLn net.Listener
	if id.Kind == target.OST || id.Kind == target.MDT {
		if dataLn, err = listen(id.DataListen, id, "data"); err != nil {
			return err
		}
		defer dataLn.Close()
	}
	reg := obs.NewRegistry()
	disk := &diskio.Counter{}
	sm := obs.NewServerMetrics(reg, id.Name(), disk.Written)
	// The gRPC server has no bound of connections per peer: the
	// listener keeps it.
	sec := security{creds: creds, warn: netguard.NewWarner(log, 0), mode: securityMode(id, creds != nil)}
	grpcLn := netguard.LimitPeers(ln, o.MaxConnsPerPeer, sec.warn, "gRPC")
	ln = sm.Listen(grpcLn)
	reg.MustRegister(refusedCounter(id.Name(), "grpc", grpcLn.Refused))
	if dataLn != nil {
		dataLn = sm.Listen(dataLn)
	}
	metricsAddr := id.MetricsListen
	if metricsAddr == "" {
		metricsAddr = "127.0.0.1:0"
	}
	mh, err := obs.Serve(metricsAddr, reg)
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%s: %w; stop the process that holds the port or change \"metrics_listen\" in %s", id.Name(), err, target.IdentityFile)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", id.Name(), err)
	}
	defer mh.Close()
	// Keep the ports the first start picked, so that restarts keep them.
	changed := false
	for _, p := range []struct {
		cur *string
		ln  net.Listener
		adr string
	}{{&id.Listen, ln, ""}, {&id.DataListen, dataLn, ""}, {&id.MetricsListen, nil, mh.Addr()}} {
		a := p.adr
		if p.ln != nil {
			a = p.ln.Addr().String()
		}
		if a != "" && *p.cur != a {
			*p.cur, changed = a, true
		}
	}
	if changed {
		if err := target.Save(dir, id); err != nil {
			return err
		}
	}

	kvo := StoreOptionsIn(id.Kind, dir)
	// A target that has run must find its store: an unmounted device or
	// removed files must not become a new, empty target (and its Raft log
	// must not be started afresh beside it).
	kvo.MustExist = target.HasRun(dir, id)
	kvo.FS = disk.FS(vfs.Default)
	if err := reserve.CheckOpen(target.StoreDir(dir), id.Name(), kvo.MemTable(), nil); err != nil {
		return err
	}
	db, err := kv.Open(target.StoreDir(dir), kvo)
	if errors.Is(err, kv.ErrNoStore) {
		since := "before"
		if !id.Started.IsZero() {
			since = "since " + id.Started.Format(time.RFC3339)
		}
		return fmt.Errorf("%s: there is no store in %s, although the target has run %s: %w",
			id.Name(), target.StoreDir(dir), since, target.ErrStoreLost)
	}
	if errors.Is(err, kv.ErrDamaged) {
		return fmt.Errorf("%s: %w; %s", id.Name(), err, damagedAdvice(id, dir))
	}
	if err != nil {
		return fmt.Errorf("%s: %w", id.Name(), err)
	}
	closeDB := true
	defer func() {
		if closeDB {
			db.Close()
		}
	}()
	if id.Kind != target.OST {
		if err := target.CheckStore(db, id); err != nil {
			return err
		}
	}
	host, _ := os.Hostname()
	info := &pb.TargetInfo{
		Fsname: id.Fsname, Index: id.Index, Uuid: id.UUID, Addr: ln.Addr().String(), MetricsAddr: mh.Addr(),
		Pid: int64(os.Getpid()), Host: host, ProtocolVersion: version.Protocol, Dir: absDir(dir), ReplicaId: id.ReplicaID,
		Security: sec.mode,
	}
	fatal := make(chan error, 1)
	idf := &identityFile{dir: dir, log: log}
	var stop func()
	switch id.Kind {
	case target.MGS:
		stop, err = runMGS(id, dir, db, ln, reg, sm, log, mh, o.Raft, sec, fatal) // replicas.go
		if err != nil {
			return err
		}
	case target.MDT:
		info.Kind = pb.TargetKind_TARGET_MDT
		info.DataAddr = dataLn.Addr().String()
		stop, err = runMDS(id, dir, idf, db, ln, dataLn, reg, sm, log, info, o, sec, fatal)
		if err != nil {
			return err
		}
	case target.OST:
		db.Close()
		closeDB = false
		info.Kind = pb.TargetKind_TARGET_OST
		info.DataAddr = dataLn.Addr().String()
		srv, err := oss.Start(oss.Config{Dir: dir, ID: id, Log: log, Reg: reg, GRPC: ln, Data: dataLn, InFlight: sm.InFlight, KV: kvo, Disk: disk,
			MaxConnsPerPeer: o.MaxConnsPerPeer, TLS: sec.creds, Warn: sec.warn})
		if err != nil {
			return err
		}
		r, err := mgs.StartRegistrar(id.MGSNode, func() *pb.TargetInfo { return info },
			func() *pb.HeartbeatRequest {
				return &pb.HeartbeatRequest{Kind: info.Kind, Index: id.Index, Uuid: id.UUID, Statfs: srv.Statfs()}
			}, log, sec.creds)
		if err != nil {
			srv.Stop()
			return err
		}
		r.OnMGSChange(idf.recordMGS)
		go forward(r.Fatal(), fatal)
		stop = func() { r.Stop(); srv.Stop() }
	}
	if id.Started.IsZero() {
		// The store holds the target now (CheckStore recorded it). From
		// the file as it is now: recordMGS may have written it since.
		id.Started = time.Now().UTC()
		if err := idf.update(func(cur *target.Identity) bool { cur.Started = id.Started; return true }); err != nil {
			stop()
			return err
		}
	}
	log.Info("serving", "addr", ln.Addr().String(), "data_addr", info.DataAddr, "metrics", mh.URL(), "pid", os.Getpid(), "version", version.Software,
		"tls", creds != nil)
	if id.Kind != target.MGS {
		if msg := reserve.ShortOfReserve(dir, id.Label(), kvo.MemTable(), nil); msg != "" {
			log.Warn(msg)
		}
	}
	if o.Ready != nil {
		o.Ready(id)
	}
	select {
	case <-ctx.Done():
		log.Info("stopping")
		stop()
		return nil
	case err := <-fatal:
		stop()
		return fmt.Errorf("%s: %w", id.Name(), err)
	}
}

func runMDS(id target.Identity, dir string, idf *identityFile, db *kv.DB, ln, dataLn net.Listener, reg *prometheus.Registry, sm *obs.ServerMetrics, log *slog.Logger, info *pb.TargetInfo, o Options, sec security, fatal chan error) (func(), error) {
	// Swappable: it follows the MGS replicas as the registrar learns them.
	mgsConn, err := grpcx.DialSwap(id.MGSNode, grpcx.WithTLS(sec.creds))
	if err != nil {
		return nil, err
	}
	g := grpcx.NewServer(nil, grpcx.WithInFlight(sm.InFlight.WithLabelValues("grpc")), grpcx.WithServerTLS(sec.creds, sec.warn))
	tr := newTransport(id, g, log, sec) // nil for a single replica (replicas.go)
	closeTr := func() {
		if tr != nil {
			tr.Close()
		}
	}
	var kick kicker // heartbeat at once when leadership changes (replicas.go)
	srv, err := mds.Start(mds.Config{ID: id, DB: db, Log: log, Reg: reg, GRPC: g, MGS: nacregrpc.NewMGSClient(mgsConn),
		Group: groupFor(id, dir, db, log, tr, &kick, o.Raft, sec.creds), Options: o.MDS, TLS: sec.creds})
	if err != nil {
		closeTr()
		mgsConn.Close()
		return nil, err
	}
	reg.MustRegister(raftgroup.NewCollector(srv.Group(), id.Name()))
	go watchGroup(srv.Group(), id, dir, fatal)
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
	// The metadata hot path: framed RPC on the data port (internal/mdrpc).
	mo := mdrpc.ServerOptions{Fsname: id.Fsname, Log: log, MaxConnsPerPeer: o.MaxConnsPerPeer}
	if sec.creds != nil {
		mo.TLS = sec.creds.ServerConfig()
	}
	fs := mdrpc.Serve(dataLn, countInFlight(mdrpc.MDSMethods(srv.Served()), sm.InFlight.WithLabelValues("mdrpc")), mo)
	reg.MustRegister(refusedCounter(id.Name(), "data", fs.Refused))
	r, err := mgs.StartRegistrar(id.MGSNode,
		func() *pb.TargetInfo {
			ti := proto.Clone(info).(*pb.TargetInfo)
			ti.Leader = srv.IsLeader()
			return ti
		},
		func() *pb.HeartbeatRequest {
			return &pb.HeartbeatRequest{Kind: info.Kind, Index: id.Index, Uuid: id.UUID, Statfs: srv.LocalStatfs(), Leader: srv.IsLeader(), ReplicaId: id.ReplicaID, Term: srv.Group().Term(), Role: replicaRole(srv.Group(), id), Recovering: srv.RecoveryStatus()}
		}, log, sec.creds)
	if err != nil {
		g.Stop()
		fs.Close()
		srv.Stop()
		closeTr()
		mgsConn.Close()
		return nil, err
	}
	r.OnMGSChange(func(addrs string) {
		mgsConn.Follow(strings.Split(addrs, ","), log)
		idf.recordMGS(addrs)
	})
	kick.set(r)
	go forward(r.Fatal(), fatal)
	go quietWhenRemoved(srv.Group(), r)
	return func() {
		handOff(srv.Group(), log) // replicas.go
		r.Stop()
		fs.Close()
		if tr != nil {
			// Replicas: stop the group and the transport first, so that
			// the other replicas' Raft streams end and the graceful stop
			// below does not wait for them.
			srv.Stop()
			closeTr()
			stopGRPC(g)
		} else {
			stopGRPC(g)
			srv.Stop()
		}
		mgsConn.Close()
	}, nil
}

// refusedCounter exports a port's count of connections refused for
// their peer's bound (the OSS exports its data port's).
func refusedCounter(target, port string, n func() uint64) prometheus.Collector {
	return prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "nacre_net_refused_connections_total", Help: "Connections closed at once because their peer IP held as many open as it may, by port.",
		ConstLabels: prometheus.Labels{"target": target, "port": port},
	}, func() float64 { return float64(n()) })
}

// countInFlight wraps every method so the gauge tracks calls being served.
func countInFlight(m map[uint16]mdrpc.Method, g prometheus.Gauge) map[uint16]mdrpc.Method {
	out := make(map[uint16]mdrpc.Method, len(m))
	for id, f := range m {
		out[id] = func(ctx context.Context, payload []byte) (proto.Message, error) {
			g.Inc()
			defer g.Dec()
			return f(ctx, payload)
		}
	}
	return out
}

// stopGRPC drains calls for a moment, then cuts the rest.
func stopGRPC(g *grpc.Server) {
	done := make(chan struct{})
	go func() { g.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		g.Stop()
	}
}

// watchGroup makes a Raft group's fatal error (a failed write or sync of
// its log, a store it cannot apply to) the target's: the process exits
// with it, and a restart replays what the disk holds. Serving on with a
// stopped group would answer every request with an error while status
// showed the target up.
//
// A replica removed from its group (nacre replica remove) stops too: it
// is no member and never will be again, and serving on it would register
// with the MGS and show in status as if it were.
func watchGroup(g *raftgroup.Group, id target.Identity, dir string, fatal chan<- error) {
	select {
	case <-g.Done():
		if err := g.Err(); err != nil {
			select {
			case fatal <- fmt.Errorf("raft group stopped: %w", err):
			default:
			}
		}
	case <-g.Removed():
		// Let the answer to the removal and the commit that carries it
		// reach the others first.
		select {
		case <-time.After(2 * time.Second):
		case <-g.Done():
		}
		select {
		case fatal <- fmt.Errorf("replica %d was removed from its group (nacre replica remove) and serves nothing, so it stopped; delete its directory %s, or move it out of the cluster directory", id.ReplicaID, absDir(dir)):
		default:
		}
	}
}

// replicaRole is a replica's role for its heartbeat ("" if the target
// is not replicated).
func replicaRole(g *raftgroup.Group, id target.Identity) string {
	if id.ReplicaID == 0 {
		return ""
	}
	return g.Role()
}

// askIfRemoved stops a replica that was removed from its group while it
// was down: it never applies its removal (no leader sends it anything),
// so it campaigned forever, registered with the MGS and showed as up, and
// `nacre up` kept starting it. Every few seconds without a leader it asks
// the other replicas; once one that knows a leader lists it as removed,
// it stops as a removed replica does (watchGroup).
func askIfRemoved(g *raftgroup.Group, self uint64, creds *pki.Creds) {
	const every = 5 * time.Second
	leaderless := 0
	for {
		select {
		case <-g.Done():
			return
		case <-g.Removed():
			return
		case <-time.After(every):
		}
		if g.Status().Leader != 0 {
			leaderless = 0
			continue
		}
		if leaderless++; leaderless < 2 {
			continue
		}
		for _, p := range g.Peers() {
			if p.ID == self || p.Addr == "" {
				continue
			}
			if removedBy(p.Addr, g.Status().GroupID, self, creds) {
				g.MarkRemoved()
				return
			}
		}
	}
}

// removedBy asks the replica at addr whether it knows a leader and lists
// replica self of group gid as removed.
func removedBy(addr string, gid, self uint64, creds *pki.Creds) bool {
	cc, err := grpcx.Dial(addr, grpcx.WithTLS(creds))
	if err != nil {
		return false
	}
	defer cc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	r, err := nacregrpc.NewRaftAdminClient(cc).Members(ctx, &pb.RaftMembersRequest{Group: gid})
	return err == nil && r.Leader != 0 && slices.Contains(r.Removed, self)
}

// quietWhenRemoved stops r's heartbeats once the replica is removed from
// its group, so that it does not register again in the moments before it
// stops (watchGroup).
func quietWhenRemoved(g *raftgroup.Group, r *mgs.Registrar) {
	select {
	case <-g.Removed():
		r.Leave()
	case <-g.Done():
	}
}

func forward(from <-chan error, to chan<- error) {
	if err, ok := <-from; ok {
		select {
		case to <- err:
		default:
		}
	}
}

func serveGRPC(g *grpc.Server, ln net.Listener, fatal chan<- error) {
	if err := g.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
		select {
		case fatal <- fmt.Errorf("gRPC server: %w", err):
		default:
		}
	}
}

func absDir(d string) string {
	if a, err := filepath.Abs(d); err == nil {
		return a
	}
	return d
}

func listen(addr string, id target.Identity, what string) (net.Listener, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := ports.Listen(addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			field := "listen"
			if what == "data" {
				field = "data_listen"
			}
			return nil, fmt.Errorf("%s: cannot listen on %s for its %s service: the port is in use by another process; stop it or change %q in %s",
				id.Name(), addr, what, field, target.IdentityFile)
		}
		return nil, fmt.Errorf("%s: listen on %s: %w", id.Name(), addr, err)
	}
	return ln, nil
}

// groupFor builds the Raft group constructor of an MDT (tr is nil for a
// single replica; replicas.go).
func groupFor(id target.Identity, dir string, db *kv.DB, log *slog.Logger, tr *raftgroup.GRPCTransport, k *kicker, ro RaftOptions, creds *pki.Creds) func(sm raftgroup.StateMachine) (*raftgroup.Group, error) {
	return func(sm raftgroup.StateMachine) (*raftgroup.Group, error) {
		return startGroup(id, dir, raftConfig(id, dir, tr, raftgroup.Config{
			GroupID: uint64(id.Index) + 1, DB: db, Prefix: []byte("\x00r"), SM: sm, Log: log,
			Name: fmt.Sprintf("MDT%04x", id.Index), Target: fmt.Sprintf("mdt%d", id.Index),
			OnLeaderChange: func(bool, uint64, uint64) { k.kick() },
			CommitWindow:   commitWindow(ro.CommitWindow),
		}, ro), creds)
	}
}

// commitWindow is RaftOptions.CommitWindow as the group takes it.
func commitWindow(d time.Duration) time.Duration {
	switch {
	case d == 0:
		return mds.DefaultCommitWindow
	case d < 0:
		return 0
	}
	return d
}

// StoreOptions are the options of the store of a target of kind k on a
// device of total bytes (0: unknown).
func StoreOptions(k target.Kind, total uint64) kv.Options {
	// An MDT's working set (directories, recent inodes, the log tail) is
	// small next to memory; a large cache keeps negative lookups of new
	// names off the disk.
	o := kv.Options{}
	if k == target.MDT {
		o = kv.Options{CacheSize: 512 << 20, MemTableSize: 64 << 20}
	}
	// The store keeps two memtables' worth of its device free (package
	// space): on a small device (a test, a tmpfs) full-size memtables
	// would keep most of it, and a 250 MB MDT was full after a hundred
	// files. A memtable of 1/64 of the device, at least 4 MiB, keeps the
	// reserve near a tenth.
	if total > 0 {
		if limit := max(total/64, 4<<20); o.MemTable() > limit {
			o.MemTableSize = limit
		}
	}
	return o
}

// damagedAdvice is what to do about a target whose store is damaged
// (kv.ErrDamaged): it cannot start as it is.
func damagedAdvice(id target.Identity, dir string) string {
	switch id.Kind {
	case target.OST:
		return fmt.Sprintf("%s cannot start. To run the file system without it, start the cluster with `nacre up --allow-missing` "+
			"(reads and writes of files with stripes on it fail until it is back). To bring it back, put back the directory %s "+
			"from a copy made while it was stopped; then run `nacre lfsck start -t layout` to find files whose objects it lacks",
			id.Label(), dir)
	case target.MDT:
		return fmt.Sprintf("%s cannot start. If it is a replica of a replicated MDT, replace it (nacre replica replace); "+
			"else move %s aside and restore the MDT from a backup (nacre mdt restore --dir %s --from FILE)",
			id.Label(), target.StoreDir(dir), dir)
	}
	return fmt.Sprintf("the MGS cannot start. If it is a replica of a replicated MGS, replace it (nacre replica replace --target mgs); "+
		"else put back the directory %s from a copy made while it was stopped", dir)
}

// StoreOptionsIn are StoreOptions for a target whose directory is dir.
func StoreOptionsIn(k target.Kind, dir string) kv.Options {
	u, err := reserve.Statfs(dir)
	if err != nil {
		return StoreOptions(k, 0)
	}
	return StoreOptions(k, u.Total)
}

// identityFile rewrites a served target's identity file, each rewrite
// from the file as it is then (recordMGS may write it while the first
// start records Started).
type identityFile struct {
	dir string
	log *slog.Logger
	mu  sync.Mutex
}

// update applies change to the identity file as it is now and saves it if
// change says it changed something.
func (f *identityFile) update(change func(id *target.Identity) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, err := target.Load(f.dir)
	if err != nil {
		return err
	}
	if !change(&id) {
		return nil
	}
	return target.Save(f.dir, id)
}

// recordMGS writes the MGS replicas a target follows now into its
// identity (mgs_node), for its next start: after every MGS replica was
// replaced (nacre replica replace), a target that restarted dialled only
// the old ones, and nothing but editing the file helped. The addresses
// recorded before are kept after the new ones: the MGS names the replicas
// registered with it, which may lack one not started yet.
func (f *identityFile) recordMGS(addrs string) {
	var joined string
	err := f.update(func(id *target.Identity) bool {
		list := strings.Split(addrs, ",")
		for _, a := range strings.Split(id.MGSNode, ",") {
			if a = strings.TrimSpace(a); a != "" && !slices.Contains(list, a) {
				list = append(list, a)
			}
		}
		joined = strings.Join(list, ",")
		if joined == id.MGSNode {
			return false
		}
		id.MGSNode = joined
		return true
	})
	if err != nil {
		f.log.Warn("record the MGS replicas for the next start", "mgs", addrs, "err", err)
	} else if joined != "" {
		f.log.Info("recorded the MGS replicas for the next start", "mgs_node", joined, "file", target.IdentityFile)
	}
}
