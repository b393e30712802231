// Package admin is the client side of `nacre lfsck`, `nacre fault` and
// `nacre mdt backup|restore`: it finds the targets through the MGS, calls
// their Lfsck, Fault and OSS services, and formats what they answer. The
// checker itself is internal/lfsck (it runs in the MDS).
package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/client"
	"nacre/internal/fault"
	"nacre/internal/fid"
	"nacre/internal/kv"
	"nacre/internal/lfsck"
	"nacre/internal/mdt"
	"nacre/internal/raftgroup"
	"nacre/internal/raftlog"
	"nacre/internal/rpc"
	"nacre/internal/target"
	"nacre/internal/target/proc"
)

// Env is what every command needs.
type Env struct {
	MGS string
	Out io.Writer
	Err io.Writer
	// FollowerReads spreads the reads of the command's client over the
	// replicas of each MDT (client.Config.FollowerReads).
	FollowerReads bool
}

// conn is a connection to the cluster's targets.
type conn struct {
	c   *client.Client
	cfg *pb.ClusterConfig

	mu  sync.Mutex // a Conn is shared by goroutines (a bench polls while it runs)
	ccs map[string]*grpc.ClientConn
}

func connect(ctx context.Context, e Env) (*conn, error) {
	if e.MGS == "" {
		return nil, fmt.Errorf("no MGS address: pass --mgs HOST:PORT or set NACRE_MGS (`nacre up` prints it)")
	}
	c, err := client.New(ctx, client.Config{MGS: e.MGS, Timeout: 30 * time.Second, FollowerReads: e.FollowerReads})
	if err != nil {
		return nil, err
	}
	cfg, err := c.Config(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &conn{c: c, cfg: cfg}, nil
}

// connectMDTs connects and lists the MDTs asked (one index, or all).
func connectMDTs(ctx context.Context, e Env, one int, all bool) (*conn, []uint32, error) {
	k, err := connect(ctx, e)
	if err != nil {
		return nil, nil, err
	}
	idxs, err := k.mdts(one, all)
	if err != nil {
		k.close()
		return nil, nil, err
	}
	return k, idxs, nil
}

func (k *conn) close() {
	k.mu.Lock()
	for _, cc := range k.ccs {
		cc.Close()
	}
	k.ccs = nil
	k.mu.Unlock()
	k.c.Close()
}

// dial returns the connection to addr, made once.
func (k *conn) dial(addr string) (*grpc.ClientConn, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if cc := k.ccs[addr]; cc != nil {
		return cc, nil
	}
	cc, err := rpc.Dial(addr)
	if err != nil {
		return nil, err
	}
	if k.ccs == nil {
		k.ccs = map[string]*grpc.ClientConn{}
	}
	k.ccs[addr] = cc
	return cc, nil
}

// mdts lists the MDT indexes (all of them, or the one asked).
func (k *conn) mdts(one int, all bool) ([]uint32, error) {
	seen := map[uint32]bool{}
	for _, t := range k.cfg.Targets {
		if t.Kind == pb.TargetKind_TARGET_MDT {
			seen[t.Index] = true
		}
	}
	var out []uint32
	for i := range seen {
		if all || int(i) == one {
			out = append(out, i)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a] < out[b] })
	if len(out) == 0 {
		return nil, fmt.Errorf("no MDT %d (MDT%04x) in the configuration", one, one)
	}
	return out, nil
}

// mdtAddr is the gRPC address to try next for MDT idx: its leader, else a
// replica that is up, else any, passing over the addresses in tried
// (unless every one was).
func (k *conn) mdtAddr(idx uint32, tried map[string]bool) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	var leader, up, other []string
	for _, t := range k.cfg.Targets {
		if t.Kind != pb.TargetKind_TARGET_MDT || t.Index != idx || t.Addr == "" {
			continue
		}
		switch {
		case t.Leader:
			leader = append(leader, t.Addr)
		case t.State == "up":
			up = append(up, t.Addr)
		default:
			other = append(other, t.Addr)
		}
	}
	if len(leader)+len(up) == 0 {
		return "", fmt.Errorf("MDT%04x is not up; check `nacre status`", idx)
	}
	all := append(append(leader, up...), other...)
	for _, a := range all {
		if !tried[a] {
			return a, nil
		}
	}
	return all[0], nil
}

