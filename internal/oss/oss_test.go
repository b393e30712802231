package oss

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"nacre/api/nacregrpc"
	"nacre/api/nacrepb"
	"nacre/internal/bulk"
	"nacre/internal/errno"
	"nacre/internal/fid"
	"nacre/internal/grpcx"
	"nacre/internal/obs"
	"nacre/internal/target"
	"nacre/internal/version"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const seq = 0x100000000

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func formatOST(t *testing.T) (string, target.Identity) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ost1")
	if err := target.Format(dir, target.Identity{Fsname: "testfs", Kind: target.OST, Index: 1}); err != nil {
		t.Fatal(err)
	}
	id, err := target.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, id
}

func start(t *testing.T, dir string, id target.Identity, reg *prometheus.Registry) *Server {
	t.Helper()
	s, err := Start(Config{Dir: dir, ID: id, Log: obs.Discard(), Reg: reg, GRPC: listen(t), Data: listen(t)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// clients returns a gRPC OSS client and a wire client to s, closed at the
// end of the test.
func clients(t *testing.T, s *Server) (nacregrpc.OSSClient, *bulk.Client) {
	t.Helper()
	cc, err := grpcx.Dial(s.GRPCAddr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	wc, err := bulk.Dial(s.DataAddr(), bulk.ClientOptions{Fsname: "testfs"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { wc.Close() })
	return nacregrpc.NewOSSClient(cc), wc
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func stripes(oids ...uint64) []*nacrepb.StripeObject {
	out := make([]*nacrepb.StripeObject, len(oids))
	for i, o := range oids {
		out[i] = &nacrepb.StripeObject{Ost: 1, Seq: seq, Oid: o}
	}
	return out
}

// metric reads the value of a one-metric collector (a counter or gauge).
func metric(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 1)
	c.Collect(ch)
	close(ch)
	var pb dto.Metric
	if err := (<-ch).Write(&pb); err != nil {
		t.Fatal(err)
	}
	if pb.Counter != nil {
		return pb.Counter.GetValue()
	}
	return pb.Gauge.GetValue()
}

// TestObjectLifecycleOverBothProtocols walks an object's life as the MDS
// and a client see it: precreate over gRPC, write with a PFID over the
// wire protocol, the checker's GetObjects, orphan cleanup, destroy.
func TestObjectLifecycleOverBothProtocols(t *testing.T) {
	dir, id := formatOST(t)
	reg := prometheus.NewRegistry()
	s := start(t, dir, id, reg)
	defer s.Stop()
	oss, wc := clients(t, s)
	ctx := ctxT(t)

	hello, err := oss.Hello(ctx, &nacrepb.HelloRequest{ProtocolVersion: version.Protocol, Fsname: "testfs", Who: "mdt0000"})
	if err != nil || hello.Kind != nacrepb.TargetKind_TARGET_OST || hello.Index != 1 || hello.Uuid != id.UUID || hello.Fsname != "testfs" {
		t.Fatalf("hello: %v %v", hello, err)
	}
	pre, err := oss.Precreate(ctx, &nacrepb.PrecreateRequest{Seq: seq, Start: 1, Count: 64})
	if err != nil || pre.End != 65 {
		t.Fatalf("precreate: %v %v", pre, err)
	}

	file := fid.FID{Seq: 0x200000400, Oid: 9}
	meta := &bulk.ObjMeta{Parent: file, StripeIndex: 1, StripeSize: 1 << 20, StripeCount: 2, LayoutGen: 1, UID: 1000, GID: 1000}
	data := make([]byte, 1<<20+10)
	for i := range data {
		data[i] = byte(i)
	}
	o5 := fid.ObjID{Seq: seq, Oid: 5}
	if err := wc.Write(ctx, o5, 0, data, meta); err != nil {
		t.Fatal(err)
	}
	if err := wc.Sync(ctx, o5); err != nil {
		t.Fatal(err)
	}
	p := make([]byte, len(data))
	if n, err := wc.Read(ctx, o5, 0, p); err != nil || n != len(data) || string(p) != string(data) {
		t.Fatalf("read back: %d %v", n, err)
	}
	if a, err := wc.GetAttr(ctx, o5); err != nil || a.Size != uint64(len(data)) || !a.Exists {
		t.Fatalf("getattr: %+v %v", a, err)
	}

	got, err := oss.GetObjects(ctx, &nacrepb.GetObjectsRequest{Objects: stripes(5, 6, 999)})
	if err != nil || len(got.Attrs) != 3 {
		t.Fatalf("getobjects: %v %v", got, err)
	}
	a5 := got.Attrs[0]
	if !a5.Exists || fid.FromPB(a5.Parent) != file || a5.StripeIndex != 1 || a5.Uid != 1000 || a5.Size != uint64(len(data)) {
		t.Fatalf("object 5: %v", a5)
	}
	if !got.Attrs[1].Exists || got.Attrs[1].Parent != nil || got.Attrs[2].Exists {
		t.Fatalf("objects 6, 999: %v %v", got.Attrs[1], got.Attrs[2])
	}

	// After an MDS restart: everything from oid 1 on that was never
	// written through a layout goes; object 5 stays.
	cl, err := oss.Cleanup(ctx, &nacrepb.CleanupRequest{Seq: seq, From: 1})
	if err != nil || cl.Destroyed != 63 || cl.LastId != 5 {
		t.Fatalf("cleanup: %v %v", cl, err)
	}
	if err := wc.Write(ctx, fid.ObjID{Seq: seq, Oid: 6}, 0, []byte("x"), meta); !errors.Is(err, syscall.ENOENT) ||
		!strings.HasPrefix(err.Error(), "write OST0001 object 0x100000000:0x6 at 0: ") {
		t.Fatalf("write to a cleaned-up object: %v", err)
	}

	d, err := oss.Destroy(ctx, &nacrepb.DestroyRequest{Objects: stripes(5, 6)})
	if err != nil || d.Destroyed != 1 {
		t.Fatalf("destroy: %v %v", d, err)
	}
	if a, err := wc.GetAttr(ctx, o5); err != nil || a.Exists {
		t.Fatalf("getattr after destroy: %+v %v", a, err)
	}

	st, err := oss.Statfs(ctx, &nacrepb.StatfsRequest{})
	if err != nil || st.Statfs.BytesTotal == 0 || st.Statfs.InodesTotal == 0 {
		t.Fatalf("statfs: %v %v", st, err)
	}
	if local := s.Statfs(); local.BytesTotal != st.Statfs.BytesTotal {
		t.Fatalf("local statfs %v, remote %v", local, st.Statfs)
	}

	// The metrics saw it all.
	m := s.m
	if v := metric(t, m.writeBytes); v != float64(len(data)) {
		t.Errorf("write bytes %v, want %d", v, len(data))
	}
	if v := metric(t, m.readBytes); v != float64(len(data)) {
		t.Errorf("read bytes %v, want %d", v, len(data))
	}
	if v := metric(t, m.ops.WithLabelValues("grpc", "precreate")); v != 1 {
		t.Errorf("precreate ops %v", v)
	}
	if v := metric(t, m.errs.WithLabelValues("bulk", "write")); v != 1 {
		t.Errorf("bulk write errors %v, want 1", v)
	}
	// ...and the registry exposes them under the target's label.
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	values := map[string]float64{}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "target" && l.GetValue() == "testfs-OST0001" {
					values[f.GetName()] += mt.GetCounter().GetValue() + mt.GetGauge().GetValue()
				}
			}
		}
	}
	if values["nacre_ost_precreated_objects_total"] != 64 || values["nacre_ost_objects"] != 0 {
		t.Errorf("registry: precreated %v, objects %v; want 64, 0", values["nacre_ost_precreated_objects_total"], values["nacre_ost_objects"])
	}
}

func TestHelloRefusesAnotherFileSystemAndVersion(t *testing.T) {
	dir, id := formatOST(t)
	s := start(t, dir, id, nil)
	defer s.Stop()
	oss, _ := clients(t, s)
	ctx := ctxT(t)
	_, err := oss.Hello(ctx, &nacrepb.HelloRequest{ProtocolVersion: version.Protocol, Fsname: "otherfs", Who: "mdt0000"})
	if errno.CodeOf(err) != errno.FailedPrecondition || !strings.Contains(err.Error(), `"otherfs"`) || !strings.Contains(err.Error(), `"testfs"`) {
		t.Fatalf("hello for another file system: %v", err)
	}
	_, err = oss.Hello(ctx, &nacrepb.HelloRequest{ProtocolVersion: version.Protocol + 1, Who: "client"})
	if errno.CodeOf(err) != errno.FailedPrecondition || !strings.Contains(err.Error(), fmt.Sprintf("protocol %d", version.Protocol)) {
		t.Fatalf("hello with another version: %v", err)
	}
}

func TestRequestsNamingAnotherOSTAreRefused(t *testing.T) {
	dir, id := formatOST(t)
	s := start(t, dir, id, nil)
	defer s.Stop()
	oss, _ := clients(t, s)
	ctx := ctxT(t)
	oss.Precreate(ctx, &nacrepb.PrecreateRequest{Seq: seq, Start: 1, Count: 2})
	wrong := []*nacrepb.StripeObject{{Ost: 1, Seq: seq, Oid: 1}, {Ost: 2, Seq: seq, Oid: 2}}
	_, err := oss.Destroy(ctx, &nacrepb.DestroyRequest{Objects: wrong})
	if errno.CodeOf(err) != errno.InvalidArgument || !strings.Contains(err.Error(), "OST0002") {
		t.Fatalf("destroy naming OST0002: %v", err)
	}
	if s.Store().Objects() != 2 {
		t.Fatal("a refused destroy destroyed objects")
	}
	_, err = oss.Precreate(ctx, &nacrepb.PrecreateRequest{Seq: seq, Start: 0, Count: 2})
	if errno.CodeOf(err) != errno.InvalidArgument {
		t.Fatalf("precreate of oid 0: %v", err)
	}
}

func TestStartRefusesAnMDTDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mdt0")
	if err := target.Format(dir, target.Identity{Fsname: "testfs", Kind: target.MDT}); err != nil {
		t.Fatal(err)
	}
	g, d := listen(t), listen(t)
	_, err := Start(Config{Dir: dir, ID: target.Identity{Fsname: "testfs", Kind: target.OST}, GRPC: g, Data: d})
	if err == nil || !strings.Contains(err.Error(), "not an OST") {
		t.Fatalf("want a refusal, got %v", err)
	}
	if _, err := net.Dial("tcp", d.Addr().String()); err == nil {
		t.Fatal("listener left open after a failed start")
	}
}

// TestRestartKeepsObjectsAndMetricsRegistry stops an OSS and starts it
// again on the same directory and registry, as `nacre up` would after a
// crash of the process.
func TestRestartKeepsObjectsAndMetricsRegistry(t *testing.T) {
	dir, id := formatOST(t)
	reg := prometheus.NewRegistry()
	s := start(t, dir, id, reg)
	oss, wc := clients(t, s)
	ctx := ctxT(t)
	if _, err := oss.Precreate(ctx, &nacrepb.PrecreateRequest{Seq: seq, Start: 1, Count: 8}); err != nil {
		t.Fatal(err)
	}
	o := fid.ObjID{Seq: seq, Oid: 3}
	if err := wc.Write(ctx, o, 0, []byte("survives"), &bulk.ObjMeta{Parent: fid.FID{Seq: 0x200000400, Oid: 1}}); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	s.Stop() // idempotent
	if _, err := wc.GetAttr(ctx, o); err == nil {
		t.Fatal("data service still answers after Stop")
	}

	s = start(t, dir, id, reg)
	defer s.Stop()
	oss, wc = clients(t, s)
	p := make([]byte, 8)
	if n, err := wc.Read(ctx, o, 0, p); err != nil || string(p[:n]) != "survives" {
		t.Fatalf("after restart: %q %v", p[:n], err)
	}
	if s.Store().Objects() != 8 {
		t.Fatalf("%d objects after restart", s.Store().Objects())
	}
}

// benchServer starts an OSS with one precreated object for benchmarks.
func benchServer(b *testing.B) (*bulk.Client, fid.ObjID) {
	dir := filepath.Join(b.TempDir(), "ost1")
	if err := target.Format(dir, target.Identity{Fsname: "testfs", Kind: target.OST, Index: 1}); err != nil {
		b.Fatal(err)
	}
	id, _ := target.Load(dir)
	g, _ := net.Listen("tcp", "127.0.0.1:0")
	d, _ := net.Listen("tcp", "127.0.0.1:0")
	s, err := Start(Config{Dir: dir, ID: id, GRPC: g, Data: d})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Stop)
	if _, err := s.Store().Precreate(seq, 1, 1); err != nil {
		b.Fatal(err)
	}
	wc, err := bulk.Dial(s.DataAddr(), bulk.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { wc.Close() })
	return wc, fid.ObjID{Seq: seq, Oid: 1}
}

// BenchmarkOSTWrite1MiB: 1 MiB writes over the wire protocol into a real
// object file (page cache; no sync), cycling over 64 MiB.
func BenchmarkOSTWrite1MiB(b *testing.B) {
	wc, o := benchServer(b)
	data := make([]byte, 1<<20)
	ctx := context.Background()
	b.SetBytes(1 << 20)
	for i := 0; b.Loop(); i++ {
		if err := wc.Write(ctx, o, uint64(i%64)<<20, data, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOSTRead1MiB: 1 MiB reads of a 64 MiB object in the page cache.
func BenchmarkOSTRead1MiB(b *testing.B) {
	wc, o := benchServer(b)
	p := make([]byte, 1<<20)
	ctx := context.Background()
	for i := range 64 {
		if err := wc.Write(ctx, o, uint64(i)<<20, p, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(1 << 20)
	for i := 0; b.Loop(); i++ {
		if n, err := wc.Read(ctx, o, uint64(i%64)<<20, p); err != nil || n != len(p) {
			b.Fatal(n, err)
		}
	}
}
