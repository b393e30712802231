package main

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"nacre/internal/fusefs"
	"nacre/internal/lfsck"
	"nacre/internal/mds"
	"nacre/internal/obs"
	"nacre/internal/server"
)

// The environment: nacre reads its variables here and nowhere else (the
// packages under internal/ take options), each through environ.get, which
// knows only the variables of envVars: the table `nacre help
// environment` prints.

// envVar is one variable nacre reads.
type envVar struct {
	name string
	who  string // the commands that read it
	def  string // its default, in words
	what string
}

var envVars = []envVar{
	{"NACRE_MGS", "client and admin commands, format, mount", "none",
		"the MGS address, HOST:PORT (a replicated MGS: HOST:PORT,HOST:PORT,...); --mgs overrides it"},
	{"NACRE_TLS_DIR", "client and admin commands, mount", "none",
		"a TLS credentials directory (ca.pem, cert.pem, key.pem: `nacre cert add` makes one, `nacre up --tls` prints it): every connection is TLS with it; --tls-dir overrides it"},
	{"NACRE_FOLLOWER_READS", "client and admin commands, mount", "0",
		"1 spreads metadata reads over every replica of an MDT that is up instead of its leader (each read still linearizable)"},
	{"NACRE_OST_DOWN_AFTER", "mount", "30s",
		"how long I/O retries an OST that cannot be reached before it fails with EIO naming the OST (a Go duration)"},
	{"NACRE_LOG_LEVEL", "serve, mount", "info", "debug, info, warn or error"},
	{"NACRE_FAULTS", "serve (MDT), mount", "none",
		"fault points to arm at start, name=action,... as nacre fault arm takes them (docs/lfsck.md, \"Fault injection\")"},
	{"GOGC", "serve", "400",
		"the Go collector's target percentage (the Go runtime reads it; without it a server uses 400, not Go's 100)"},
	{"NACRE_ORPHAN_GRACE", "serve (MDT)", "60s",
		"how long the open-unlinked files of a client without a session are kept (a Go duration)"},
	{"NACRE_OPEN_GRACE", "serve (MDT)", "10s",
		"how long a new leader treats every client as possibly having files open (a Go duration)"},
	{"NACRE_COMMIT_WINDOW", "serve (MDT)", "100ms",
		"how long a single-replica MDT may leave changes it answered unsynced (clients keep them meanwhile; docs/architecture.md, \"The durability contract\"); 0: every answer waits for its fsync"},
	{"NACRE_RECOVERY_WINDOW", "serve (MDT)", "30s",
		"how long an MDT that lost its log's unsynced tail in a power cut waits for clients to give back the changes they kept (a Go duration)"},
	{"NACRE_BOOT_ID", "serve (MDT)", "the kernel's boot_id",
		"tests only: the boot the MDT believes it runs in; a restart in another boot after an unclean stop recovers from the clients"},
	{"NACRE_READ_BARRIER_TIMEOUT", "serve (MDT)", "1s",
		"how long a replica tries to complete a read barrier before it answers that it cannot (a Go duration)"},
	{"NACRE_RAFT_VOTE_WHILE_EMPTY", "serve (MGS, MDT)", "0",
		"1 lets a replica whose Raft log is empty vote and be elected: only for a replica known never to have held the log (docs/architecture.md)"},
	{"NACRE_RAFT_KEEP_ENTRIES", "serve (MGS, MDT)", "10000",
		"how many applied entries a Raft log keeps behind its snapshot (tests shorten it)"},
	{"NACRE_RAFT_NO_LEASE", "serve (MGS, MDT)", "unset",
		"set: a leader serves no read under its lease; every read takes a ReadIndex round"},
	{"NACRE_MAX_CONNS_PER_PEER", "serve", "256",
		"how many connections one peer IP may hold open on each of a target's ports (gRPC, data); more are closed at once and counted (-1: no bound)"},
	{"NACRE_LFSCK_NO_AUTO", "serve (MDT)", "unset",
		"set: a new leader does not resume an interrupted check (it stays crashed or paused until nacre lfsck start)"},
	{"NACRE_LFSCK_NICE", "serve (MDT)", "0",
		"the nice level of the checker's scanning thread (0: not changed)"},
	{"NACRE_LFSCK_BUSY_DUTY", "serve (MDT)", "0.05",
		"the share of time the checker's scan takes while clients are active, above 0 and at most 1 (1: never yield)"},
	{"NACRE_LFSCK_SUMMARIES", "serve (MDT)", "1",
		"0 turns the OST summaries off: the layout check checks every stripe object by object"},
	{"NACRE_DTX_RESOLVE_AFTER", "serve (MDT)", "5s",
		"how long a cross-MDT transaction's intent may stay pending before its MDT asks the coordinating MDT for the outcome (a crash between the steps)"},
	{"NACRE_TEST_SEQ_GRANT", "serve (MDT)", "64/2",
		"tests only: COUNT/LOW, ask the MGS for COUNT FID sequences whenever fewer than LOW sequences' worth of FIDs remain"},
	{"NACRE_PYTHON", "bench age --darshan", "python3", "the Python that reads Darshan logs"},
	{"XDG_RUNTIME_DIR", "mount, umount, down, up --mount, client commands", "unset",
		"for a user other than root, where mount daemons record themselves: $XDG_RUNTIME_DIR/nacre/mounts (unset: under the temporary directory; root: /run/nacre/mounts)"},
}

// environ reads the environment: os.Getenv, or a map in tests.
type environ func(name string) string

