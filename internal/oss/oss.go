// Package oss is the object storage server: the network front ends of one
// OST. It serves the OSS gRPC service (handshake, precreate, orphan
// cleanup, destroy, statfs and the checker's batched GetObjects) for MDSs
// and tools, and the framed bulk-data protocol of internal/bulk for
// clients, both over one internal/ost.Store. It owns no state of its own:
// everything durable is in the store.
//
// Metrics (prefix nacre_ost_, constant label target="<fsname>-OSTxxxx"):
// ops_total, op_errors_total and op_duration_seconds by api (wire, grpc)
// and op; read_bytes_total and write_bytes_total; precreated_objects_total;
// objects; crc_errors_total; data_connections. With Config.InFlight it
// also counts requests being served in nacre_rpc_inflight{proto="grpc"|"bulk"}.
// The table of every server's metrics: docs/architecture.md §7.
package oss

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	"nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/diskio"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/kv"
	"nacre/internal/netguard"
	"nacre/internal/obs"
	"nacre/internal/ost"
	"nacre/internal/pki"
	"nacre/internal/target"
	"nacre/internal/version"
)

// Config describes one OSS.
type Config struct {
	Dir  string          // the OST's target directory
	ID   target.Identity // its identity (checked against Dir)
	Log  *slog.Logger    // nil: discard
	Reg  *prometheus.Registry
	GRPC net.Listener // control service
	Data net.Listener // wire protocol
	// InFlight, if set, counts the requests being served, by protocol
	// ("grpc", "bulk"): nacre_rpc_inflight of internal/obs.
	InFlight *prometheus.GaugeVec
	// KV: the store's options (serve sizes the memtable, and so the
	// space reserve, to the device: serve.StoreOptionsIn).
	KV kv.Options
	// Disk counts what the data files write to the device (nil: not
	// counted).
	Disk *diskio.Counter
	// MaxConnsPerPeer bounds the connections one peer IP holds open on
	// the data port (bulk.ServerOptions.MaxConnsPerPeer).
	MaxConnsPerPeer int
	// TLS, if set, makes both ports TLS with these credentials
	// (internal/pki): only peers of the cluster's CA are served.
	TLS *pki.Creds
	// Warn logs refused peers (nil: a Warner of Log's).
	Warn *netguard.Warner
}

// stopTimeout bounds how long Stop waits for gRPC calls in flight.
const stopTimeout = 10 * time.Second

// Server is a running OSS.
type Server struct {
	id       target.Identity
	log      *slog.Logger
	store    *ost.Store
	grpc     *grpc.Server
	data     *bulk.Server
	m        *metrics
	reg      prometheus.Registerer
	grpcDone chan struct{}
	grpcAddr string
	dataAddr string
	stopOnce sync.Once
}

// Start opens the OST in cfg.Dir and serves it on cfg.GRPC and cfg.Data.
// On error the listeners are closed.
func Start(cfg Config) (*Server, error) {
	closeListeners := func() {
		if cfg.GRPC != nil {
			cfg.GRPC.Close()
		}
		if cfg.Data != nil {
			cfg.Data.Close()
		}
	}
	if cfg.GRPC == nil || cfg.Data == nil {
		closeListeners()
		return nil, fmt.Errorf("start OSS for %s: need both a gRPC and a data listener", cfg.Dir)
	}
	base := cfg.Log
	if base == nil {
		base = obs.Discard()
	}
	log := base                                                                                 // serve already names the target in every line
	store, err := ost.Open(cfg.Dir, cfg.ID, ost.Options{Log: base, KV: cfg.KV, Disk: cfg.Disk}) // the store adds the target itself
	if err != nil {
		closeListeners()
		return nil, fmt.Errorf("start OSS: %w", err)
	}
	id := store.Identity()
	s := &Server{
		id:       id,
		log:      log,
		store:    store,
		m:        newMetrics(id.Name()),
		grpcDone: make(chan struct{}),
		grpcAddr: cfg.GRPC.Addr().String(),
		dataAddr: cfg.Data.Addr().String(),
	}
	wo := bulk.ServerOptions{
		Fsname:  id.Fsname,
		Index:   id.Index,
		Epoch:   store.Epoch(),
		Log:     log,
		Observe: s.m.observeWire,

		MaxConnsPerPeer: cfg.MaxConnsPerPeer,
	}
	warn := cfg.Warn
	if warn == nil {
		warn = netguard.NewWarner(log, 0)
	}
	rpcOpts := []grpcx.ServerOption{grpcx.WithServerTLS(cfg.TLS, warn)}
	if cfg.TLS != nil {
		wo.TLS = cfg.TLS.ServerConfig()
	}
	if cfg.InFlight != nil {
		wo.InFlight = cfg.InFlight.WithLabelValues("bulk")
		rpcOpts = append(rpcOpts, grpcx.WithInFlight(cfg.InFlight.WithLabelValues("grpc")))
	}
	s.data = bulk.Serve(cfg.Data, store, wo)
	reg := prometheus.Registerer(cfg.Reg)
	if cfg.Reg == nil {
		reg = prometheus.NewRegistry() // private: metrics still work, nobody scrapes them
	}
	if err := s.m.register(reg, store, s.data); err != nil {
		s.data.Close()
		store.Close()
		cfg.GRPC.Close()
		return nil, fmt.Errorf("start OSS %s: metrics: %w", id.Name(), err)
	}
	s.reg = reg
	s.grpc = grpcx.NewServer(s.m.observeGRPC, rpcOpts...)
	nacregrpc.RegisterOSSServer(s.grpc, &service{s: s})
	go func() {
		defer close(s.grpcDone)
		if err := s.grpc.Serve(cfg.GRPC); err != nil {
			log.Error("OSS gRPC service stopped", "addr", s.grpcAddr, "err", err)
		}
	}()
	log.Info("OSS started", "grpc", s.grpcAddr, "data", s.dataAddr, "objects", store.Objects())
	return s, nil
}

