package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// promConfig is the part of a Prometheus configuration that `nacre
// status --prometheus` writes.
type promConfig struct {
	ScrapeConfigs []struct {
		JobName        string `json:"job_name"`
		ScrapeInterval string `json:"scrape_interval"`
		MetricsPath    string `json:"metrics_path"`
		HonorLabels    bool   `json:"honor_labels"`
		StaticConfigs  []struct {
			Targets []string          `json:"targets"`
			Labels  map[string]string `json:"labels"`
		} `json:"static_configs"`
	} `json:"scrape_configs"`
}

// parseYAML reads a YAML document with PyYAML (bash scripts/install-deps.sh
// installs it) and gives it back as JSON, strictly decoded into v: a key
// this test does not know fails it.
func parseYAML(t *testing.T, doc string, v any) {
	t.Helper()
	cmd := exec.Command("python3", "-c", "import json, sys, yaml; json.dump(yaml.safe_load(sys.stdin), sys.stdout)")
	cmd.Stdin = strings.NewReader(doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("python3 with PyYAML could not read the configuration (bash scripts/install-deps.sh installs PyYAML): %v\n%s\n%s", err, stderr.String(), doc)
	}
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("the configuration read as YAML is %s: %v\n%s", out, err, doc)
	}
}

// checkWithPromtool runs `promtool check config` on the configuration
// when Prometheus is installed (Debian's prometheus, too large for CI's
// install): the structure is checked above in any case.
func checkWithPromtool(t *testing.T, doc string) {
	t.Helper()
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Log("promtool is not installed (apt-get install prometheus): the configuration's structure is checked, not Prometheus's reading of it")
		return
	}
	f := filepath.Join(t.TempDir(), "prometheus.yml")
	if err := os.WriteFile(f, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("promtool", "check", "config", f).CombinedOutput(); err != nil {
		t.Fatalf("promtool check config: %v\n%s\n%s", err, out, doc)
	}
}

// TestPrometheusConfigHasAJobPerKindAndATargetEach: `nacre status
// --prometheus` is YAML with a job per target kind, a static config per
// target with its labels, replicas told apart, a wildcard metrics address
// replaced by the target's host, and a target without a metrics address
// left out, named in a comment.
func TestPrometheusConfigHasAJobPerKindAndATargetEach(t *testing.T) {
	st := &ClusterStatus{Fsname: "fs1", MGS: "10.0.0.1:7000", Targets: []TargetStatus{
		{Name: "MGS", Kind: "mgs", Addr: "10.0.0.1:7000", MetricsURL: "http://10.0.0.1:7001/metrics"},
		{Name: "fs1-MDT0000", Kind: "mdt", ReplicaID: 1, Addr: "10.0.0.2:7000", MetricsURL: "http://10.0.0.2:7002/metrics"},
		{Name: "fs1-MDT0000", Kind: "mdt", ReplicaID: 2, Addr: "10.0.0.3:7000", MetricsURL: "http://10.0.0.3:7002/metrics"},
		{Name: "fs1-OST0000", Kind: "ost", Addr: "10.0.0.4:7000", MetricsURL: "http://0.0.0.0:7003/metrics"},
		{Name: "fs1-OST0001", Kind: "ost", Addr: "[::]:7000", Host: "oss2", MetricsURL: "http://[::]:7004/metrics"},
		{Name: "fs1-OST0002", Kind: "ost", Addr: "10.0.0.6:7000"},
	}}
	var b strings.Builder
	if err := WritePrometheusConfig(&b, st); err != nil {
		t.Fatal(err)
	}
	doc := b.String()
	var cfg promConfig
	parseYAML(t, doc, &cfg)
	type target struct {
		addr   string
		labels map[string]string
	}
	got := map[string][]target{}
	var jobs []string
	for _, j := range cfg.ScrapeConfigs {
		jobs = append(jobs, j.JobName)
		if j.ScrapeInterval != PrometheusScrapeInterval || j.MetricsPath != "/metrics" || !j.HonorLabels {
			t.Errorf("job %s: interval %q, path %q, honor_labels %v", j.JobName, j.ScrapeInterval, j.MetricsPath, j.HonorLabels)
		}
		for _, sc := range j.StaticConfigs {
			if len(sc.Targets) != 1 {
				t.Errorf("job %s: a static config with targets %v, want one each", j.JobName, sc.Targets)
				continue
			}
			got[j.JobName] = append(got[j.JobName], target{sc.Targets[0], sc.Labels})
		}
	}
	if want := []string{"fs1-mgs", "fs1-mdt", "fs1-ost"}; !reflect.DeepEqual(jobs, want) {
		t.Fatalf("jobs %v, want %v\n%s", jobs, want, doc)
	}
	l := func(name, kind, replica string) map[string]string {
		m := map[string]string{"target": name, "kind": kind, "fsname": "fs1"}
		if replica != "" {
			m["replica"] = replica
		}
		return m
	}
	want := map[string][]target{
		"fs1-mgs": {{"10.0.0.1:7001", l("MGS", "mgs", "")}},
		"fs1-mdt": {{"10.0.0.2:7002", l("fs1-MDT0000", "mdt", "1")}, {"10.0.0.3:7002", l("fs1-MDT0000", "mdt", "2")}},
		"fs1-ost": {{"10.0.0.4:7003", l("fs1-OST0000", "ost", "")}, {"oss2:7004", l("fs1-OST0001", "ost", "")}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("targets %+v\nwant %+v\n%s", got, want, doc)
	}
	if !strings.Contains(doc, `# "fs1-OST0002": no metrics address known`) {
		t.Errorf("the target without a metrics address is not named in a comment:\n%s", doc)
	}
	checkWithPromtool(t, doc)

	// No target with a metrics address: an empty list, not null.
	var empty strings.Builder
	if err := WritePrometheusConfig(&empty, &ClusterStatus{Fsname: "fs1", MGS: "10.0.0.1:7000"}); err != nil {
		t.Fatal(err)
	}
	var none promConfig
	parseYAML(t, empty.String(), &none)
	if none.ScrapeConfigs == nil || len(none.ScrapeConfigs) != 0 {
		t.Errorf("no targets: %+v\n%s", none, empty.String())
	}
	checkWithPromtool(t, empty.String())
}