// get reads a variable of envVars; any other is a bug of this binary
// (its help would not list it).
func (e environ) get(name string) string {
	for _, v := range envVars {
		if v.name == name {
			return e(name)
		}
	}
	panic("nacre reads " + name + ", which `nacre help environment` does not list")
}

// logLevel is NACRE_LOG_LEVEL.
func (e environ) logLevel() slog.Level { return obs.ParseLevel(e.get("NACRE_LOG_LEVEL")) }

// followerReads is NACRE_FOLLOWER_READS.
func (e environ) followerReads() bool {
	v := e.get("NACRE_FOLLOWER_READS")
	return v != "" && v != "0"
}

// mountState is where mount daemons record themselves.
func (e environ) mountState() string { return fusefs.StateDir(e.get("XDG_RUNTIME_DIR")) }

// mountOSTDownAfter: see client.Config.OSTDownAfter. An OST restart
// takes seconds, and a mount's I/O waits it out; an OST still
// unreachable after this fails I/O with EIO at once (and logged, naming
// the OST) until it answers, instead of every request waiting the whole
// timeout.
const mountOSTDownAfter = 30 * time.Second

// ostDownAfter is NACRE_OST_DOWN_AFTER, for a mount.
func (e environ) ostDownAfter() (time.Duration, error) {
	v := e.get("NACRE_OST_DOWN_AFTER")
	if v == "" {
		return mountOSTDownAfter, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("NACRE_OST_DOWN_AFTER=%q: give a duration such as 30s", v)
	}
	return d, nil
}

// serverOptions are the options of `nacre serve`: every knob of the
// servers that the environment sets. A value that does not parse leaves
// the default.
func (e environ) serverOptions(log *slog.Logger) server.Options {
	o := server.Options{Log: log}
	if e.get("GOGC") == "" {
		o.GCPercent = 400
	}
	o.Raft.VoteWhileEmpty = e.get("NACRE_RAFT_VOTE_WHILE_EMPTY") == "1"
	if v, err := strconv.ParseUint(e.get("NACRE_RAFT_KEEP_ENTRIES"), 10, 64); err == nil {
		o.Raft.KeepEntries = v
	}
	o.Raft.NoLease = e.get("NACRE_RAFT_NO_LEASE") != ""
	o.Raft.CommitWindow = e.grace("NACRE_COMMIT_WINDOW")
	if n, err := strconv.Atoi(e.get("NACRE_MAX_CONNS_PER_PEER")); err == nil && n != 0 {
		o.MaxConnsPerPeer = n
	}
	o.MDS = mds.Options{
		OrphanGrace:        e.grace("NACRE_ORPHAN_GRACE"),
		OpenGrace:          e.grace("NACRE_OPEN_GRACE"),
		SeqGrant:           e.get("NACRE_TEST_SEQ_GRANT"),
		NoCheckerResume:    e.get("NACRE_LFSCK_NO_AUTO") != "",
		Faults:             e.get("NACRE_FAULTS"),
		Checker:            e.checkerTuning(),
		ReadBarrierTimeout: e.duration("NACRE_READ_BARRIER_TIMEOUT"),
		RecoveryWindow:     e.duration("NACRE_RECOVERY_WINDOW"),
		DtxResolveAfter:    e.duration("NACRE_DTX_RESOLVE_AFTER"),
		BootID:             e.bootID(),
	}
	return o
}

// bootID names this boot of the machine: NACRE_BOOT_ID, or the kernel's
// boot_id.
func (e environ) bootID() string {
	if v := e.get("NACRE_BOOT_ID"); v != "" {
		return v
	}
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// checkerTuning is the checker's NACRE_LFSCK_* knobs.
func (e environ) checkerTuning() lfsck.Tuning {
	var t lfsck.Tuning
	if n, err := strconv.Atoi(e.get("NACRE_LFSCK_NICE")); err == nil {
		t.Nice = n
	}
	if d, err := strconv.ParseFloat(e.get("NACRE_LFSCK_BUSY_DUTY"), 64); err == nil {
		t.BusyDuty = d // the checker keeps its default outside (0, 1]
	}
	t.NoSummaries = e.get("NACRE_LFSCK_SUMMARIES") == "0"
	return t
}

// duration is a variable holding a positive Go duration (0: unset or
// not one).
func (e environ) duration(name string) time.Duration {
	if d, err := time.ParseDuration(e.get(name)); err == nil && d > 0 {
		return d
	}
	return 0
}

// grace is a variable holding a grace period for mds.Options: 0 when
// unset or not a duration (the default), negative for a grace of 0.
func (e environ) grace(name string) time.Duration {
	d, err := time.ParseDuration(e.get(name))
	switch {
	case err != nil:
		return 0
	case d == 0:
		return -1
	}
	return d
}

// environmentTopic is `nacre help environment`.
func environmentTopic() *cobra.Command {
	var b strings.Builder
	b.WriteString("The environment variables nacre reads, and which commands read them (a flag\n" +
		"that sets the same takes precedence). The servers read theirs at start:\n" +
		"nacre up starts them with its own environment.\n")
	for _, v := range envVars {
		fmt.Fprintf(&b, "\n  %s (%s; default: %s)\n", v.name, v.who, v.def)
		b.WriteString(wrap(v.what, "      ", 78))
	}
	return &cobra.Command{
		Use:   "environment",
		Short: "The environment variables nacre reads, what they do and their defaults",
		Long:  strings.TrimRight(b.String(), "\n"),
	}
}

// wrap fills text into lines of at most width columns, each starting
// with indent.
func wrap(text, indent string, width int) string {
	var b strings.Builder
	line := indent
	for _, w := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			b.WriteString(line + "\n")
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	b.WriteString(line + "\n")
	return b.String()
}