// GRPCAddr and DataAddr are the addresses the server listens on.
func (s *Server) GRPCAddr() string { return s.grpcAddr }
func (s *Server) DataAddr() string { return s.dataAddr }

// Store is the object store served (for in-process tools and tests).
func (s *Server) Store() *ost.Store { return s.store }

// Statfs reports the target's space and objects; on error it logs and
// returns zeros, for callers that only display it.
func (s *Server) Statfs() *nacrepb.Statfs {
	st, err := s.store.Statfs()
	if err != nil {
		s.log.Warn("statfs failed", "err", err)
		return &nacrepb.Statfs{}
	}
	return st
}

// Stop stops both services, letting calls in flight finish (up to a
// timeout), then closes the store. It is safe to call more than once.
func (s *Server) Stop() {
	s.stopOnce.Do(func() {
		stopped := make(chan struct{})
		go func() {
			s.grpc.GracefulStop()
			close(stopped)
		}()
		t := time.NewTimer(stopTimeout)
		select {
		case <-stopped:
		case <-t.C:
			s.log.Warn("gRPC calls still in flight at stop; cancelling them", "after", stopTimeout)
			s.grpc.Stop()
			<-stopped
		}
		t.Stop()
		<-s.grpcDone
		if err := s.data.Close(); err != nil {
			s.log.Warn("data service stopped uncleanly", "err", err)
		}
		if err := s.store.Close(); err != nil {
			s.log.Error("closing the object store failed", "err", err)
		}
		s.m.unregister(s.reg)
		s.log.Info("OSS stopped")
	})
}

// service implements nacregrpc.OSSServer over the store.
type service struct {
	nacregrpc.UnimplementedOSSServer
	s *Server
}

// storeErr translates a store error for a caller: the errno decides the
// code, and a store shutting down is Unavailable, so that callers retry
// elsewhere or later.
func storeErr(err error) error {
	if errors.Is(err, ost.ErrClosed) {
		return errno.New(errno.Unavailable, err.Error())
	}
	return errno.From(err)
}

func (v *service) Hello(ctx context.Context, req *nacrepb.HelloRequest) (*nacrepb.HelloReply, error) {
	id := v.s.id
	if req.ProtocolVersion != 0 && req.ProtocolVersion != version.Protocol {
		return nil, errno.VersionMismatch(fmt.Sprint(req.ProtocolVersion), version.Protocol, peerName(req.Who), id.Name())
	}
	if req.Fsname != "" && req.Fsname != id.Fsname {
		return nil, errno.Errorf(errno.FailedPrecondition, "%s expects file system %q, but this is %s of file system %q",
			peerName(req.Who), req.Fsname, id.Label(), id.Fsname)
	}
	v.s.log.Debug("hello", "peer", peerName(req.Who))
	return &nacrepb.HelloReply{
		ProtocolVersion: version.Protocol,
		Fsname:          id.Fsname,
		Kind:            nacrepb.TargetKind_TARGET_OST,
		Index:           id.Index,
		Uuid:            id.UUID,
	}, nil
}

func peerName(who string) string {
	if who == "" {
		return "the peer"
	}
	return who
}

func (v *service) Precreate(ctx context.Context, req *nacrepb.PrecreateRequest) (*nacrepb.PrecreateReply, error) {
	end, err := v.s.store.Precreate(req.Seq, req.Start, req.Count)
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.PrecreateReply{End: end}, nil
}

func (v *service) Cleanup(ctx context.Context, req *nacrepb.CleanupRequest) (*nacrepb.CleanupReply, error) {
	destroyed, last, err := v.s.store.Cleanup(req.Seq, req.From)
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.CleanupReply{Destroyed: destroyed, LastId: last}, nil
}

func (v *service) Destroy(ctx context.Context, req *nacrepb.DestroyRequest) (*nacrepb.DestroyReply, error) {
	objs, err := v.objects("destroy", req.Objects)
	if err != nil {
		return nil, err
	}
	n, err := v.s.store.Destroy(objs)
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.DestroyReply{Destroyed: n}, nil
}

