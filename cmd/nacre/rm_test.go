package main

import (
	"strings"
	"testing"
)

func TestRmWithoutOperands(t *testing.T) {
	if _, err := runNacre(t, "rm"); err == nil || !strings.Contains(err.Error(), "give the paths to remove") {
		t.Errorf("rm: %v", err)
	}
	if _, err := runNacre(t, "rm", "-f"); err != nil {
		t.Errorf("rm -f with no operand, as rm(1), is no error: %v", err)
	}
}
