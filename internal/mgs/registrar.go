package mgs

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/errno"
	"nacre/internal/grpcx"
	"nacre/internal/pki"
)

// HeartbeatInterval is how often targets report to the MGS.
const HeartbeatInterval = time.Second

// Registrar keeps one target registered with the MGS: it registers at
// start (retrying while the MGS is unreachable), heartbeats every second,
// and registers again when the MGS has forgotten the target.
type Registrar struct {
	cc     *grpcx.SwapConn
	mgs    nacregrpc.MGSClient
	info   func() *pb.TargetInfo
	beat   func() *pb.HeartbeatRequest
	log    *slog.Logger
	cancel context.CancelFunc
	wg     sync.WaitGroup
	fatal  chan error
	once   sync.Once
	ready  chan struct{}
	kick   chan struct{}

	mu       sync.Mutex
	onChange func(addrs string)
	initial  string // the addresses it was started with
}

// OnMGSChange has f called with the MGS replicas' addresses (comma
// separated) whenever the MGS lists others than the registrar follows, so
// that a target can record them: one that restarted after every MGS
// replica was replaced would otherwise dial none.
func (r *Registrar) OnMGSChange(f func(addrs string)) {
	r.mu.Lock()
	r.onChange = f
	r.mu.Unlock()
	if now := r.cc.Addrs(); now != r.initial {
		f(now) // changed before f was set
	}
}

// StartRegistrar begins registering; info and beat are called for every
// registration and heartbeat so that they carry fresh values.
// creds, if not nil, make the connection TLS.
func StartRegistrar(mgsAddr string, info func() *pb.TargetInfo, beat func() *pb.HeartbeatRequest, log *slog.Logger, creds *pki.Creds) (*Registrar, error) {
	sc, err := grpcx.DialSwap(mgsAddr, grpcx.WithTLS(creds))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &Registrar{cc: sc, mgs: nacregrpc.NewMGSClient(sc), info: info, beat: beat, log: log, cancel: cancel,
		fatal: make(chan error, 1), ready: make(chan struct{}), kick: make(chan struct{}, 1), initial: sc.Addrs()}
	r.wg.Add(1)
	go r.loop(ctx, mgsAddr)
	return r, nil
}

// Client is the MGS client the registrar uses (for config and sequences).
func (r *Registrar) Client() nacregrpc.MGSClient { return r.mgs }

// Fatal delivers an error that retrying cannot fix (wrong file system,
// duplicate index, incompatible protocol).
func (r *Registrar) Fatal() <-chan error { return r.fatal }

// Registered is closed after the first successful registration.
func (r *Registrar) Registered() <-chan struct{} { return r.ready }

// Kick sends the next heartbeat now instead of at the next tick (a
// replica that just became leader, or stopped leading, says so at once).
func (r *Registrar) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Quiet ends heartbeats and registrations but keeps the connection for
// Client (Stop still closes it): a replica removed from its group must
// not register again after the MGS forgot it.
func (r *Registrar) Quiet() { r.cancel() }

// Leave stops the heartbeats and asks the MGS to forget this replica (one
// removed from its group; the CLI that removed it may have asked
// already, or, for one removed while it was down, registered again since).
func (r *Registrar) Leave() {
	r.cancel()
	info := r.info()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if _, err := r.mgs.Deregister(ctx, &pb.DeregisterRequest{Kind: info.Kind, Index: info.Index, ReplicaId: info.ReplicaId}); err != nil {
		r.log.Warn("ask the MGS to forget this removed replica", "err", err)
	}
}

// Stop ends heartbeats.
func (r *Registrar) Stop() {
	r.cancel()
	r.wg.Wait()
	r.cc.Close()
}

func (r *Registrar) loop(ctx context.Context, addr string) {
	defer r.wg.Done()
	registered := false
	warned := time.Time{}
	var refusedSince time.Time // when Register began to answer Aborted
	t := time.NewTicker(HeartbeatInterval)
	defer t.Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		var err error
		if !registered {
			_, err = r.mgs.Register(cctx, r.info())
			if err == nil {
				registered = true
				r.once.Do(func() { close(r.ready) })
				r.Kick() // the first heartbeat (space, leadership) at once
			}
		} else {
			hb := r.beat()
			hb.Addr = r.info().Addr
			var rep *pb.HeartbeatReply
			rep, err = r.mgs.Heartbeat(cctx, hb)
			if errno.CodeOf(err) == errno.NotFound {
				registered = false
			}
			if err == nil {
				// MGS replicas replaced while this target runs would
				// otherwise leave it with addresses of none.
				if r.cc.Follow(rep.GetMgsAddrs(), r.log) {
					r.mu.Lock()
					f := r.onChange
					r.mu.Unlock()
					if f != nil {
						f(r.cc.Addrs())
					}
				}
			}
		}
		cancel()
		if errno.CodeOf(err) == errno.Aborted && ctx.Err() == nil {
			// Another process serves this target (Server.servedElsewhere):
			// wait out the MGS's DownAfter, in case that one is a former
			// process of ours that just stopped, then give up.
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			}
			if time.Since(refusedSince) < DownAfter+2*HeartbeatInterval {
				err = nil
			}
		} else {
			refusedSince = time.Time{}
		}
		if err != nil && ctx.Err() == nil {
			switch errno.CodeOf(err) {
			case errno.FailedPrecondition, errno.AlreadyExists, errno.InvalidArgument, errno.Aborted:
				select {
				case r.fatal <- err:
				default:
				}
				return
			}
			if time.Since(warned) > 10*time.Second {
				r.log.Warn("MGS unreachable; retrying", "mgs", addr, "err", err)
				warned = time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-r.kick:
		}
	}
}
