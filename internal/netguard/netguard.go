// Package netguard holds what Nacre's servers share against bad input at
// their ports: a listener that bounds the connections each peer IP holds
// open (LimitPeers), a logger that writes at most one line per peer per
// interval (Warner), and a read that grows its buffer as a frame's bytes
// arrive instead of reserving what the frame's header claims (ReadGrowing).
//
// The servers trust their network (docs/architecture.md, "Who may do what:
// the trust model"); these bound what a confused or hostile process on
// that network costs them: memory, descriptors and log lines. None of
// them is global: each server makes its own from its options.
package netguard

import (
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultMaxPerPeer is the connections a peer IP may hold open on one
// port when a server's options leave it 0. A client node holds a few
// dozen per port (16 per OST per client, one per concurrent metadata
// call), and tests run many clients on one loopback address.
const DefaultMaxPerPeer = 256

// DefaultMaxLoopback is the default bound of a loopback peer: on one
// machine every client, mount and benchmark worker is the same peer IP
// (a mount under load holds a hundred metadata connections, `nacre bench
// md --workers 64` thousands), and the bound is there to keep a remote
// host from exhausting the server, which the reservation caps and
// timeouts do for local ones.
const DefaultMaxLoopback = 4096

// Listener is a listener whose Accept closes, and counts, connections
// from a peer IP that already holds its maximum open.
type Listener struct {
	net.Listener
	max     int
	loopMax int // max for a loopback peer
	warn    *Warner
	what    string

	mu      sync.Mutex
	open    map[string]int
	refused atomic.Uint64
}

// LimitPeers wraps ln so that each peer IP holds at most max connections
// open at once (max 0: DefaultMaxPerPeer; negative: no bound, and ln is
// only counted). A connection over the bound is closed at once and logged
// through w (nil: not logged), as a refusal of what (e.g. "data port").
func LimitPeers(ln net.Listener, max int, w *Warner, what string) *Listener {
	loopMax := max
	if max == 0 {
		max, loopMax = DefaultMaxPerPeer, DefaultMaxLoopback
	}
	return &Listener{Listener: ln, max: max, loopMax: loopMax, warn: w, what: what, open: map[string]int{}}
}

// Accept returns the next connection from a peer under its bound.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := PeerIP(c.RemoteAddr())
		limit := l.max
		if a, err := netip.ParseAddr(ip); err == nil && a.IsLoopback() {
			limit = l.loopMax
		}
		l.mu.Lock()
		n := l.open[ip]
		ok := limit < 0 || n < limit
		if ok {
			l.open[ip] = n + 1
		}
		l.mu.Unlock()
		if !ok {
			// Counted before the close: a peer that sees its connection
			// closed finds it counted.
			l.refused.Add(1)
			c.Close()
			if l.warn != nil {
				l.warn.Warn(ip, "connection refused: the peer holds too many open", "port", l.what, "open", n, "limit", limit)
			}
			continue
		}
		return &conn{Conn: c, l: l, ip: ip}, nil
	}
}

// Refused is how many connections Accept closed for their peer's bound.
func (l *Listener) Refused() uint64 { return l.refused.Load() }

// Open is how many connections the peer IP ip holds open now.
func (l *Listener) Open(ip string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open[ip]
}

func (l *Listener) release(ip string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[ip] <= 1 {
		// Gone peers leave no entry: the map stays as large as the
		// peers connected now.
		delete(l.open, ip)
	} else {
		l.open[ip]--
	}
}

// conn gives its peer's slot back when it closes (once, however often
// it is closed).
type conn struct {
	net.Conn
	l    *Listener
	ip   string
	once sync.Once
}

func (c *conn) Close() error {
	c.once.Do(func() { c.l.release(c.ip) })
	return c.Conn.Close()
}

// SetNoDelay keeps TCP_NODELAY reachable through the wrapper.
func (c *conn) SetNoDelay(b bool) error {
	if nd, ok := c.Conn.(interface{ SetNoDelay(bool) error }); ok {
		return nd.SetNoDelay(b)
	}
	return nil
}

// PeerIP is the IP of a remote address (the whole address if it has no
// port).
func PeerIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	s := a.String()
	if h, _, err := net.SplitHostPort(s); err == nil {
		return h
	}
	return s
}

// DefaultWarnEvery is the interval of a Warner made with 0.
const DefaultWarnEvery = 10 * time.Second

// maxWarnPeers bounds the peers a Warner remembers; past it, lines of new
// peers are dropped (and counted) until old entries expire.
const maxWarnPeers = 4096

// Warner logs warnings about peers, at most one line per peer per
// interval: a peer that sends garbage on every connection it opens must
// not fill the server's log (and its disk). The line that ends a quiet
// interval says how many were suppressed during it.
type Warner struct {
	log   *slog.Logger
	every time.Duration
	now   func() time.Time

	mu      sync.Mutex
	peers   map[string]*warnState
	dropped uint64 // lines of peers that found the table full
}

type warnState struct {
	last       time.Time
	suppressed uint64
}

// NewWarner returns a Warner logging to log at most once per peer every
// every (0: DefaultWarnEvery).
func NewWarner(log *slog.Logger, every time.Duration) *Warner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if every <= 0 {
		every = DefaultWarnEvery
	}
	return &Warner{log: log, every: every, now: time.Now, peers: map[string]*warnState{}}
}

// Warn logs msg with args about peer (an IP, PeerIP) unless a line about
// that peer was logged less than the interval ago.
func (w *Warner) Warn(peer, msg string, args ...any) {
	now := w.now()
	w.mu.Lock()
	st := w.peers[peer]
	if st == nil {
		if len(w.peers) >= maxWarnPeers {
			for p, s := range w.peers {
				if now.Sub(s.last) >= w.every && s.suppressed == 0 {
					delete(w.peers, p)
				}
			}
		}
		if len(w.peers) >= maxWarnPeers {
			w.dropped++
			w.mu.Unlock()
			return
		}
		st = &warnState{}
		w.peers[peer] = st
	} else if now.Sub(st.last) < w.every {
		st.suppressed++
		w.mu.Unlock()
		return
	}
	suppressed := st.suppressed
	st.last, st.suppressed = now, 0
	dropped := w.dropped
	w.dropped = 0
	w.mu.Unlock()
	args = append(args, "peer", peer)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed, "suppressed_over", w.every.String())
	}
	if dropped > 0 {
		args = append(args, "dropped_other_peers", dropped)
	}
	w.log.Warn(msg, args...)
}

// growFrom is the buffer ReadGrowing starts from when the one it is given
// is smaller than the frame.
const growFrom = 64 << 10

// ReadGrowing reads n bytes from r into buf, reused if it holds n, and
// returns them. Otherwise it starts from a buffer of at most 64 KiB and
// doubles it as the bytes arrive, so that a header claiming n bytes
// reserves no more than twice what has come (and at least 64 KiB): a
// peer that sends a 16 MiB length and stops costs 64 KiB, not 16 MiB.
// The copies made growing add up to less than n.
func ReadGrowing(r io.Reader, buf []byte, n int) ([]byte, error) {
	if cap(buf) >= n {
		buf = buf[:n]
		_, err := io.ReadFull(r, buf)
		return buf, err
	}
	b := buf[:cap(buf)]
	if len(b) < min(n, growFrom) {
		b = make([]byte, min(n, growFrom))
	}
	got := 0
	for {
		m, err := io.ReadFull(r, b[got:])
		got += m
		if err != nil {
			return b[:got], err
		}
		if got == n {
			return b, nil
		}
		nb := make([]byte, min(n, 2*len(b)))
		copy(nb, b[:got])
		b = nb
	}
}
