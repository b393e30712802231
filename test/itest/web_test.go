package itest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fid"
	"nacre/internal/webui"
	"nacre/test/testcluster"
	"nacre/test/wait"
)

// TestWebPageShowsTargetsAndMovingRates: `nacre status --web` prints the
// MGS's page; loaded in headless Chromium while a client creates and
// writes files, the page names every target and shows a metadata rate
// that is not 0 and a history that moves from one load to the next.
// /api/cluster, which the page draws from, gives the same figures.
func TestWebPageShowsTargetsAndMovingRates(t *testing.T) {
	if _, err := exec.LookPath("chromium"); err != nil {
		t.Fatal("chromium is not installed (Debian package chromium; scripts/install-deps.sh installs it)")
	}
	cl := testcluster.Start(t, testcluster.Options{OSTs: 2})
	out, err := cl.Run("status", "--web")
	if err != nil {
		t.Fatalf("status --web: %v\n%s", err, out)
	}
	url := strings.TrimSpace(out)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, webui.Path) {
		t.Fatalf("status --web printed %q, want http://127.0.0.1:PORT%s", out, webui.Path)
	}
	for _, args := range [][]string{{"status", "--web", "--json"}, {"status", "--json"}} {
		out, err := cl.Run(args...)
		var doc struct {
			WebURL string `json:"web_url"`
		}
		if err != nil || json.Unmarshal([]byte(out), &doc) != nil || doc.WebURL != url {
			t.Fatalf("%s: web_url %q (%v), want %q\n%s", strings.Join(args, " "), doc.WebURL, err, url, out)
		}
	}
	targets := []string{"MGS", "nacre-MDT0000", "nacre-OST0000", "nacre-OST0001"}

	stop := generateLoad(t, cl)
	defer stop()

	// The first viewer starts the MGS scraping; rates need two scrapes.
	first := dumpDOM(t, url)
	for _, name := range targets {
		if !strings.Contains(first, fmt.Sprintf(`data-target="%s"`, name)) {
			t.Fatalf("the page does not list %s:\n%s", name, first)
		}
	}
	var second, third string
	if !wait.Poll(30*time.Second, func() bool { second = dumpDOM(t, url); return domRate(t, second, "rate-mds-ops") > 0 }) {
		t.Fatalf("the page shows no metadata operations while a client creates files:\n%s", second)
	}
	time.Sleep(1500 * time.Millisecond)
	third = dumpDOM(t, url)
	if domRate(t, third, "rate-mds-ops") <= 0 {
		t.Fatalf("the metadata rate fell to 0 under load:\n%s", third)
	}
	if a, b := sparkPoints(second, "spark-mds-ops"), sparkPoints(third, "spark-mds-ops"); a == b {
		t.Fatalf("the metadata history did not move in 1.5 s: %q", b)
	}

	doc := apiCluster(t, strings.TrimSuffix(url, webui.Path)+webui.APIPath)
	var names []string
	for _, ts := range doc.Targets {
		names = append(names, ts.Name)
		if ts.State != "up" || ts.Rates == nil {
			t.Errorf("/api/cluster: %s state %q, rates %+v; want up, with rates", ts.Name, ts.State, ts.Rates)
		}
	}
	if strings.Join(names, " ") != strings.Join(targets, " ") {
		t.Fatalf("/api/cluster targets %v, want %v", names, targets)
	}
	if doc.Totals == nil || doc.Totals.MDSOps <= 0 || doc.Totals.Written <= 0 || len(doc.History) < 2 {
		t.Fatalf("/api/cluster under load: totals %+v, %d history points; want metadata ops and data written, and a history", doc.Totals, len(doc.History))
	}
}

// generateLoad creates and writes small files until stopped.
func generateLoad(t *testing.T, cl *testcluster.Cluster) (stop func()) {
	c := cl.Client(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		buf := make([]byte, 64<<10)
		for i := 0; ctx.Err() == nil; i++ {
			ino, _, err := c.Create(ctx, fid.Root, fmt.Sprint("load", i), 0o644, client.CreateOpts{Layout: &pb.Layout{StripeCount: 1}})
			if err != nil {
				if ctx.Err() == nil {
					t.Errorf("load: create: %v", err)
				}
				return
			}
			f := c.OpenInode(ino)
			if _, err := f.WriteAt(ctx, buf, 0); err != nil && ctx.Err() == nil {
				t.Errorf("load: write: %v", err)
			}
			f.Close(context.Background())
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// dumpDOM loads url in headless Chromium, lets its script run for two
// seconds of the page's time, and returns the DOM it drew. Chromium runs
// in a process group of its own, killed by its id if it hangs.
func dumpDOM(t *testing.T, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "chromium", "--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir="+t.TempDir(),
		"--virtual-time-budget=2000", "--dump-dom", url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium --dump-dom %s: %v\n%s", url, err, stderr.String())
	}
	return string(out)
}

// domRate reads the number the page shows in the element with id.
func domRate(t *testing.T, dom, id string) float64 {
	t.Helper()
	m := regexp.MustCompile(`id="` + id + `"[^>]*>([^<]*)<`).FindStringSubmatch(dom)
	if m == nil {
		t.Fatalf("no element %s in the page:\n%s", id, dom)
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(m[1]), 64)
	if err != nil {
		return 0 // "–": no rate yet
	}
	return v
}

// sparkPoints are the points of the sparkline in the element with id.
func sparkPoints(dom, id string) string {
	i := strings.Index(dom, `id="`+id+`"`)
	if i < 0 {
		return ""
	}
	m := regexp.MustCompile(`<polyline points="([^"]*)"`).FindStringSubmatch(dom[i:])
	if m == nil {
		return ""
	}
	return m[1]
}

func apiCluster(t *testing.T, url string) *webui.Cluster {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	var doc webui.Cluster
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return &doc
}
