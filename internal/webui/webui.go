// Package webui is the MGS's live page of the cluster: every target with
// its state, replica role, space and CPU; operation rates with their last
// two minutes; the checker's progress; and recent events (targets that
// went down or came back, leader changes). The page is three static files
// embedded in the binary (page/), served at /ui/ on the MGS's metrics
// listener, and draws itself from /api/cluster, which it polls every
// second.
//
// The MGS scrapes its targets' metrics pages itself (server side), so
// that a browser talks to one address, and keeps the history, so that a
// page opened now shows the last two minutes at once. It scrapes only
// while someone watches (an /api/cluster request in the last minute);
// it asks for the targets' states every second regardless, because the
// events are about what happened while nobody watched.
//
// The page has no TLS and no authentication, so it is served only when the
// listener is on a loopback address, and answers only requests that name
// a loopback host (a page elsewhere that a browser visits cannot reach it
// through a DNS name rebound to 127.0.0.1).
package webui

import (
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/obs"
)

// Path is where the page is served; APIPath is its JSON document.
const (
	Path    = "/ui/"
	APIPath = "/api/cluster"
)

//go:embed page
var page embed.FS

// Config configures the page.
type Config struct {
	// Listen is the address of the listener the page is served on.
	Listen string
	// Cluster returns the targets as the MGS knows them
	// (mgs.Server.GetConfig, which a follower forwards to the leader).
	Cluster func(ctx context.Context) (*pb.ClusterConfig, error)
	// Fetch scrapes a target's metrics page; nil is obs.FetchMatching
	// of the series the page shows.
	Fetch func(ctx context.Context, url string) (*obs.Scrape, error)
	// Interval is the time between two looks at the cluster (1 s if 0).
	Interval time.Duration
	// Watched is how long after the last /api/cluster request the MGS
	// keeps scraping its targets (1 min if 0).
	Watched time.Duration
	Now     func() time.Time
	Log     *slog.Logger
}

// Server serves the page and keeps what it shows.
type Server struct {
	cfg Config
	// refused says why the page is not served ("" when it is).
	refused string

	// tick serialises looks at the cluster (Run's and a request's).
	tick sync.Mutex

	mu        sync.Mutex
	lastAsked time.Time
	doc       *Cluster // the latest look; never changed once published
	col       collector
}

// New returns the page's server; Attach serves it, Run keeps it current.
func New(cfg Config) *Server {
	if cfg.Interval == 0 {
		cfg.Interval = time.Second
	}
	if cfg.Watched == 0 {
		cfg.Watched = time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Fetch == nil {
		cfg.Fetch = func(ctx context.Context, url string) (*obs.Scrape, error) {
			return obs.FetchMatching(ctx, url, wanted)
		}
	}
	s := &Server{cfg: cfg, col: newCollector()}
	if !Loopback(cfg.Listen) {
		s.refused = fmt.Sprintf("the Nacre web page is served on a loopback address only, and this MGS's metrics listener is on %s: "+
			"the page has no TLS and no authentication yet. Set \"metrics_listen\" to 127.0.0.1:PORT in the MGS's nacre-target.json, "+
			"and reach it from elsewhere through an SSH tunnel (ssh -L PORT:127.0.0.1:PORT MGS-HOST)", cfg.Listen)
	}
	return s
}

// Loopback reports whether a listen address (host:port) accepts
// connections from this machine only: a loopback IP or "localhost". An
// empty host is every interface.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL is the page's address on an MGS whose metrics listener is
// metricsAddr, or why it has none.
func URL(metricsAddr string) (string, error) {
	if metricsAddr == "" {
		return "", fmt.Errorf("the MGS has no metrics listener recorded, so no web page")
	}
	if !Loopback(metricsAddr) {
		return "", fmt.Errorf("the MGS's metrics listener is on %s, not a loopback address: the web page is served on loopback only (it has no TLS yet)", metricsAddr)
	}
	return "http://" + metricsAddr + Path, nil
}

// Handler is what Attach registers on.
type Handler interface {
	Handle(pattern string, h http.Handler)
}

// Attach serves the page and its API on mux (the MGS's obs.HTTP).
func (s *Server) Attach(mux Handler) {
	files, err := fs.Sub(page, "page")
	if err != nil {
		panic(err) // the embedded directory is part of the binary
	}
	mux.Handle(Path, s.guard(http.StripPrefix(Path, http.FileServerFS(files))))
	mux.Handle(APIPath, s.guard(http.HandlerFunc(s.serveAPI)))
}

// guard refuses every request while the page is refused, and requests
// that name a host other than a loopback one.
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.refused != "" {
			http.Error(w, s.refused, http.StatusForbidden)
			return
		}
		if !Loopback(r.Host) {
			http.Error(w, fmt.Sprintf("the Nacre web page answers requests to a loopback address only (127.0.0.1, [::1], localhost), not to %q", r.Host), http.StatusForbidden)
			return
		}
		// The page loads its own script and style and nothing else.
		w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		h.ServeHTTP(w, r)
	})
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	now := s.cfg.Now()
	s.mu.Lock()
	s.lastAsked = now
	doc := s.doc
	s.mu.Unlock()
	// A first viewer, or one after a quiet spell, gets a fresh look with
	// the targets' figures rather than a page of states alone.
	if doc == nil || !doc.Scraped || now.Sub(doc.At) > 3*s.cfg.Interval {
		s.look(r.Context())
		s.mu.Lock()
		doc = s.doc
		s.mu.Unlock()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if err := json.NewEncoder(w).Encode(doc); err != nil {
		s.cfg.Log.Debug("web page: write the cluster document", "err", err)
	}
}

// Run looks at the cluster every Interval until ctx is done (at once if
// the page is refused: nobody can see it).
func (s *Server) Run(ctx context.Context) {
	if s.refused != "" {
		return
	}
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		s.look(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// look asks the MGS for the targets, notes their changes as events and,
// while someone watches, scrapes their metrics; then it publishes the
// document.
func (s *Server) look(ctx context.Context) {
	s.tick.Lock()
	defer s.tick.Unlock()
	now := s.cfg.Now()
	s.mu.Lock()
	watched := !s.lastAsked.IsZero() && now.Sub(s.lastAsked) < s.cfg.Watched
	s.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	cfg, err := s.cfg.Cluster(cctx)
	cancel()
	if ctx.Err() != nil {
		return // stopping: not an MGS that does not answer
	}
	var scrapes map[string]scrapeResult
	if err == nil && watched {
		scrapes = s.scrape(ctx, cfg)
	}
	doc := s.col.update(now, cfg, err, scrapes)
	s.mu.Lock()
	s.doc = doc
	s.mu.Unlock()
}

type scrapeResult struct {
	sc  *obs.Scrape
	err error
}

// scrape fetches the metrics page of every target that is up, at once,
// each within the interval.
func (s *Server) scrape(ctx context.Context, cfg *pb.ClusterConfig) map[string]scrapeResult {
	ctx, cancel := context.WithTimeout(ctx, max(s.cfg.Interval*9/10, 500*time.Millisecond))
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := map[string]scrapeResult{}
	for _, t := range cfg.Targets {
		if t.MetricsAddr == "" || t.State == "down" {
			continue
		}
		url := "http://" + t.MetricsAddr + "/metrics"
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc, err := s.cfg.Fetch(ctx, url)
			mu.Lock()
			out[url] = scrapeResult{sc, err}
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}
