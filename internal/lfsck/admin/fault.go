package admin

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"nacre/api/nacregrpc"
	pb "nacre/api/nacrepb"
	"nacre/internal/cli"
	"nacre/internal/client"
	"nacre/internal/errno"
	"nacre/internal/fault"
	"nacre/internal/fid"
)

// FaultList prints the kinds of damage nacre fault inject knows.
func FaultList(e cli.Env, jsonOut bool) error {
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

// FaultInject damages the object at the path argument arg (a path on a
// mount, or from the root: cli.Env.ResolvePaths) in the way kind says
// (stripe: for layout kinds). Typed at a terminal, it asks first unless
// confirmed: the damage is real and only the checker undoes it.
func FaultInject(ctx context.Context, e cli.Env, kind, arg string, stripe uint32, confirmed bool) error {
	mgs, paths, err := e.ResolvePaths(arg)
	if err != nil {
		return err
	}
	e.MGS = mgs
	if !confirmed && stdinIsTerminal(e) {
		// Maybe on the wrong cluster or path.
		fmt.Fprintf(e.Stderr(), "This damages %s (%s) on purpose; nacre lfsck repairs it, and a file's data may be lost. Type yes to go on: ", arg, kind)
		line, _ := bufio.NewReader(stdin(e)).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			return fmt.Errorf("fault inject %s: not confirmed; nothing was changed (--yes skips the question)", arg)
		}
	}
	err = inject(ctx, e, kind, paths[0], stripe)
	var en *errno.Errno
	var down *client.MDTDownError
	if errors.As(err, &en) || errors.As(err, &down) {
		// A path that does not resolve, or an MDT that does not answer:
		// name the path, not the lookup's layers ("fault inject /nope: no
		// such file or directory").
		return cli.OpError("fault inject", arg, err)
	}
	return err
}

func stdin(e cli.Env) io.Reader {
	if e.Stdin != nil {
		return e.Stdin
	}
	return os.Stdin
}

func stdinIsTerminal(e cli.Env) bool {
	return cli.IsTerminal(stdin(e))
}

// inject damages the object at path, from the file system root.
func inject(ctx context.Context, e cli.Env, kind, path string, stripe uint32) error {
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
	// Faults go to the MDT that holds the object, or for the kinds that
	// damage a remote directory's entry, to the parent's.
	on := fid.FromPB(obj.Fid)
	if fault.OnParentMDT(kd.Kind) {
		on = fid.FromPB(parent.Fid)
	}
	idx, err := k.c.MDTOf(on)
	if err != nil {
		return err
	}
	fc, err := k.faultClient(idx)
	if err != nil {
		return err
	}
	rep, err := fc.Inject(ctx, &pb.FaultInjectRequest{Kind: kind, Fid: obj.Fid, Parent: parent.Fid, Name: []byte(name), Stripe: stripe})
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
func FaultArm(ctx context.Context, e cli.Env, targetName, spec string) error {
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
		fc, err := k.faultClient(uint32(idx))
		if err != nil {
			return err
		}
		if rep, err = fc.Arm(ctx, req); err != nil {
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
