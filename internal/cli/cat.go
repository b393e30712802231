package cli

import (
	"context"
	"fmt"
)

// Cat writes files to the output, in order; a file that cannot be read
// is reported and the next one written.
func Cat(ctx context.Context, e Env, args []string) error {
	c, ops, err := e.openEach(ctx, args)
	if err != nil {
		return err
	}
	if c != nil {
		defer c.Close()
	}
	r := e.reporter("cat")
	for i, op := range ops {
		if op.Err == nil {
			op.Err = func() error {
				ino, err := c.Resolve(ctx, op.Path, true)
				if err != nil {
					return err
				}
				if isDir(ino) {
					return fmt.Errorf("is a directory")
				}
				if !isReg(ino) {
					return fmt.Errorf("not a regular file")
				}
				return copyOut(ctx, c, ino, e.Out, nil)
			}()
		}
		if op.Err != nil {
			if fatal(ctx, op.Err) {
				return r.stop(args, i, op.Err)
			}
			r.fail(op.Arg, op.Err)
		}
	}
	return r.result()
}
