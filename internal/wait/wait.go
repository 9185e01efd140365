package wait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx ends and then returns its cause. A d of zero
// or less returns at once, with ctx's error if it has ended.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return context.Cause(ctx)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
