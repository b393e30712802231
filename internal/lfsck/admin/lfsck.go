package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/lfsck"
)

// StartOptions are the options of nacre lfsck start.
type StartOptions struct {
	Req   *pb.LfsckStartRequest
	MDT   int
	All   bool
	Wait  bool
	JSON  bool
	Delay time.Duration // between progress lines
}

// start starts the checker on the MDTs asked, one message line each on
// e.Out, and with Wait waits until it ends, showing progress on a
// terminal.
func start(ctx context.Context, e cli.Env, o StartOptions) error {
	k, idxs, err := connectMDTs(ctx, e, o.MDT, o.All)
	if err != nil {
		return err
	}
	defer k.close()
	if o.All {
		req := proto.Clone(o.Req).(*pb.LfsckStartRequest)
		req.AllTargets = true
		o.Req = req
	}
	if err := k.each(ctx, idxs, func(_ uint32, lc nacregrpc.LfsckClient) error {
		rep, err := lc.Start(ctx, o.Req)
		if err == nil {
			fmt.Fprintln(e.Out, rep.Message)
		}
		return err
	}); err != nil {
		return err
	}
	if !o.Wait {
		return nil
	}
	return waitStarted(ctx, e, k, idxs, o.JSON)
}

// WaitStarted waits for the run just started on MDT mdtIdx (or all) and
// prints its result, as Start with Wait does.
func WaitStarted(ctx context.Context, e cli.Env, mdtIdx int, all, jsonOut bool) error {
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, all)
	if err != nil {
		return err
	}
	defer k.close()
	return waitStarted(ctx, e, k, idxs, jsonOut)
}

func waitStarted(ctx context.Context, e cli.Env, k *conn, idxs []uint32, jsonOut bool) error {
	reps, err := waitDone(ctx, e, k, idxs, jsonOut)
	if err != nil {
		return err
	}
	return unfinished(reps)
}

