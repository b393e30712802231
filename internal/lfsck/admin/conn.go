package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/lfsck"
	"nacre/internal/pki"
)

// conn is a connection to the cluster's targets.
type conn struct {
	c   *client.Client
	cfg *pb.ClusterConfig

	mu  sync.Mutex // a Conn is shared by goroutines (a bench polls while it runs)
	ccs map[string]*grpc.ClientConn
	tls *pki.Creds // the command's credentials: nil, no TLS
}

func connect(ctx context.Context, e cli.Env) (*conn, error) {
	c, err := e.ConnectAdmin(ctx)
	if err != nil {
		return nil, err
	}
	cfg, err := c.Config(ctx)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &conn{c: c, cfg: cfg, tls: e.TLS}, nil
}

// connectMDTs connects and lists the MDTs asked (one index, or all).
func connectMDTs(ctx context.Context, e cli.Env, one int, all bool) (*conn, []uint32, error) {
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
	cc, err := cli.Dial(addr, k.tls)
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
func (k *conn) call(ctx context.Context, idx uint32, fn func(lc nacregrpc.LfsckClient) error) error {
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
		leader, notLeader := errno.LeaderOf(err)
		hint := leader.Addr
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
	if errors.As(down, &u) && client.ShortCause(err) != err.Error() {
		return down
	}
	name := fmt.Sprintf("MDT%04x", idx)
	if e := (*errno.Error)(nil); errors.As(err, &e) && (strings.HasPrefix(e.Msg, name+":") || strings.Contains(strings.SplitN(e.Msg, " ", 2)[0], "-"+name+":")) {
		return &answeredError{msg: e.Msg, err: err}
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
func (k *conn) each(ctx context.Context, idxs []uint32, fn func(i uint32, lc nacregrpc.LfsckClient) error) error {
	for _, i := range idxs {
		if err := k.call(ctx, i, func(lc nacregrpc.LfsckClient) error { return fn(i, lc) }); err != nil {
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
// answer: connection refused; check `nacre status`": the connection's
// cause, client.ShortCause), or nil if the MDT answered: the MGS shows a
// target up until it misses its heartbeats, so one just killed is dialled
// before it is known down.
func notAnswering(idx uint32, addr string, err error) error {
	if errno.CodeOf(err) != errno.Unavailable {
		return nil
	}
	if _, ok := errno.LeaderOf(err); ok {
		return nil // a replica that answered that it does not lead
	}
	return &unreachableError{msg: fmt.Sprintf("MDT%04x (%s) does not answer: %s; check `nacre status`", idx, addr, client.ShortCause(err)), err: err}
}

func (k *conn) query(ctx context.Context, idxs []uint32) ([]*lfsck.Report, error) {
	var out []*lfsck.Report
	err := k.each(ctx, idxs, func(_ uint32, lc nacregrpc.LfsckClient) error {
		rep, err := lc.Query(ctx, &pb.LfsckQueryRequest{})
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
