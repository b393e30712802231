// Package obs is Nacre's observability plumbing: structured logs (slog),
// one Prometheus registry per server (never the global one, so several
// servers can live in one test process), and the HTTP endpoint that serves
// /metrics and /debug/pprof (and, on the MGS, the web page of
// internal/webui).
package obs

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"nacre/internal/ports"
)

// NewLogger returns a logger writing one line per event; json selects the
// JSON handler (servers) over the text handler (people).
func NewLogger(w io.Writer, json bool, level slog.Level) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if json {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// ParseLevel reads a log level: debug, info, warn or error (any case);
// anything else is info. cmd/nacre reads it from NACRE_LOG_LEVEL.
func ParseLevel(s string) slog.Level {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug
	case "warn":
		return slog.LevelWarn
	case "error":
		return slog.LevelError
	}
	return slog.LevelInfo
}

// Discard is a logger that drops everything (tests).
func Discard() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// NewRegistry returns a registry with the Go runtime and process collectors.
func NewRegistry() *prometheus.Registry {
	r := prometheus.NewRegistry()
	r.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// HTTP is a running metrics endpoint.
type HTTP struct {
	srv *http.Server
	ln  net.Listener
	mux *http.ServeMux
}

// Handle serves handler at pattern beside /metrics: the MGS adds its web
// page (internal/webui) once it has started, on the port it has already
// registered with.
func (h *HTTP) Handle(pattern string, handler http.Handler) { h.mux.Handle(pattern, handler) }

// Addr is the endpoint's listen address.
func (h *HTTP) Addr() string { return h.ln.Addr().String() }

// URL is the metrics URL.
func (h *HTTP) URL() string { return "http://" + h.Addr() + "/metrics" }

// Close stops the endpoint.
func (h *HTTP) Close() error { return h.srv.Close() }

// Serve starts /metrics and /debug/pprof on addr.
func Serve(addr string, reg *prometheus.Registry) (*HTTP, error) {
	ln, err := ports.Listen(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics endpoint on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			slog.Error("metrics endpoint stopped", "addr", addr, "err", err)
		}
	}()
	return &HTTP{srv: srv, ln: ln, mux: mux}, nil
}

// LatencyBuckets are histogram buckets from 10 µs to ~10 s.
var LatencyBuckets = prometheus.ExponentialBuckets(10e-6, 2.5, 16)
