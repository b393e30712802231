package fault

import (
	"sort"
	"strings"
)

// Points is the catalogue of the fault points compiled into Nacre, by
// name, with the process that has each: what `nacre fault arm` accepts.
// A point's name appears here and at its fault.Hit; TestPointsAreHit
// keeps the two in step.
var Points = map[string]string{
	"lfsck.scan.object":       "mdt",
	"lfsck.checkpoint":        "mdt",
	"lfsck.checkpoint.after":  "mdt",
	"lfsck.phase2.enter":      "mdt",
	"lfsck.phase2.item":       "mdt",
	"lfsck.layout.send":       "mdt",
	"lfsck.layout.summary":    "mdt",
	"lfsck.layout.verify":     "mdt",
	"lfsck.orphans.send":      "mdt",
	"lfsck.orphans.adopt":     "mdt",
	"mds.reply.drop":          "mdt",
	"mds.reply.stepdown":      "mdt",
	"mds.reply.precheck.skip": "mdt",
	"mds.dtx.before_prepare":  "mdt",
	"mds.dtx.after_prepare":   "mdt",
	"mds.dtx.after_commit":    "mdt",
	"mds.dtx.after_finish":    "mdt",
	"mds.dtx.served":          "mdt",
	"raft.isolate":            "mdt",
	"raft.log.sync":           "mdt",
	"raft.log.powercut":       "mdt",
	"oss.lfsck.check":         "ost",
	"oss.lfsck.summary":       "ost",
	"oss.lfsck.orphans":       "ost",
	"fuse.closes.send":        "mount",
	"fuse.open.registered":    "mount",
	"fuse.remove.inflight":    "mount",
}

// PointsOf lists the points of a process kind ("mdt", "ost", "mount"),
// sorted, as one string for messages.
func PointsOf(kind string) string {
	var out []string
	for n, k := range Points {
		if k == kind {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ", ")
}
