package mdt

import (
	"testing"

	"nacre/internal/fault"
)

// TestEveryKindHasABuilder: every kind of the catalogue `nacre fault
// list` shows can be injected, and every builder is a kind of the
// catalogue (adding a kind is one row there and one builder here).
func TestEveryKindHasABuilder(t *testing.T) {
	for _, k := range fault.Kinds {
		if faultBuilders[k.Kind] == nil {
			t.Errorf("fault kind %s is in the catalogue but has no builder", k.Kind)
		}
	}
	for k := range faultBuilders {
		if _, ok := fault.LookupKind(string(k)); !ok {
			t.Errorf("fault kind %s has a builder but is not in the catalogue", k)
		}
	}
}
