package itest

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// TestMain keeps the integration tier out of the fast one: under -short
// it builds nothing, starts nothing and passes, saying so in one line.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		fmt.Println("itest: the integration tests start real clusters; run them without -short")
		os.Exit(0)
	}
	os.Exit(m.Run())
}
