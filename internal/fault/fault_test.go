package fault

import (
	"errors"
	"testing"
	"time"
)

func TestParseArmHitAndCount(t *testing.T) {
	defer Reset()
	name, a, err := Parse("x.y=delay:5ms*2")
	if err != nil || name != "x.y" || a.Kind != "delay" || a.Delay != 5*time.Millisecond || a.Count != 2 {
		t.Fatalf("parse: %q %+v %v", name, a, err)
	}
	for _, bad := range []string{"", "x", "x=bogus", "x=delay:zz", "x=error*-1"} {
		if _, _, err := Parse(bad); err == nil {
			t.Fatalf("parse %q: no error", bad)
		}
	}
	if err := Hit("p"); err != nil {
		t.Fatal("an unarmed point fired")
	}
	Arm("p", Action{Kind: "error", Count: 2, Message: "boom"})
	for i := 0; i < 2; i++ {
		if err := Hit("p"); !errors.Is(err, ErrInjected) {
			t.Fatalf("hit %d: %v", i, err)
		}
	}
	if err := Hit("p"); err != nil || len(Armed()) != 0 {
		t.Fatalf("a point armed twice fired a third time: %v %v", err, Armed())
	}
	if Hits("p") != 2 {
		t.Fatalf("hits %d", Hits("p"))
	}
	if err := ArmList("a=error,b=delay:1ms"); err != nil || len(Armed()) != 2 {
		t.Fatalf("list: %v %v", err, Armed())
	}
	Arm("a", Action{Kind: "off"})
	if len(Armed()) != 1 {
		t.Fatalf("off: %v", Armed())
	}
}

func TestEveryKindHasAComponentAndCounter(t *testing.T) {
	seen := map[Kind]bool{}
	for _, k := range Kinds {
		if seen[k.Kind] || k.Component == "" || k.Counter == "" || (k.Target != "file" && k.Target != "dir") {
			t.Fatalf("bad kind %+v", k)
		}
		seen[k.Kind] = true
		if _, ok := LookupKind(string(k.Kind)); !ok {
			t.Fatal(k.Kind)
		}
	}
}
