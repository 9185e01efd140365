package supervise

import (
	"context"
	"errors"
	"sync"
)

// Part is one long-running part: it runs until ctx ends, then returns nil.
// An error it returns stops every stage, from the inside out.
type Part func(ctx context.Context) error

// Run starts stages, the outermost first, and returns once every part has
// returned. The innermost stage runs on ctx: its parts stop when ctx ends
// or any part fails. Each outer stage's context ends only after every part
// of the stages inside it has returned. Run returns the errors of the
// parts that failed, joined in the order they failed; nil when none did.
func Run(ctx context.Context, stages ...[]Part) error {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	var mu sync.Mutex
	var errs []error
	fail := func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
		stop(err)
	}
	waits := make([]*sync.WaitGroup, len(stages))
	ends := make([]context.CancelFunc, len(stages))
	for i, parts := range stages {
		stageCtx, end := ctx, context.CancelFunc(func() {})
		if i < len(stages)-1 {
			// Not ended by ctx: by Run, once the inner stages returned.
			stageCtx, end = context.WithCancel(context.WithoutCancel(ctx))
		}
		waits[i], ends[i] = &sync.WaitGroup{}, end
		for _, part := range parts {
			waits[i].Go(func() {
				if err := part(stageCtx); err != nil {
					fail(err)
				}
			})
		}
	}
	for i := len(stages) - 1; i >= 0; i-- {
		ends[i]()
		waits[i].Wait()
	}
	mu.Lock()
	defer mu.Unlock()
	return errors.Join(errs...)
}
