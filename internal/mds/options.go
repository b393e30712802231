package mds

import (
	"time"

	"nacre/internal/lfsck"
)

// Options are the knobs of a metadata server that an admin or a test may
// set; cmd/nacre reads them from the NACRE_* variables `nacre help
// environment` lists. The zero value is the default.
type Options struct {
	// OrphanGrace is how long the orphans of a client without a session
	// are kept (0: OrphanGrace; negative: not at all).
	OrphanGrace time.Duration
	// OpenGrace is how long a new leader treats every client as possibly
	// having files open (0: OpenGrace; negative: not at all).
	OpenGrace time.Duration
	// ReadBarrierTimeout bounds a read barrier (0: one second): a replica
	// that cannot complete one sooner answers Unavailable.
	ReadBarrierTimeout time.Duration
	// SeqGrant, for tests only, is "COUNT/LOW": the grants of FID
	// sequences seqPolicy describes ("": the production policy).
	SeqGrant string
	// NoCheckerResume keeps a new leader from resuming an interrupted
	// check: its status stays as it was until `nacre lfsck start`.
	NoCheckerResume bool
	// Checker tunes the checker's scan.
	Checker lfsck.Tuning
	// RecoveryWindow is how long a restart that lost its log's unsynced
	// tail waits for clients to give back the changes they kept (0:
	// DefaultRecoveryWindow; durability.go).
	RecoveryWindow time.Duration
	// BootID names the machine's boot (the kernel's boot_id): a restart
	// in the same boot lost nothing the process wrote.
	BootID string
	// Faults lists fault points armed as the server starts
	// ("name=action,...", fault.ArmList).
	Faults string
	// DtxResolveAfter is how long a cross-MDT transaction's intent stays
	// pending here before this MDS asks its coordinator for the outcome
	// (0: DefaultDtxResolveAfter; dtx.go).
	DtxResolveAfter time.Duration
}

// grace is d, or def if d is 0, or none if d is negative.
func grace(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// readTimeout bounds a read barrier.
func (o Options) readTimeout() time.Duration {
	if o.ReadBarrierTimeout > 0 {
		return o.ReadBarrierTimeout
	}
	return time.Second
}
