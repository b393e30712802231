package obs

import (
	"bufio"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// ServerMetrics are the series every Nacre server exports besides its
// own: disk and network bytes of the process, and requests in flight.
type ServerMetrics struct {
	netIn, netOut atomic.Uint64
	InFlight      *prometheus.GaugeVec
}

// NewServerMetrics registers the common server series on reg. written
// reports the bytes the process's stores sent to the device (package
// internal/diskio).
func NewServerMetrics(reg *prometheus.Registry, target string, written func() uint64) *ServerMetrics {
	m := &ServerMetrics{}
	c := prometheus.Labels{"target": target}
	m.InFlight = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nacre_rpc_inflight", Help: "Requests being served now (queue depth), by protocol.", ConstLabels: c}, []string{"proto"})
	reg.MustRegister(m.InFlight,
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nacre_net_received_bytes_total", Help: "Bytes received on the server's listeners.", ConstLabels: c},
			func() float64 { return float64(m.netIn.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nacre_net_sent_bytes_total", Help: "Bytes sent on the server's listeners.", ConstLabels: c},
			func() float64 { return float64(m.netOut.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nacre_disk_read_bytes_total", Help: "Bytes the process read from storage devices (/proc/self/io read_bytes).", ConstLabels: c},
			func() float64 { return float64(procIO("read_bytes")) }),
		// Not /proc/self/io write_bytes: it counts each large folio a
		// small write dirties whole (internal/diskio).
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nacre_disk_written_bytes_total", Help: "Bytes the target's stores wrote to its device: whole pages, each once per sync.", ConstLabels: c},
			func() float64 { return float64(written()) }),
	)
	return m
}

// procIO reads one field of /proc/self/io (0 if unavailable).
func procIO(field string) uint64 {
	f, err := os.Open("/proc/self/io")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ": ")
		if ok && k == field {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// Listen wraps a listener so that its connections count bytes.
func (m *ServerMetrics) Listen(ln net.Listener) net.Listener {
	if m == nil {
		return ln
	}
	return &countingListener{Listener: ln, m: m}
}

type countingListener struct {
	net.Listener
	m *ServerMetrics
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, m: l.m}, nil
}

type countingConn struct {
	net.Conn
	m *ServerMetrics
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.m.netIn.Add(uint64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.m.netOut.Add(uint64(n))
	return n, err
}

// SetNoDelay keeps TCP_NODELAY reachable through the wrapper.
func (c *countingConn) SetNoDelay(b bool) error {
	if tc, ok := c.Conn.(*net.TCPConn); ok {
		return tc.SetNoDelay(b)
	}
	return nil
}
