package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"

	"nacre/internal/client"
)

// SetStripe sets a directory's default layout, sets the layout of an empty
// file, or creates a new file with the layout (as `lfs setstripe` does).
func SetStripe(ctx context.Context, e Env, arg string, so StripeOpts) error {
	l, err := so.layout()
	if err != nil {
		return err
	}
	if l == nil {
		return fmt.Errorf("setstripe %s: give at least one of -c COUNT, -S SIZE, -i OST", arg)
	}
	c, ps, err := e.open(ctx, arg)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := so.checkOSTs(ctx, c); err != nil {
		return err
	}
	p := ps[0]
	ino, err := c.Resolve(ctx, p, true)
	if errors.Is(err, syscall.ENOENT) {
		parent, name, err := c.ResolveParent(ctx, p)
		if err != nil {
			return opError("setstripe", arg, err)
		}
		nino, _, err := c.Create(ctx, fidOf(parent), name, syscall.S_IFREG|0o644, client.CreateOpts{Exclusive: true, Layout: l})
		if err != nil {
			return opError("setstripe", arg, err)
		}
		// A file made for its layout is no use with fewer stripes than
		// asked (as put refuses them): it goes again.
		if got, want, why, short := stripesShort(ctx, c, l, nino); short {
			if _, uerr := c.Unlink(ctx, fidOf(parent), name); uerr != nil {
				return fmt.Errorf("setstripe %s: created with %s, not %d, as %s; and removing it failed: %v", arg, plural(got, "stripe"), want, why, uerr)
			}
			return fmt.Errorf("setstripe %s: not created: it would have %s, not %d, as %s; %sgive -c %d", arg, plural(got, "stripe"), want, why, retryHint(why), got)
		}
		return nil
	}
	if err != nil {
		return opError("setstripe", arg, err)
	}
	nino, err := c.SetLayout(ctx, fidOf(ino), l)
	if err != nil {
		return opError("setstripe", arg, err)
	}
	if nino != nil && ino.Mode&syscall.S_IFMT == syscall.S_IFREG {
		if got, want, why, short := stripesShort(ctx, c, l, nino); short {
			retry := "run setstripe again once the OSTs are up"
			switch hint := retryHint(why); {
			case hint == "":
				retry = fmt.Sprintf("run setstripe again with -c %d or less", got)
			case strings.HasPrefix(hint, "remove"):
				retry = "remove files to make room and run setstripe again"
			}
			return fmt.Errorf("setstripe %s: it has %s, not %d, as %s; %s (the file is still empty)", arg, plural(got, "stripe"), want, why, retry)
		}
	}
	return nil
}
