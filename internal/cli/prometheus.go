package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/url"
	"strings"
)

// PrometheusScrapeInterval is the scrape interval of the jobs `nacre
// status --prometheus` prints: Prometheus's own default (1m) leaves a
// Grafana rate over $__rate_interval (1m by default) one sample, and so
// no value.
const PrometheusScrapeInterval = "15s"

// StatusPrometheus prints a Prometheus scrape configuration for the
// cluster (`nacre status --prometheus`).
func StatusPrometheus(ctx context.Context, e Env) error {
	st, err := GetStatus(ctx, e.MGS, e.TLS)
	if err != nil {
		return err
	}
	return WritePrometheusConfig(e.Out, st)
}

// WritePrometheusConfig writes st as a Prometheus configuration file: a
// scrape job per target kind (FSNAME-mgs, FSNAME-mdt, FSNAME-ost, so that
// the jobs of several file systems can share one Prometheus), with a
// static config per target whose labels are target, kind, fsname and,
// for a Raft replica, replica. Every string is a JSON string, which YAML
// reads as the same string whatever it holds.
func WritePrometheusConfig(w io.Writer, st *ClusterStatus) error {
	q := func(s string) string {
		b, _ := json.Marshal(s) // a string always marshals
		return string(b)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Prometheus scrape configuration of file system %s (MGS %s),\n", q(st.Fsname), oneLine(st.MGS))
	b.WriteString("# printed by `nacre status --prometheus`: a file for `prometheus --config.file`,\n")
	b.WriteString("# or jobs to copy under scrape_configs of another. Metrics ports are kept\n")
	b.WriteString("# across restarts; print it again after adding targets.\n")
	b.WriteString("scrape_configs:\n")
	jobs := 0
	for _, kind := range []string{"mgs", "mdt", "ost"} {
		var targets []TargetStatus
		for _, ts := range st.Targets {
			if ts.Kind != kind {
				continue
			}
			if scrapeAddr(ts) == "" {
				fmt.Fprintf(&b, "  # %s: no metrics address known (not started yet?)\n", q(ts.Name))
				continue
			}
			targets = append(targets, ts)
		}
		if len(targets) == 0 {
			continue
		}
		jobs++
		fmt.Fprintf(&b, "  - job_name: %s\n", q(st.Fsname+"-"+kind))
		fmt.Fprintf(&b, "    scrape_interval: %s\n", PrometheusScrapeInterval)
		b.WriteString("    metrics_path: /metrics\n")
		// Every nacre_ series carries a target label of its own, which
		// honor_labels keeps (nacre_mgs_target_up's names the target it
		// is about); the static one labels the rest (up, go_*, process_*).
		b.WriteString("    honor_labels: true\n")
		b.WriteString("    static_configs:\n")
		for _, ts := range targets {
			fmt.Fprintf(&b, "      - targets: [%s]\n", q(scrapeAddr(ts)))
			b.WriteString("        labels:\n")
			fmt.Fprintf(&b, "          target: %s\n", q(ts.Name))
			fmt.Fprintf(&b, "          kind: %s\n", q(ts.Kind))
			fmt.Fprintf(&b, "          fsname: %s\n", q(st.Fsname))
			if ts.ReplicaID != 0 {
				fmt.Fprintf(&b, "          replica: %s\n", q(fmt.Sprint(ts.ReplicaID)))
			}
		}
	}
	out := b.String()
	if jobs == 0 {
		// A key with nothing below it is null, which Prometheus refuses.
		out = strings.Replace(out, "scrape_configs:\n", "scrape_configs: []\n", 1)
	}
	if _, err := io.WriteString(w, out); err != nil {
		return fmt.Errorf("write the Prometheus configuration: %w", err)
	}
	return nil
}

// scrapeAddr is the host:port Prometheus scrapes a target at ("" if it
// has no metrics URL). A metrics listener on every address (0.0.0.0,
// [::]) is reached at the host of the target's own address, or at the
// host name it registered with.
func scrapeAddr(ts TargetStatus) string {
	u, err := url.Parse(ts.MetricsURL)
	if ts.MetricsURL == "" || err != nil || u.Host == "" {
		return ""
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil || !unspecified(host) {
		return u.Host
	}
	if h, _, err := net.SplitHostPort(ts.Addr); err == nil && !unspecified(h) {
		return net.JoinHostPort(h, port)
	}
	if ts.Host != "" {
		return net.JoinHostPort(ts.Host, port)
	}
	return u.Host
}

func unspecified(host string) bool {
	if host == "" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsUnspecified()
}

// oneLine keeps a value on its comment's line.
func oneLine(s string) string {
	return strings.NewReplacer("\n", " ", "\r", " ").Replace(s)
}
