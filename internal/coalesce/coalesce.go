package coalesce

import (
	"context"
	"sync"
	"time"
)

// Gate runs a function for many concurrent callers: one run at a time,
// shared by every caller that arrives while it runs, and at most one start
// per Every. The zero value runs at most one at a time, with no interval and
// no time limit. A Gate must not be copied after first use.
type Gate struct {
	// Every is the least time from the end of one run to the start of the
	// next; a call in between returns the last run's error without running.
	Every time.Duration
	// Timeout bounds one run; zero means no bound. A run is detached from
	// the caller that started it, so that caller leaving does not fail the
	// others waiting on it; this is what bounds it instead.
	Timeout time.Duration

	mu      sync.Mutex
	running chan struct{} // closed when the run in progress ends; nil when none
	ended   time.Time     // when the last run ended
	err     error         // the last run's error
}

// Do runs f, or shares a run of f that is in progress or ended within
// Every, and returns that run's error. A caller that waits on another's run
// returns early with ctx's cause if ctx ends; the caller that starts a run
// waits for it to end, which Timeout bounds.
func (g *Gate) Do(ctx context.Context, f func(context.Context) error) error {
	g.mu.Lock()
	if done := g.running; done != nil {
		g.mu.Unlock()
		select {
		case <-done:
			g.mu.Lock()
			defer g.mu.Unlock()
			return g.err
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
	if !g.ended.IsZero() && time.Since(g.ended) < g.Every {
		defer g.mu.Unlock()
		return g.err
	}
	done := make(chan struct{})
	g.running = done
	g.mu.Unlock()

	runCtx := context.WithoutCancel(ctx)
	cancel := context.CancelFunc(func() {})
	if g.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(runCtx, g.Timeout)
	}
	err := f(runCtx)
	cancel()

	g.mu.Lock()
	g.running, g.ended, g.err = nil, time.Now(), err
	g.mu.Unlock()
	close(done)
	return err
}
