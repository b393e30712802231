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
	cmd.Flags().IntVarP(&s.count, "stripe-count", "c", 0, "stripe count (-1: all OSTs; 0: the file system's default)")
	cmd.Flags().StringVarP(&s.size, "stripe-size", "S", "", "stripe size (e.g. 64K, 1M, 4M; 0: the file system's default)")
	cmd.Flags().IntVarP(&s.offset, "stripe-index", "i", -1, "first OST index (-1: any)")
}

// opts reads the flags. A count or size of 0 is the file system's
// default, as Lustre's lfs setstripe takes it: `setstripe -c 0 DIR` gives
// the directory a layout of defaults.
func (s *stripeFlags) opts(cmd *cobra.Command) (cli.StripeOpts, error) {
	fl := cmd.Flags()
	so := cli.StripeOpts{Count: s.count, Offset: s.offset,
		Given: fl.Changed("stripe-count") || fl.Changed("stripe-size") || fl.Changed("stripe-index")}
	if s.size != "" {
		v, err := layout.ParseSize(s.size)
		if err != nil {
			return so, err
		}
		so.Size = v
	}
	if cmd.Flags().Changed("stripe-index") && s.offset < -1 {
		return so, fmt.Errorf("-i %d: an OST index is 0 or more (-1: any)", s.offset)
	}
	return so, nil
}
