package cluster

import (
	"context"
	"fmt"
	"time"
)

// poll calls cond every interval until it returns true, returns an error, or ctx or timeout ends;
// the last condition error is wrapped in the timeout error.
func poll(ctx context.Context, interval, timeout time.Duration, what string, cond func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t := time.NewTicker(interval)
	defer t.Stop()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return nil
		}
		if err != nil && (last == nil || ctx.Err() == nil) {
			last = err // not the error of an attempt cut short by the deadline
		}
		select {
		case <-ctx.Done():
			if last != nil {
				return fmt.Errorf("waiting for %s: %w (last error: %w)", what, ctx.Err(), last)
			}
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}
