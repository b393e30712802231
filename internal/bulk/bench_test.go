package bulk

import (
	"context"
	"testing"

	"nacre/internal/fid"
	"nacre/internal/pki"
)

// benchHandler stores writes into one preallocated object, so that the
// benchmark measures the protocol, not map growth.
type benchHandler struct {
	memHandler
}

func newBenchHandler(size int) *benchHandler {
	h := &benchHandler{memHandler: *newMem(objA)}
	h.objs[objA].data = pattern(size, 0)
	return h
}

func (h *benchHandler) Write(o fid.ObjID, off uint64, data []byte, meta *ObjMeta) error {
	// Lock as a real target would, but copy without growing.
	h.mu.Lock()
	copy(h.objs[objA].data[off:], data)
	h.mu.Unlock()
	return nil
}

const mib = 1 << 20

// BenchmarkWrite1MiB: one client goroutine streaming 1 MiB writes over
// loopback into an in-memory handler (CRC32C on both ends).
func BenchmarkWrite1MiB(b *testing.B) {
	_, c := serve(b, newBenchHandler(64*mib), ServerOptions{}, ClientOptions{})
	data := pattern(mib, 1)
	ctx := context.Background()
	b.SetBytes(mib)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := c.Write(ctx, objA, uint64(i%64)*mib, data, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRead1MiB: the same for 1 MiB reads.
func BenchmarkRead1MiB(b *testing.B) {
	_, c := serve(b, newBenchHandler(64*mib), ServerOptions{}, ClientOptions{})
	p := make([]byte, mib)
	ctx := context.Background()
	b.SetBytes(mib)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if n, err := c.Read(ctx, objA, uint64(i%64)*mib, p); err != nil || n != mib {
			b.Fatal(n, err)
		}
	}
}

// BenchmarkWrite1MiBParallel: several goroutines sharing one client, so
// the pool's connections carry requests in parallel.
func BenchmarkWrite1MiBParallel(b *testing.B) {
	_, c := serve(b, newBenchHandler(64*mib), ServerOptions{}, ClientOptions{Conns: 4})
	ctx := context.Background()
	b.SetBytes(mib)
	b.SetParallelism(2)
	b.RunParallel(func(pb *testing.PB) {
		data := pattern(mib, 2)
		i := 0
		for pb.Next() {
			if err := c.Write(ctx, objA, uint64(i%64)*mib, data, nil); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

// BenchmarkGetAttr: a small request's round trip.
func BenchmarkGetAttr(b *testing.B) {
	_, c := serve(b, newMem(objA), ServerOptions{}, ClientOptions{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.GetAttr(ctx, objA); err != nil {
			b.Fatal(err)
		}
	}
}

// benchTLS are a server's and a client's TLS configurations of one CA.
func benchTLS(b *testing.B) (ServerOptions, ClientOptions) {
	caDir := b.TempDir() + "/ca"
	ca, _, err := pki.InitCA(caDir, "bench")
	if err != nil {
		b.Fatal(err)
	}
	load := func(name string, role pki.Role) *pki.Creds {
		d := b.TempDir() + "/" + name
		if err := ca.Issue(d, pki.Request{Name: name, Role: role}); err != nil {
			b.Fatal(err)
		}
		c, err := pki.Load(d)
		if err != nil {
			b.Fatal(err)
		}
		return c
	}
	return ServerOptions{TLS: load("ost", pki.RoleNode).ServerConfig()}, ClientOptions{TLS: load("client", pki.RoleClient).ClientConfig()}
}

// BenchmarkWrite1MiBTLS and BenchmarkRead1MiBTLS: BenchmarkWrite1MiB and
// BenchmarkRead1MiB over TLS, for the cost of TLS alone.
func BenchmarkWrite1MiBTLS(b *testing.B) {
	so, co := benchTLS(b)
	_, c := serve(b, newBenchHandler(64*mib), so, co)
	data := pattern(mib, 1)
	ctx := context.Background()
	b.SetBytes(mib)
	for i := 0; b.Loop(); i++ {
		if err := c.Write(ctx, objA, uint64(i%64)*mib, data, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRead1MiBTLS(b *testing.B) {
	so, co := benchTLS(b)
	_, c := serve(b, newBenchHandler(64*mib), so, co)
	p := make([]byte, mib)
	ctx := context.Background()
	b.SetBytes(mib)
	for i := 0; b.Loop(); i++ {
		if n, err := c.Read(ctx, objA, uint64(i%64)*mib, p); err != nil || n != mib {
			b.Fatal(n, err)
		}
	}
}