// isMDT says whether addr serves a replica of MDT idx.
func (k *conn) isMDT(idx uint32, addr string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, t := range k.cfg.Targets {
		if t.Kind == pb.TargetKind_TARGET_MDT && t.Index == idx && t.Addr == addr {
			return true
		}
	}
	return false
}

// failoverWait is how long a command follows MDT leadership: an election
// after a leader died takes 1-2 s, and the MGS shows a killed leader up
// (and leading) until it has missed its heartbeats for 5 s.
const failoverWait = 15 * time.Second

// call runs fn with the checker service of MDT idx's leader. A replica
// that does not answer or does not lead is passed over, to the leader it
// names or the next replica, with the configuration read again, for up to
// failoverWait; an error of fn is prefixed with the MDT's name, and one
// that could not reach the MDT says so as the client commands do.
func (k *conn) call(ctx context.Context, idx uint32, fn func(cli nacregrpc.LfsckClient) error) error {
	deadline := time.Now().Add(failoverWait)
	tried := map[string]bool{}
	next := ""
	for pause := 50 * time.Millisecond; ; pause = min(2*pause, 500*time.Millisecond) {
		addr := next
		if addr == "" {
			var err error
			if addr, err = k.mdtAddr(idx, tried); err != nil {
				return err
			}
		}
		cc, err := k.dial(addr)
		if err == nil {
			err = fn(nacregrpc.NewLfsckClient(cc))
		}
		if err == nil {
			return nil
		}
		_, hint, notLeader := raftgroup.LeaderHint(err)
		down := notAnswering(idx, addr, err)
		if (!notLeader && down == nil) || time.Now().After(deadline) {
			return mdtError(idx, down, err)
		}
		tried[addr] = true
		next = ""
		if hint != "" && hint != addr && k.isMDT(idx, hint) {
			next = hint
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		if cfg, err := k.c.Config(ctx); err == nil {
			k.mu.Lock()
			k.cfg = cfg
			k.mu.Unlock()
		}
	}
}

// mdtError is the error of a call to MDT idx that failed for good: down
// (notAnswering) when the MDT could not be reached, else what it answered,
// named once ("MDT0000: not the leader ...", not "MDT0000: MDT0000: ...").
func mdtError(idx uint32, down, err error) error {
	var u *unreachableError
	if errors.As(down, &u) && connCause(err) != status.Convert(err).Message() {
		return down
	}
	name := fmt.Sprintf("MDT%04x", idx)
	if s, ok := status.FromError(err); ok && (strings.HasPrefix(s.Message(), name+":") || strings.Contains(strings.SplitN(s.Message(), " ", 2)[0], "-"+name+":")) {
		return &answeredError{msg: s.Message(), err: err}
	}
	return fmt.Errorf("%s: %w", name, err)
}

// answeredError is an MDT's own answer, which names it already.
type answeredError struct {
	msg string
	err error
}

func (e *answeredError) Error() string { return e.msg }
func (e *answeredError) Unwrap() error { return e.err }

// each calls fn with the checker service of every MDT in idxs, in order
// (see call).
func (k *conn) each(ctx context.Context, idxs []uint32, fn func(i uint32, cli nacregrpc.LfsckClient) error) error {
	for _, i := range idxs {
		if err := k.call(ctx, i, func(cli nacregrpc.LfsckClient) error { return fn(i, cli) }); err != nil {
			return err
		}
	}
	return nil
}

// unreachableError is a call that could not reach an MDT.
type unreachableError struct {
	msg string
	err error
}

func (e *unreachableError) Error() string { return e.msg }
func (e *unreachableError) Unwrap() error { return e.err }

// notAnswering is err, of a call to MDT idx at addr, as the client
// commands say an MDT that cannot be reached ("MDT0000 (ADDR) does not
// answer: connection refused; check `nacre status`", not gRPC's
// "connection error: desc = ..."), or nil if the MDT answered: the MGS
// shows a target up until it misses its heartbeats, so one just killed is
// dialled before it is known down.
func notAnswering(idx uint32, addr string, err error) error {
	if status.Code(err) != codes.Unavailable {
		return nil
	}
	if _, _, ok := raftgroup.LeaderHint(err); ok {
		return nil // a replica that answered that it does not lead
	}
	return &unreachableError{msg: fmt.Sprintf("MDT%04x (%s) does not answer: %s; check `nacre status`", idx, addr, connCause(err)), err: err}
}

// connCause is why a connection failed, without gRPC's layers around it.
func connCause(err error) string {
	msg := status.Convert(err).Message()
	for _, s := range []string{"connection refused", "connection reset by peer", "no route to host",
		"network is unreachable", "host is unreachable", "i/o timeout", "broken pipe", "EOF"} {
		if strings.Contains(msg, s) {
			return s
		}
	}
	return msg
}

// StartOptions are the options of nacre lfsck start.
type StartOptions struct {
	Req   *pb.LfsckStartRequest
	MDT   int
	All   bool
	Wait  bool
	JSON  bool
	Delay time.Duration // between progress lines
}

// Start starts the checker on the MDTs asked, and with Wait waits until
// it ends, showing progress on a terminal.
func Start(ctx context.Context, e Env, o StartOptions) error {
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
	if err := k.each(ctx, idxs, func(_ uint32, cli nacregrpc.LfsckClient) error {
		rep, err := cli.Start(ctx, o.Req)
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
func WaitStarted(ctx context.Context, e Env, mdtIdx int, all, jsonOut bool) error {
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, all)
	if err != nil {
		return err
	}
	defer k.close()
	return waitStarted(ctx, e, k, idxs, jsonOut)
}

func waitStarted(ctx context.Context, e Env, k *conn, idxs []uint32, jsonOut bool) error {
	reps, err := waitDone(ctx, e, k, idxs, jsonOut)
	if err != nil {
		return err
	}
	return unfinished(reps)
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

// waitDone polls until no MDT runs the checker; on a terminal it shows
// one progress line, rewritten in place.
func waitDone(ctx context.Context, e Env, k *conn, idxs []uint32, jsonOut bool) ([]*lfsck.Report, error) {
	tty := isTerminal(e.Err)
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
			fmt.Fprintf(e.Err, "\r\033[K%s", strings.Join(parts, " | "))
		}
		if !running {
			if tty {
				fmt.Fprintln(e.Err)
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

func (k *conn) query(ctx context.Context, idxs []uint32) ([]*lfsck.Report, error) {
	var out []*lfsck.Report
	err := k.each(ctx, idxs, func(_ uint32, cli nacregrpc.LfsckClient) error {
		rep, err := cli.Query(ctx, &pb.LfsckQueryRequest{})
		if err != nil {
			return err
		}
		r := &lfsck.Report{}
		if err := json.Unmarshal(rep.Json, r); err != nil {
			return fmt.Errorf("bad report: %w", err)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Stop stops the checker on the MDTs asked; it returns once they stopped.
func Stop(ctx context.Context, e Env, mdtIdx int, all bool) error {
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, all)
	if err != nil {
		return err
	}
	defer k.close()
	return k.each(ctx, idxs, func(i uint32, cli nacregrpc.LfsckClient) error {
		rep, err := cli.Stop(ctx, &pb.LfsckStopRequest{})
		if err == nil {
			fmt.Fprintf(e.Out, "MDT%04x: %s\n", i, rep.Message)
		}
		return err
	})
}

// Set changes the speed limit or window of a running check.
func Set(ctx context.Context, e Env, mdtIdx int, all bool, speed *uint64, window *uint32) error {
	k, idxs, err := connectMDTs(ctx, e, mdtIdx, all)
	if err != nil {
		return err
	}
	defer k.close()
	return k.each(ctx, idxs, func(idx uint32, cli nacregrpc.LfsckClient) error {
		if _, err := cli.Set(ctx, &pb.LfsckSetRequest{Speed: speed, Window: window}); err != nil {
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
func Query(ctx context.Context, e Env, mdtIdx int, all, jsonOut, wait bool) error {
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

func printReports(e Env, reps []*lfsck.Report, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(e.Out)
		enc.SetIndent("", "  ")
		if len(reps) == 1 {
			return enc.Encode(reps[0])
		}
		return enc.Encode(reps)
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
	return nil
}

// Status prints one component of one MDT in full.
func Status(ctx context.Context, e Env, mdtIdx int, component string, jsonOut bool) error {
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

// FaultList prints the kinds of damage nacre fault inject knows.
func FaultList(e Env, jsonOut bool) error {
	if jsonOut {
		enc := json.NewEncoder(e.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(fault.Kinds)
	}
	for _, k := range fault.Kinds {
		needs := ""
		if k.Needs != "" {
			needs = " (repair needs " + k.Needs + ")"
		}
		fmt.Fprintf(e.Out, "%-20s %-9s %-4s %s -> %s%s\n", k.Kind, k.Component, k.Target, k.Description, k.Counter, needs)
	}
	return nil
}

// FaultInject damages the object at path (stripe: for layout kinds).
func FaultInject(ctx context.Context, e Env, kind, path string, stripe uint32) error {
	kd, ok := fault.LookupKind(kind)
	if !ok {
		return fmt.Errorf("unknown fault kind %q (see nacre fault list)", kind)
	}
	k, err := connect(ctx, e)
	if err != nil {
		return err
	}
	defer k.close()
	parent, name, err := k.c.ResolveParent(ctx, path)
	if err != nil {
		return err
	}
	obj, err := k.c.Lookup(ctx, fid.FromPB(parent.Fid), name)
	if err != nil {
		return err
	}
	isDir := obj.Mode&unix.S_IFMT == unix.S_IFDIR
	if (kd.Target == "dir") != isDir {
		return fmt.Errorf("fault %s needs a %s; %s is not one", kind, kd.Target, path)
	}
	// Faults go to the MDT that holds the object (MDT0 with one MDT).
	cli, err := k.faultClient(0)
	if err != nil {
		return err
	}
	rep, err := cli.Inject(ctx, &pb.FaultInjectRequest{Kind: kind, Fid: obj.Fid, Parent: parent.Fid, Name: []byte(name), Stripe: stripe})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.Out, rep.Message)
	return nil
}

func (k *conn) faultClient(idx uint32) (nacregrpc.FaultClient, error) {
	a, err := k.mdtAddr(idx, nil)
	if err != nil {
		return nil, err
	}
	cc, err := k.dial(a)
	if err != nil {
		return nil, err
	}
	return nacregrpc.NewFaultClient(cc), nil
}

// FaultArm arms a named fault point in a target process ("mdt0", "ost1").
func FaultArm(ctx context.Context, e Env, targetName, spec string) error {
	point, a, err := fault.Parse(spec)
	if err != nil {
		return err
	}
	kind, num := targetName, ""
	if len(targetName) > 3 {
		kind, num = targetName[:3], targetName[3:]
	}
	idx, nerr := strconv.ParseUint(num, 10, 32)
	if (kind != "mdt" && kind != "ost") || nerr != nil {
		return fmt.Errorf("--target %q: give mdtN or ostN (mdt0, ost1)", targetName)
	}
	if where, ok := fault.Points[point]; !ok || where != kind {
		return fmt.Errorf("no fault point %q in an %s; its points: %s (docs/lfsck.md, \"Fault injection\")", point, strings.ToUpper(kind), fault.PointsOf(kind))
	}
	k, err := connect(ctx, e)
	if err != nil {
		return err
	}
	defer k.close()
	req := &pb.FaultArmRequest{Point: point, Action: a.Kind, DelayMs: a.Delay.Milliseconds(), Count: uint32(a.Count), Message: a.Message}
	var rep *pb.FaultArmReply
	if kind == "mdt" {
		if _, err := k.mdts(int(idx), false); err != nil {
			return err
		}
		cli, err := k.faultClient(uint32(idx))
		if err != nil {
			return err
		}
		if rep, err = cli.Arm(ctx, req); err != nil {
			return err
		}
	} else {
		addr := ""
		for _, t := range k.cfg.Targets {
			if t.Kind == pb.TargetKind_TARGET_OST && uint64(t.Index) == idx {
				addr = t.Addr
			}
		}
		if addr == "" {
			return fmt.Errorf("no OST %d (OST%04x) in the configuration", idx, idx)
		}
		cc, err := k.dial(addr)
		if err != nil {
			return err
		}
		if rep, err = nacregrpc.NewOSSClient(cc).FaultArm(ctx, req); err != nil {
			return err
		}
	}
	did := "armed " + point + "=" + fault.Format(a)
	if a.Kind == "off" {
		did = "disarmed " + point
	}
	now := strings.Join(rep.Armed, ", ")
	if now == "" {
		now = "none"
	}
	fmt.Fprintf(e.Out, "%s: %s (armed now: %s)\n", targetName, did, now)
	return nil
}

// Digests prints the digest of every key of every target's store (the
// MDT's and each OST's): a dry run must leave them all unchanged.
func Digests(ctx context.Context, e Env) error {
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
			if err := k.call(ctx, t.Index, func(cli nacregrpc.LfsckClient) (err error) {
				d, err = cli.Digest(ctx, &pb.LfsckDigestRequest{})
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

// offlineMDT opens an MDT's store with its server stopped: read-only for
// a backup, which checks it (checkBackupSource), or to write for a
// restore.
func offlineMDT(dir string, readOnly bool) (*kv.DB, target.Identity, error) {
	id, err := stoppedMDT(dir)
	if err != nil {
		return nil, id, err
	}
	db, err := kv.Open(target.StoreDir(dir), kv.Options{ReadOnly: readOnly})
	if err != nil {
		return nil, id, err
	}
	if readOnly {
		return db, id, nil
	}
	// A restore may write into a new, empty store (the old device died):
	// that store is the target's from now on, whatever it has run on.
	chk := id
	chk.Started = time.Time{}
	if err := target.CheckStore(db, chk); err != nil {
		db.Close()
		return nil, id, err
	}
	return db, id, nil
}

// stoppedMDT is the identity of the MDT in dir, whose server must be
// stopped.
func stoppedMDT(dir string) (target.Identity, error) {
	id, err := target.Load(dir)
	if err != nil {
		return id, err
	}
	if id.Kind != target.MDT {
		return id, fmt.Errorf("%s holds %s, not an MDT", dir, id.Describe())
	}
	if pid, ok := proc.Serving(dir); ok {
		return id, fmt.Errorf("%s is served by process %d; stop it first (a file-level backup or restore is done with the MDT stopped)", dir, pid)
	}
	return id, nil
}

// checkBackupSource makes sure the store of the MDT in dir holds what the
// MDT has: its owner is recorded (CheckStore, as a start checks it), and
// a target that has run finds the record of its Raft log there. A store
// that lost data (a damaged write-ahead log) opens and reads as a smaller
// or empty namespace, and a backup of it, restored, would empty the file
// system; `nacre up` refuses to start on it.
func checkBackupSource(db *kv.DB, dir string, id target.Identity) error {
	if err := target.VerifyStore(db, id); err != nil {
		return err
	}
	if !target.HasRun(dir, id) {
		return nil
	}
	ok, err := raftgroup.RecordsLog(db, mdt.RaftPrefix)
	if err != nil {
		return err
	}
	if ok {
		return nil
	}
	// A restore removes the Raft log with the store's record of it (the
	// restored state starts a new log), as does a start that finds none:
	// only a store without the record beside a log that holds something
	// lost data, which is what a start refuses too. (Before, a backup
	// right after a restore was refused.)
	logDir := target.RaftLogDir(dir)
	names, err := os.ReadDir(logDir)
	if errors.Is(err, os.ErrNotExist) || (err == nil && len(names) == 0) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the Raft log directory %s: %w", logDir, err)
	}
	return fmt.Errorf("the store %s has no record of its Raft log, although the target has run and its log %s holds %d files: the store lost data (a damaged write-ahead log?)",
		db.Dir(), logDir, len(names))
}

// Backup writes a file-level backup of the (stopped) MDT in dir to file.
// A regular file is written whole beside file and renamed over it only
// once synced, so a failed backup (a full disk) leaves an earlier backup
// at that path as it was. A store that fails its checks is refused
// unless force (checkBackupSource).
func Backup(e Env, dir, file string, force bool) error {
	db, id, err := offlineMDT(dir, true)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkBackupSource(db, dir, id); err != nil {
		if !force {
			return fmt.Errorf("refusing to back up %s from %s: %w; a backup of this store would hold what is left of it, "+
				"and restored it would lose the files it lacks. Start the MDT with `nacre up`, which says what it finds; "+
				"with a replicated MDT, back up another replica (stop it first), whose store the others' Raft log keeps whole, "+
				"or replace this one (nacre replica replace); else keep the older backup you have. "+
				"`nacre mdt backup --force` backs up what the store holds anyway (the backup may be incomplete)", id.Label(), dir, err)
		}
		fmt.Fprintf(e.Err, "warning: backing up %s although its store fails its checks (--force): %v; the backup may be incomplete\n", id.Label(), err)
	}
	var h *mdt.BackupHeader
	err = writeWhole(file, func(w io.Writer) (err error) {
		h, err = mdt.Backup(db, id, w)
		return err
	})
	if err != nil {
		return fmt.Errorf("backup of %s to %s: %w", id.Label(), file, err)
	}
	fmt.Fprintf(e.Out, "backed up %s (%d objects) to %s\n", id.Label(), h.Objects, file)
	return nil
}

// writeWhole writes path with fn. A regular file (or a new one) is
// written to a hidden temporary file in the same directory, synced, and
// renamed over path, with the directory synced: path is either as it
// was or whole, never truncated or half-written. Anything else (a device,
// a FIFO, a symbolic link: /dev/stdout) is written into directly, as it
// cannot be renamed over (renaming over a link replaced the link: with
// --out /dev/stdout, /dev/stdout itself). A new file gets the mode the
// umask leaves, as os.Create gives it (the backup holds every name).
func writeWhole(path string, fn func(io.Writer) error) error {
	mode := os.FileMode(0o666) &^ umask()
	st, err := os.Lstat(path)
	switch {
	case err == nil && !st.Mode().IsRegular():
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
		if err != nil {
			return err
		}
		err = fn(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return err
	case err == nil:
		mode = st.Mode().Perm() // a backup replaced keeps its mode
	case !errors.Is(err, os.ErrNotExist):
		return err
	}
	d, base := filepath.Split(path)
	if d == "" {
		d = "."
	}
	f, err := os.CreateTemp(d, "."+base+".nacre-partial-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = fn(f)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	// The rename is durable only once the directory is synced.
	if err := target.SyncDir(d); err != nil {
		return fmt.Errorf("%s is written, but its directory could not be synced (a crash may lose it): %w", path, err)
	}
	return nil
}

// umask is the process's file mode creation mask.
func umask() os.FileMode {
	m := unix.Umask(0)
	unix.Umask(m)
	return os.FileMode(m)
}

// Restore restores a backup into the (stopped) MDT in dir; its object
// index is rebuilt by an OI scrub when the MDT next starts. The backup is
// read through and checked before the store is opened (opening creates a
// store where there is none), and a store this restore created is
// removed again if the restore fails: a failed restore leaves the
// directory as it was, and `nacre up` says what it said before.
func Restore(e Env, dir, file string, force bool) error {
	id, err := stoppedMDT(dir)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return fmt.Errorf("restore of %s: %w", id.Label(), err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && !st.Mode().IsRegular() {
		// A pipe (ssh host cat backup | nacre mdt restore --from
		// /dev/stdin) is read twice, to check it and to restore it:
		// spooled to a file beside the target first.
		sp, err := spool(f, dir)
		if err != nil {
			return fmt.Errorf("restore of %s from %s: %w; %s was not changed", id.Label(), file, err, dir)
		}
		defer os.Remove(sp.Name())
		defer sp.Close()
		f = sp
	}
	h, err := mdt.CheckBackup(f)
	if err == nil {
		err = h.CheckFor(id)
	}
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		return fmt.Errorf("restore of %s from %s: %w; %s was not changed", id.Label(), file, err, dir)
	}
	storeDir := target.StoreDir(dir)
	_, serr := os.Stat(storeDir)
	madeDir := errors.Is(serr, os.ErrNotExist)
	madeStore := madeDir || target.Empty(storeDir)
	db, id, err := offlineMDT(dir, false)
	if err != nil {
		return err
	}
	// The restored state starts a new Raft log: the old one goes right
	// before mdt.Restore wipes the group's state in the store.
	h, err = mdt.Restore(db, id, f, force, func() error { return raftlog.Remove(vfs.Default, target.RaftLogDir(dir)) })
	db.Close()
	if err != nil {
		err = fmt.Errorf("restore of %s from %s: %w", id.Label(), file, err)
		if madeStore {
			if rerr := removeStore(storeDir, madeDir); rerr != nil {
				err = fmt.Errorf("%w; and the store it created could not be removed: %v", err, rerr)
			}
		}
		return err
	}
	fmt.Fprintf(e.Out, "restored %s from %s (%d objects, backed up %s) with new local keys;\nits object index is rebuilt by an OI scrub when it starts (nacre lfsck query)\n",
		id.Label(), filepath.Base(file), h.Objects, h.Created.Format(time.RFC3339))
	return nil
}

// spool copies r to a new unlinked-on-return temporary file in dir,
// positioned at its start.
func spool(r io.Reader, dir string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".nacre-restore-*")
	if err != nil {
		return nil, fmt.Errorf("spool the backup: %w", err)
	}
	if _, err = io.Copy(f, r); err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("spool the backup to %s: %w", dir, err)
	}
	return f, nil
}

// removeStore removes a store a failed restore created: the directory
// too if it made it, else what is in it (the directory was there, empty:
// perhaps a mount point).
func removeStore(storeDir string, dirToo bool) error {
	if dirToo {
		return os.RemoveAll(storeDir)
	}
	entries, err := os.ReadDir(storeDir)
	if err != nil {
		return err
	}
	for _, en := range entries {
		if err := os.RemoveAll(filepath.Join(storeDir, en.Name())); err != nil {
			return err
		}
	}
	return nil
}

// Conn drives the checkers of a cluster from a program (benchmarks).
type Conn struct{ k *conn }

// Dial connects to the cluster of mgs.
func Dial(ctx context.Context, mgs string) (*Conn, error) {
	k, err := connect(ctx, Env{MGS: mgs})
	if err != nil {
		return nil, err
	}
	return &Conn{k: k}, nil
}

// Close drops the connections.
func (c *Conn) Close() { c.k.close() }

// Start starts the checker of MDT mdtIdx.
func (c *Conn) Start(ctx context.Context, mdtIdx uint32, req *pb.LfsckStartRequest) error {
	return c.k.call(ctx, mdtIdx, func(cli nacregrpc.LfsckClient) error {
		_, err := cli.Start(ctx, req)
		return err
	})
}

// Stop stops the checker of MDT mdtIdx.
func (c *Conn) Stop(ctx context.Context, mdtIdx uint32) error {
	return c.k.call(ctx, mdtIdx, func(cli nacregrpc.LfsckClient) error {
		_, err := cli.Stop(ctx, &pb.LfsckStopRequest{})
		return err
	})
}

// Report returns the report of MDT mdtIdx.
func (c *Conn) Report(ctx context.Context, mdtIdx uint32) (*lfsck.Report, error) {
	reps, err := c.k.query(ctx, []uint32{mdtIdx})
	if err != nil {
		return nil, err
	}
	return reps[0], nil
}

// Run starts a check on MDT mdtIdx and waits until it ends.
func (c *Conn) Run(ctx context.Context, mdtIdx uint32, req *pb.LfsckStartRequest) (*lfsck.Report, error) {
	if err := c.Start(ctx, mdtIdx, req); err != nil {
		return nil, err
	}
	poll := 10 * time.Millisecond
	for {
		r, err := c.Report(ctx, mdtIdx)
		if err != nil {
			return nil, err
		}
		if !r.Running {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
		poll = min(poll*3/2, 200*time.Millisecond)
	}
}
