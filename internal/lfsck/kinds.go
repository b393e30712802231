package lfsck

import (
	"errors"
	"sort"
	"strings"
)

// Components. The numbers are stored (counter keys, trace keys, state).
const (
	Scrub     = 1
	Namespace = 2
	Layout    = 3
)

// ComponentNames are the -t names, by component.
var ComponentNames = map[uint32]string{Scrub: "scrub", Namespace: "namespace", Layout: "layout"}

// IsComponentName says whether name is exactly one component's -t name.
// Status shows one component: a list ParseTypes accepts ("scrub,layout")
// names no single report.
func IsComponentName(name string) bool {
	for _, n := range ComponentNames {
		if n == name {
			return true
		}
	}
	return false
}

// Components lists the components in the order they are reported.
var Components = []uint32{Scrub, Namespace, Layout}

// ParseTypes turns -t names into a component bit set; "all", "default"
// and an empty list mean every component.
func ParseTypes(names []string) (uint32, error) {
	var bits uint32
	for _, n := range names {
		for _, p := range strings.Split(n, ",") {
			p = strings.TrimSpace(p)
			switch p {
			case "":
			case "all", "default":
				bits |= 1<<Scrub | 1<<Namespace | 1<<Layout
			default:
				found := false
				for c, name := range ComponentNames {
					if name == p {
						bits |= 1 << c
						found = true
					}
				}
				if !found {
					return 0, &usageError{"unknown checker type " + p + " (scrub, namespace, layout, all)"}
				}
			}
		}
	}
	return bits, nil
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// IsUsage reports whether err is a bad argument to Start or Set.
func IsUsage(err error) bool {
	var u *usageError
	return errors.As(err, &u)
}

// Kinds of inconsistency, per component. The numbers are stored in the
// counter keys; the names are the stable, versioned counter names of
// `nacre lfsck query --json` (docs/lfsck.md).
const (
	// scrub (OI)
	KOIMissing  = 1 // an object has no OI entry
	KOIStale    = 2 // the OI maps a FID to another object, which is not it
	KOIConflict = 3 // two objects claim one FID
	KOIDangling = 4 // an OI entry names no object
	KOIGarbage  = 5 // an object record that does not decode

	// namespace
	KNsDirent       = 1  // entry FID differs from the object's LMA, or the entry is corrupt
	KNsLinkEA       = 2  // linkEA lacks a name, or holds an invalid, repeated or dead one
	KNsNlinks       = 3  // nlink below the number of names, or a directory's count wrong
	KNsDangling     = 4  // an entry names an object that does not exist
	KNsBadType      = 5  // the entry's file type differs from the object's
	KNsLostDirent   = 6  // a linkEA name whose entry is gone
	KNsUnmatched    = 7  // the linkEA names another entry than the one naming the object
	KNsMultiRef     = 8  // an object claims a name that another object owns
	KNsOrphan       = 9  // an object nothing names
	KNsUnknown      = 10 // found, cannot be decided or repaired
	KNsOrphanDirent = 11 // entries of a directory that does not exist
	// the linkEA is marked overflowed (names left out) but holds every name
	KNsLinkEAOverflow = 12
	// a remote entry whose directory is missing on its MDT
	KNsRemoteDangling = 13
	// a remote directory whose entry on the parent's MDT is missing
	KNsRemoteLost = 14

	// layout
	KLyDangling   = 1 // a layout slot names an OST object that does not exist
	KLyUnmatched  = 2 // the OST object's PFID names another file, which does not list it
	KLyMultiRef   = 3 // two layouts name one OST object
	KLyOrphan     = 4 // an OST object no layout names (phase 2, -o)
	KLyOwner      = 5 // the OST object's owner differs from the file's
	KLyStripeIdx  = 6 // the PFID names the file but another stripe index
	KLyOthers     = 7 // the PFID's stripe size, count or generation differ
	KLyBadLayout  = 8 // a layout that cannot be checked (bad pattern, size, count)
	KLyUnreadable = 9 // an OST record that does not decode
)

// KindNames maps component -> kind -> counter name.
var KindNames = map[uint32]map[uint32]string{
	Scrub: {KOIMissing: "missing", KOIStale: "stale", KOIConflict: "conflict", KOIDangling: "dangling", KOIGarbage: "garbage"},
	Namespace: {KNsDirent: "dirent", KNsLinkEA: "linkea", KNsNlinks: "nlinks", KNsDangling: "dangling", KNsBadType: "bad_file_type",
		KNsLostDirent: "lost_dirent", KNsUnmatched: "unmatched_pairs", KNsMultiRef: "multiple_referenced", KNsOrphan: "orphan",
		KNsUnknown: "unknown", KNsOrphanDirent: "orphan_dirents", KNsLinkEAOverflow: "linkea_overflow",
		KNsRemoteDangling: "remote_dangling", KNsRemoteLost: "remote_lost_dirent"},
	Layout: {KLyDangling: "dangling", KLyUnmatched: "unmatched_pair", KLyMultiRef: "multiple_referenced", KLyOrphan: "orphan",
		KLyOwner: "inconsistent_owner", KLyStripeIdx: "bad_stripe_index", KLyOthers: "others", KLyBadLayout: "bad_layout",
		KLyUnreadable: "unreadable_record"},
}

// KindNumber is the reverse of KindNames.
func KindNumber(comp uint32, name string) (uint32, bool) {
	for k, n := range KindNames[comp] {
		if n == name {
			return k, true
		}
	}
	return 0, false
}

// SortedKinds lists a component's kind names in number order.
func SortedKinds(comp uint32) []string {
	var ks []int
	for k := range KindNames[comp] {
		ks = append(ks, int(k))
	}
	sort.Ints(ks)
	out := make([]string, len(ks))
	for i, k := range ks {
		out[i] = KindNames[comp][uint32(k)]
	}
	return out
}

// Statuses (as Lustre's, §1.4 of the reference).
const (
	StInit = iota
	StPhase1
	StPhase2
	StCompleted
	StFailed
	StStopped
	StPaused
	StCrashed
	StPartial
)

// StatusNames are the shown names of the statuses.
var StatusNames = []string{"init", "scanning-phase1", "scanning-phase2", "completed", "failed", "stopped", "paused", "crashed", "partial"}

// StatusName names a status.
func StatusName(s uint32) string {
	if int(s) < len(StatusNames) {
		return StatusNames[s]
	}
	return "unknown"
}

// Component flags.
const (
	FlScannedOnce  = 1 << 0
	FlInconsistent = 1 << 1 // inconsistencies found and not (yet) all repaired
	FlIncomplete   = 1 << 2 // a target did not answer: orphan handling skipped for it
	FlAuto         = 1 << 3 // started by the MDT itself (restore detected)
)

var compFlagNames = []string{"scanned-once", "inconsistent", "incomplete", "auto"}

// Param bits (shown as param: ...).
const (
	PFailout = 1 << iota
	PDryRun
	PAllTargets
	POrphan
	PCreateOST
	PCreateMDT
)

var paramNames = []string{"failout", "dryrun", "all_targets", "orphan", "create_ostobj", "create_mdtobj"}

func bitNames(v uint32, names []string) []string {
	out := []string{}
	for i, n := range names {
		if v&(1<<i) != 0 {
			out = append(out, n)
		}
	}
	return out
}
