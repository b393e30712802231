package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"nacre/internal/cli"
	"nacre/internal/layout"
)

// stripeFlags are -c/-S/-i of put and setstripe.
type stripeFlags struct {
	count, offset int
	size          string
}

func (s *stripeFlags) add(cmd *cobra.Command) {
	cmd.Flags().IntVarP(&s.count, "stripe-count", "c", 0, "stripe count (-1: all OSTs)")
	cmd.Flags().StringVarP(&s.size, "stripe-size", "S", "", "stripe size (e.g. 64K, 1M, 4M)")
	cmd.Flags().IntVarP(&s.offset, "stripe-index", "i", -1, "first OST index (-1: any)")
}

// opts reads the flags; a count or size of 0 given explicitly is refused
// (0 would mean "the default" otherwise).
func (s *stripeFlags) opts(cmd *cobra.Command) (cli.StripeOpts, error) {
	so := cli.StripeOpts{Count: s.count, Offset: s.offset}
	if cmd.Flags().Changed("stripe-count") && s.count == 0 {
		return so, fmt.Errorf("-c 0: 0 is not a valid stripe count: use -1 (all OSTs) or 1..%d", layout.MaxStripeCount)
	}
	if s.size != "" {
		v, err := layout.ParseSize(s.size)
		if err != nil {
			return so, err
		}
		if v == 0 {
			return so, fmt.Errorf("-S %s: 0 is not a valid stripe size: use a multiple of 64K such as 64K, 1M or 4M", s.size)
		}
		so.Size = v
	}
	if cmd.Flags().Changed("stripe-index") && s.offset < -1 {
		return so, fmt.Errorf("-i %d: an OST index is 0 or more (-1: any)", s.offset)
	}
	return so, nil
}
