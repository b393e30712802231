package mds

import (
	"time"

	pb "nacre/api/nacrepb"
	"nacre/internal/fid"
	"nacre/internal/ldlm"
)

// revokeLookups takes back the lookup locks (internal/ldlm, lookuplock.go)
// that other clients hold on the directories whose names cmd, applied
// already, may have changed: its parents for a namespace change, every
// directory for a repair by the checker or injected damage. It returns
// once the holders know, so the reply that follows cannot overtake their
// caches.
func (s *Server) revokeLookups(cmd *pb.Command) {
	dirs, all := namesChanged(cmd)
	if len(dirs) == 0 && !all {
		return
	}
	lm := s.LDLM()
	if lm == nil {
		return
	}
	lm.RevokeLookups(cmd.ClientId, dirs, all)
}

// namesChanged lists the directories whose names cmd may change; all
// means any directory.
func namesChanged(cmd *pb.Command) (dirs []fid.FID, all bool) {
	rename := func(r *pb.RenameOp) []fid.FID {
		sp, dp := fid.FromPB(r.GetSrcParent()), fid.FromPB(r.GetDstParent())
		if sp == dp {
			return []fid.FID{sp}
		}
		return []fid.FID{sp, dp}
	}
	switch o := cmd.Op.(type) {
	case *pb.Command_Create:
		return []fid.FID{fid.FromPB(o.Create.GetParent())}, false
	case *pb.Command_Link:
		return []fid.FID{fid.FromPB(o.Link.GetParent())}, false
	case *pb.Command_Unlink:
		return []fid.FID{fid.FromPB(o.Unlink.GetParent())}, false
	case *pb.Command_Rename:
		return rename(o.Rename), false
	case *pb.Command_OpenUnlink:
		return []fid.FID{fid.FromPB(o.OpenUnlink.GetUnlink().GetParent())}, false
	case *pb.Command_OpenRename:
		return rename(o.OpenRename.GetRename()), false
	case *pb.Command_LfsckRepair, *pb.Command_Fault:
		return nil, true
	}
	return nil, false
}

// replicatedPoll is how often the MDS looks whether its MDT became
// replicated. Well under an election timeout: no other replica can lead
// before the locks are revoked unless this one dies, which ends the
// sessions anyway.
const replicatedPoll = 200 * time.Millisecond

// lookupLocksWhileSingle revokes every lookup lock when the MDT becomes
// replicated (a replica was added): a replicated MDT grants none
// (internal/ldlm, lookuplock.go).
func (s *Server) lookupLocksWhileSingle(lm *ldlm.Server) {
	defer s.wg.Done()
	onReplicated(s.stop, replicatedPoll, s.group.Replicated, func() {
		if n := lm.LookupLocks(); n > 0 {
			s.log.Info("the MDT is replicated now: revoking every lookup lock", "locks", n)
			lm.RevokeLookups(0, nil, true)
		}
	})
}

// onReplicated calls revoke each time replicated turns true, looking
// every period, until stop is closed.
func onReplicated(stop <-chan struct{}, every time.Duration, replicated func() bool, revoke func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	was := replicated()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		now := replicated()
		if now && !was {
			revoke()
		}
		was = now
	}
}
