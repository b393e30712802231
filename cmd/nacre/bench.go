package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"nacre/internal/layout"
)

// newBenchCommand is `nacre bench`: a file per benchmark (internal/bench).
func newBenchCommand(g *globals) *cobra.Command {
	top := &cobra.Command{Use: "bench", Short: "Benchmarks: md (metadata), survey, io, age, popd, compare, lfsck", GroupID: "admin"}
	top.AddCommand(newBenchMDCommand(g), newBenchSurveyCommand(g), newBenchIOCommand(g), newBenchAgeCommand(g), newBenchCompareCommand(),
		newBenchPopdCommand(g), newBenchLfsckCommand(g))
	return top
}

// parseInts reads a list of numbers: 1,2,4,8.
func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%q is not a list of numbers like 1,2,4,8", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// parseSizes reads a list of sizes: 64K,1M,4M.
func parseSizes(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		v, err := layout.ParseSize(f)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