// waitDone polls until no MDT runs the checker; on a terminal it shows
// one progress line, rewritten in place.
func waitDone(ctx context.Context, e cli.Env, k *conn, idxs []uint32, jsonOut bool) ([]*lfsck.Report, error) {
	tty := cli.IsTerminal(e.Stderr())
	var last []*lfsck.Report
	poll := 20 * time.Millisecond
	for {
		reps, err := k.query(ctx, idxs)
		if err != nil {
			return nil, err
		}
		last = reps
		running := false
		var parts []string
		for _, r := range reps {
			if r.Running {
				running = true
			}
			for _, name := range []string{"scrub", "namespace", "layout"} {
				c := r.Components[name]
				if c == nil || !contains(r.Params.Types, name) {
					continue
				}
				parts = append(parts, fmt.Sprintf("%s %s %d checked %.0f/s found %d repaired %d", name, c.Status, c.Checked,
					c.RealTimeSpeed, c.Inconsistent, c.Repaired))
			}
		}
		if tty {
			fmt.Fprintf(e.Stderr(), "\r\033[K%s", strings.Join(parts, " | "))
		}
		if !running {
			if tty {
				fmt.Fprintln(e.Stderr())
			}
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
		poll = min(poll*3/2, 500*time.Millisecond)
	}
	return last, printReports(e, last, jsonOut)
}

// unfinished is the error start --wait ends with when a component of the run did
// not complete (failed, partial, stopped by someone else), so that scripts
// can tell from the exit status.
func unfinished(reps []*lfsck.Report) error {
	var bad []string
	for _, r := range reps {
		for _, name := range []string{"scrub", "namespace", "layout"} {
			c := r.Components[name]
			if c == nil || !contains(r.Params.Types, name) || c.Status == "completed" {
				continue
			}
			what := fmt.Sprintf("%s %s on %s", name, c.Status, r.Target)
			if c.Failed > 0 {
				what += fmt.Sprintf(" (%d items failed)", c.Failed)
			}
			bad = append(bad, what)
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return fmt.Errorf("the check did not complete: %s; see `nacre lfsck query` and the MDT's log", strings.Join(bad, ", "))
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// Stop stops the checker on the MDTs asked; it returns once they stopped.
func Stop(ctx context.Context, e cli.Env, mdtIdx int, all bool) error {
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, all)
	if err != nil {
		return err
	}
	defer k.close()
	return k.each(ctx, idxs, func(i uint32, lc nacregrpc.LfsckClient) error {
		rep, err := lc.Stop(ctx, &pb.LfsckStopRequest{})
		if err == nil {
			fmt.Fprintf(e.Out, "MDT%04x: %s\n", i, rep.Message)
		}
		return err
	})
}

// Set changes the speed limit or window of a running check.
func Set(ctx context.Context, e cli.Env, mdtIdx int, all bool, speed *uint64, window *uint32) error {
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, all)
	if err != nil {
		return err
	}
	defer k.close()
	return k.each(ctx, idxs, func(idx uint32, lc nacregrpc.LfsckClient) error {
		if _, err := lc.Set(ctx, &pb.LfsckSetRequest{Speed: speed, Window: window}); err != nil {
			return err
		}
		var what []string
		if speed != nil {
			limit := fmt.Sprintf("%d objects/s", *speed)
			if *speed == 0 {
				limit = "none"
			}
			what = append(what, "speed limit "+limit)
		}
		if window != nil {
			what = append(what, fmt.Sprintf("window %d", *window))
		}
		fmt.Fprintf(e.Out, "MDT%04x: %s\n", idx, strings.Join(what, ", "))
		return nil
	})
}

// Query prints the state of the checker of the MDTs asked.
func Query(ctx context.Context, e cli.Env, mdtIdx int, all, jsonOut, wait bool) error {
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, all)
	if err != nil {
		return err
	}
	defer k.close()
	if wait {
		_, err := waitDone(ctx, e, k, idxs, jsonOut)
		return err
	}
	reps, err := k.query(ctx, idxs)
	if err != nil {
		return err
	}
	return printReports(e, reps, jsonOut)
}

// AllReports is the JSON of a query of several MDTs (-A): each MDT's
// report, and the figures added over them.
type AllReports struct {
	MDTs  []*lfsck.Report                   `json:"mdts"`
	Total map[string]*lfsck.ComponentReport `json:"total"`
}

// totalOf adds the figures of each component over reports: checked,
// found, repaired, failed, and each kind's counts (the statuses and
// phases are each MDT's own).
func totalOf(reps []*lfsck.Report) map[string]*lfsck.ComponentReport {
	out := map[string]*lfsck.ComponentReport{}
	for _, r := range reps {
		for name, c := range r.Components {
			t := out[name]
			if t == nil {
				t = &lfsck.ComponentReport{Counters: map[string]lfsck.Count{}, Stats: map[string]uint64{}}
				out[name] = t
			}
			t.Checked += c.Checked
			t.Inconsistent += c.Inconsistent
			t.Repaired += c.Repaired
			t.Failed += c.Failed
			for k, v := range c.Counters {
				n := t.Counters[k]
				n.Inconsistent += v.Inconsistent
				n.Repaired += v.Repaired
				t.Counters[k] = n
			}
			for k, v := range c.Stats {
				t.Stats[k] += v
			}
		}
	}
	return out
}

func printReports(e cli.Env, reps []*lfsck.Report, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(e.Out)
		enc.SetIndent("", "  ")
		if len(reps) == 1 {
			return enc.Encode(reps[0])
		}
		return enc.Encode(AllReports{MDTs: reps, Total: totalOf(reps)})
	}
	for _, r := range reps {
		state := "idle"
		if r.Running {
			state = "running"
		}
		fmt.Fprintf(e.Out, "%s: checker %s; last run: %s", r.Target, state, strings.Join(r.Params.Types, ","))
		if r.Params.DryRun {
			fmt.Fprint(e.Out, " (dry run)")
		}
		fmt.Fprintln(e.Out)
		for _, name := range []string{"scrub", "namespace", "layout"} {
			c := r.Components[name]
			if c == nil {
				continue
			}
			fmt.Fprintf(e.Out, "  %-9s %-16s checked %-9d inconsistent %-6d repaired %-6d failed %d", name, c.Status, c.Checked, c.Inconsistent, c.Repaired, c.Failed)
			var kinds []string
			for kn, cnt := range c.Counters {
				kinds = append(kinds, fmt.Sprintf("%s %d/%d", kn, cnt.Inconsistent, cnt.Repaired))
			}
			sort.Strings(kinds)
			if len(kinds) > 0 {
				fmt.Fprintf(e.Out, "  (%s)", strings.Join(kinds, ", "))
			}
			if len(c.IncompleteOSTs) > 0 {
				// "partial" alone does not say what was not checked.
				var osts []string
				for _, o := range c.IncompleteOSTs {
					osts = append(osts, fmt.Sprintf("OST%04x", o))
				}
				fmt.Fprintf(e.Out, "  (not checked on %s: down or not answering; run again once up)", strings.Join(osts, ", "))
			}
			fmt.Fprintln(e.Out)
		}
	}
	if len(reps) > 1 {
		fmt.Fprintf(e.Out, "total of %d MDTs:\n", len(reps))
		total := totalOf(reps)
		for _, name := range []string{"scrub", "namespace", "layout"} {
			if c := total[name]; c != nil {
				fmt.Fprintf(e.Out, "  %-9s %-16s checked %-9d inconsistent %-6d repaired %-6d failed %d\n", name, "", c.Checked, c.Inconsistent, c.Repaired, c.Failed)
			}
		}
	}
	return nil
}