func (v *service) Statfs(ctx context.Context, req *nacrepb.StatfsRequest) (*nacrepb.StatfsReply, error) {
	st, err := v.s.store.Statfs()
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.StatfsReply{Statfs: st}, nil
}

func (v *service) GetObjects(ctx context.Context, req *nacrepb.GetObjectsRequest) (*nacrepb.GetObjectsReply, error) {
	objs, err := v.objects("get", req.Objects)
	if err != nil {
		return nil, err
	}
	attrs, err := v.s.store.GetObjects(objs)
	if err != nil {
		return nil, storeErr(err)
	}
	return &nacrepb.GetObjectsReply{Attrs: attrs}, nil
}

// objects converts layout slots to object ids, refusing any that names
// another OST: acting on the wrong target's numbering would destroy or
// report unrelated objects.
func (v *service) objects(op string, in []*nacrepb.StripeObject) ([]fid.ObjID, error) {
	out := make([]fid.ObjID, len(in))
	for i, o := range in {
		if o.GetOst() != v.s.id.Index {
			return nil, errno.Errorf(errno.InvalidArgument, "%s objects: entry %d names OST%04x object 0x%x:0x%x, but this is %s",
				op, i, o.GetOst(), o.GetSeq(), o.GetOid(), v.s.id.Label())
		}
		out[i] = fid.ObjID{Seq: o.Seq, Oid: o.Oid}
	}
	return out, nil
}

// metrics are the OSS's Prometheus metrics.
type metrics struct {
	ops, errs  *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	readBytes  prometheus.Counter
	writeBytes prometheus.Counter
	registered []prometheus.Collector
	labels     prometheus.Labels
}

func newMetrics(name string) *metrics {
	l := prometheus.Labels{"target": name}
	return &metrics{
		labels: l,
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacre_ost_ops_total", Help: "Requests served, by API and operation.", ConstLabels: l,
		}, []string{"api", "op"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "nacre_ost_op_errors_total", Help: "Requests that failed, by API and operation.", ConstLabels: l,
		}, []string{"api", "op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nacre_ost_op_duration_seconds", Help: "Time to serve a request, by API and operation.",
			ConstLabels: l, Buckets: obs.LatencyBuckets,
		}, []string{"api", "op"}),
		readBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacre_ost_read_bytes_total", Help: "Object data bytes read by clients.", ConstLabels: l,
		}),
		writeBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacre_ost_write_bytes_total", Help: "Object data bytes written by clients.", ConstLabels: l,
		}),
	}
}

func (m *metrics) register(reg prometheus.Registerer, store *ost.Store, data *bulk.Server) error {
	cs := []prometheus.Collector{
		m.ops, m.errs, m.latency, m.readBytes, m.writeBytes,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "nacre_ost_precreated_objects_total", Help: "Objects created by precreate requests.", ConstLabels: m.labels,
		}, func() float64 { return float64(store.Precreated()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nacre_ost_objects", Help: "Objects on the target.", ConstLabels: m.labels,
		}, func() float64 { return float64(store.Objects()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "nacre_ost_crc_errors_total", Help: "Request payloads that failed their CRC32C.", ConstLabels: m.labels,
		}, func() float64 { return float64(data.Stats().CRCErrors) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "nacre_ost_data_connections", Help: "Open data (wire protocol) connections.", ConstLabels: m.labels,
		}, func() float64 { return float64(data.Stats().Open) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "nacre_net_refused_connections_total", Help: "Connections closed at once because their peer IP held as many open as it may, by port.",
			ConstLabels: prometheus.Labels{"target": m.labels["target"], "port": "data"},
		}, func() float64 { return float64(data.Stats().Refused) }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			m.unregister(reg)
			return err
		}
		m.registered = append(m.registered, c)
	}
	return nil
}

// unregister removes the metrics, so that a restarted OSS can register
// them again on the same registry.
func (m *metrics) unregister(reg prometheus.Registerer) {
	for _, c := range m.registered {
		reg.Unregister(c)
	}
	m.registered = nil
}

func (m *metrics) observe(api, op string, d time.Duration, err error) {
	m.ops.WithLabelValues(api, op).Inc()
	m.latency.WithLabelValues(api, op).Observe(d.Seconds())
	if err != nil {
		m.errs.WithLabelValues(api, op).Inc()
	}
}

func (m *metrics) observeWire(op bulk.Op, d time.Duration, n int, err error) {
	m.observe("bulk", op.String(), d, err)
	switch {
	case err != nil:
	case op == bulk.OpRead:
		m.readBytes.Add(float64(n))
	case op == bulk.OpWrite:
		m.writeBytes.Add(float64(n))
	}
}

func (m *metrics) observeGRPC(method string, d time.Duration, err error) {
	m.observe("grpc", strings.ToLower(method[strings.LastIndexByte(method, '/')+1:]), d, err)
}
