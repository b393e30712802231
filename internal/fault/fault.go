// Package fault is Nacre's fault injection: named fault points that a
// test, the NACRE_FAULTS variable or `nacre fault arm` can arm in a running
// server (in the spirit of Lustre's fail_loc), the catalogue of metadata
// damage kinds that `nacre fault inject` applies (kinds.go), and failing
// storage for in-process tests (fs.go).
//
// A fault point is a name compiled into the code path it guards:
//
//	if err := fault.Hit("lfsck.scan.object"); err != nil { ... }
//
// Unarmed points cost one atomic load. An armed point acts when hit:
//
//	error   Hit returns an error (the caller treats it as an I/O error)
//	delay   Hit sleeps, then returns nil
//	crash   the process kills itself with SIGKILL (as kill -9 would)
//	panic   Hit panics (tests of recovery paths)
//
// with an optional count: the point fires that many times, then disarms.
//
// ArmList arms a comma-separated list of points; cmd/nacre arms the list
// NACRE_FAULTS gives in a metadata server as it starts and in a mount:
//
//	NACRE_FAULTS="lfsck.scan.object=delay:2ms,lfsck.checkpoint=crash*1"
package fault

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	pb "nacre/api/nacrepb"
)

// ErrInjected is wrapped by every error an armed point returns.
var ErrInjected = errors.New("injected fault")

// Action is what an armed point does.
type Action struct {
	Kind    string        // error, delay, crash, panic
	Delay   time.Duration // delay
	Count   int           // fire this many times, then disarm (0: always)
	Message string        // added to the error
}

type armed struct {
	a    Action
	left int64
	hits atomic.Int64
}

var (
	mu     sync.Mutex
	points = map[string]*armed{}
	any    atomic.Bool
	hits   sync.Map // name -> *atomic.Int64 of all hits while armed (tests)
)

// Arm arms a point; Kind "off" disarms it.
func Arm(name string, a Action) error {
	switch a.Kind {
	case "off":
		Disarm(name)
		return nil
	case "error", "delay", "crash", "panic":
	default:
		return fmt.Errorf("fault point %s: unknown action %q (error, delay, crash, panic, off)", name, a.Kind)
	}
	if name == "" {
		return errors.New("fault point: empty name")
	}
	mu.Lock()
	defer mu.Unlock()
	points[name] = &armed{a: a, left: int64(a.Count)}
	any.Store(true)
	return nil
}

// Disarm disarms a point.
func Disarm(name string) {
	mu.Lock()
	defer mu.Unlock()
	delete(points, name)
	any.Store(len(points) > 0)
}

// Reset disarms every point.
func Reset() {
	mu.Lock()
	defer mu.Unlock()
	points = map[string]*armed{}
	any.Store(false)
}

// Armed lists the armed points as "name=action".
func Armed() []string {
	mu.Lock()
	defer mu.Unlock()
	var out []string
	for n, p := range points {
		out = append(out, n+"="+Format(p.a))
	}
	sort.Strings(out)
	return out
}

// Format is a as Parse reads it: "error:msg", "delay:5ms*3".
func Format(a Action) string {
	s := a.Kind
	switch {
	case a.Kind == "delay":
		s += ":" + a.Delay.String()
	case a.Kind == "error" && a.Message != "":
		s += ":" + a.Message
	}
	if a.Count > 0 {
		s += "*" + strconv.Itoa(a.Count)
	}
	return s
}

// Hits is how often a point fired since the process started.
func Hits(name string) int64 {
	if v, ok := hits.Load(name); ok {
		return v.(*atomic.Int64).Load()
	}
	return 0
}

// Hit is the fault point name: nil unless the point is armed.
func Hit(name string) error {
	if !any.Load() {
		return nil
	}
	mu.Lock()
	p := points[name]
	if p == nil {
		mu.Unlock()
		return nil
	}
	a := p.a
	if p.left > 0 {
		p.left--
		if p.left == 0 {
			delete(points, name)
			any.Store(len(points) > 0)
		}
	}
	mu.Unlock()
	v, _ := hits.LoadOrStore(name, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	switch a.Kind {
	case "delay":
		time.Sleep(a.Delay)
		return nil
	case "crash":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		time.Sleep(time.Hour) // the signal is on its way
		return nil
	case "panic":
		panic(fmt.Sprintf("fault point %s: injected panic %s", name, a.Message))
	}
	if a.Message != "" {
		return fmt.Errorf("%s: %w (%s)", name, ErrInjected, a.Message)
	}
	return fmt.Errorf("%s: %w", name, ErrInjected)
}

// Parse reads "name=action[:arg][*count]", e.g. "lfsck.scan.object=delay:5ms*100".
func Parse(spec string) (string, Action, error) {
	name, act, ok := strings.Cut(strings.TrimSpace(spec), "=")
	if !ok || name == "" {
		return "", Action{}, fmt.Errorf("fault spec %q: want name=action[:arg][*count]", spec)
	}
	var a Action
	if act, cnt, ok := strings.Cut(act, "*"); ok {
		n, err := strconv.Atoi(cnt)
		if err != nil || n < 0 {
			return "", a, fmt.Errorf("fault spec %q: bad count %q", spec, cnt)
		}
		a.Count = n
		spec = act
	} else {
		spec = act
	}
	kind, arg, _ := strings.Cut(spec, ":")
	a.Kind = kind
	switch kind {
	case "delay":
		d, err := time.ParseDuration(arg)
		if err != nil {
			return "", a, fmt.Errorf("fault spec for %s: bad delay %q", name, arg)
		}
		a.Delay = d
	case "error":
		a.Message = arg
	case "crash", "panic", "off":
	default:
		return "", a, fmt.Errorf("fault spec for %s: unknown action %q (error, delay, crash, panic, off)", name, kind)
	}
	return name, a, nil
}

// ArmList arms the points of list, comma-separated specs as Parse reads
// them ("" arms nothing).
func ArmList(list string) error {
	if list == "" {
		return nil
	}
	for _, spec := range strings.Split(list, ",") {
		if strings.TrimSpace(spec) == "" {
			continue
		}
		name, a, err := Parse(spec)
		if err != nil {
			return err
		}
		if err := Arm(name, a); err != nil {
			return err
		}
	}
	return nil
}

// ArmPB arms a point as a FaultArmRequest (the Fault and OSS services) says.
func ArmPB(req *pb.FaultArmRequest) error {
	return Arm(req.Point, Action{Kind: req.Action, Delay: time.Duration(req.DelayMs) * time.Millisecond, Count: int(req.Count), Message: req.Message})
}