// Status prints one component of one MDT in full.
func Status(ctx context.Context, e cli.Env, mdtIdx int, component string, jsonOut bool) error {
	if !lfsck.IsComponentName(component) {
		return fmt.Errorf("-t %q: give one of scrub, namespace, layout", component)
	}
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, false)
	if err != nil {
		return err
	}
	defer k.close()
	reps, err := k.query(ctx, idxs)
	if err != nil {
		return err
	}
	c := reps[0].Components[component]
	if jsonOut {
		enc := json.NewEncoder(e.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(c)
	}
	lfsck.WriteText(e.Out, component, c)
	return nil
}

// Digests prints the digest of every key of every target's store (the
// MDT's and each OST's): a dry run must leave them all unchanged.
func Digests(ctx context.Context, e cli.Env) error {
	k, err := connect(ctx, e)
	if err != nil {
		return err
	}
	defer k.close()
	var lines []string
	for _, t := range k.cfg.Targets {
		if t.State != "up" {
			continue
		}
		var d *pb.LfsckDigestReply
		switch t.Kind {
		case pb.TargetKind_TARGET_MDT:
			if err := k.call(ctx, t.Index, func(lc nacregrpc.LfsckClient) (err error) {
				d, err = lc.Digest(ctx, &pb.LfsckDigestRequest{})
				return err
			}); err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("MDT%04x %016x %d", t.Index, d.Digest, d.Keys))
		case pb.TargetKind_TARGET_OST:
			cc, err := k.dial(t.Addr)
			if err != nil {
				return err
			}
			if d, err = nacregrpc.NewOSSClient(cc).LfsckDigest(ctx, &pb.LfsckDigestRequest{}); err != nil {
				return err
			}
			lines = append(lines, fmt.Sprintf("OST%04x %016x %d", t.Index, d.Digest, d.Keys))
		}
	}
	sort.Strings(lines)
	for _, l := range lines {
		fmt.Fprintln(e.Out, l)
	}
	return nil
}

// LfsckStarted is what `nacre lfsck start --json` prints without --wait.
type LfsckStarted struct {
	Started []LfsckStartedMDT `json:"started"`
}

// LfsckStartedMDT is one MDT the checker was started on.
type LfsckStartedMDT struct {
	MDT     int    `json:"mdt"`
	Target  string `json:"target,omitempty"`
	Message string `json:"message"`
}

// Start starts the checker on the MDTs asked, and with Wait waits until
// it ends, showing progress on a terminal. With JSON, standard output is
// one JSON document: the final report with Wait (the MDTs' "started"
// messages go to standard error), else a LfsckStarted.
func Start(ctx context.Context, e cli.Env, o StartOptions) error {
	if !o.JSON {
		return start(ctx, e, o)
	}
	var msgs bytes.Buffer
	so := o
	so.Wait = false
	quiet := e
	quiet.Out = &msgs
	if err := start(ctx, quiet, so); err != nil {
		e.Stderr().Write(msgs.Bytes()) // the MDTs started before the failure
		return err
	}
	lines := strings.Split(strings.TrimRight(msgs.String(), "\n"), "\n")
	if o.Wait {
		for _, l := range lines {
			if l != "" {
				e.Stderr().Write([]byte(l + "\n"))
			}
		}
		// The report of the run just started: wait as Start does.
		return WaitStarted(ctx, e, o.MDT, o.All, true)
	}
	// start starts one MDT after the other in index order, one
	// message line each; the names come from the MGS.
	st, _ := cli.GetStatus(ctx, e.MGS, e.TLS)
	var mdts []LfsckStartedMDT
	if !o.All {
		mdts = []LfsckStartedMDT{{MDT: o.MDT}}
	} else if st != nil {
		seen := map[uint32]bool{}
		for _, t := range st.Targets {
			if t.Kind == "mdt" && !seen[t.Index] {
				seen[t.Index] = true
				mdts = append(mdts, LfsckStartedMDT{MDT: int(t.Index)})
			}
		}
		sort.Slice(mdts, func(i, j int) bool { return mdts[i].MDT < mdts[j].MDT })
	}
	if len(mdts) != len(lines) {
		mdts = make([]LfsckStartedMDT, len(lines))
		for i := range mdts {
			mdts[i].MDT = -1 // unknown
		}
	}
	out := LfsckStarted{Started: []LfsckStartedMDT{}}
	for i, l := range lines {
		m := mdts[i]
		m.Message = l
		if st != nil && m.MDT >= 0 {
			m.Target = fmt.Sprintf("%s-MDT%04x", st.Fsname, m.MDT)
		}
		out.Started = append(out.Started, m)
	}
	return cli.JSON(e.Out, out)
}
