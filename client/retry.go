package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/wait"
	"github.com/detourhq/detour/wire"
)

// Publishing a request is retried with exponential backoff and full jitter
// from publishBackoffBase to publishBackoffMax; each attempt is bounded by
// publishAttemptTimeout, so that one attempt stuck in a disconnect does not
// eat the whole retry budget.
const (
	publishBackoffBase    = 100 * time.Millisecond
	publishBackoffMax     = 2 * time.Second
	publishAttemptTimeout = 2 * time.Second
)

// publishRetrying publishes r as Publish documents, retrying for up to budget
// after the first failure (until ctx ends when budget is 0). ErrNoStream is
// final while nothing of the run is stored yet (an unknown chain), and
// retried once the run has stored a request (the stream is coming back
// after a restart).
func (c *Client) publishRetrying(ctx context.Context, chainName string, r wire.Request, budget time.Duration, stored bool, onRetry func(error)) (*jetstream.PubAck, error) {
	var giveUp time.Time
	for attempt := 0; ; attempt++ {
		attemptCtx, cancel := context.WithTimeout(ctx, publishAttemptTimeout)
		ack, err := c.publish(attemptCtx, chainName, r)
		cancel()
		if err == nil {
			return ack, nil
		}
		if ctx.Err() != nil || (errors.Is(err, ErrNoStream) && !stored) || errors.Is(err, wire.ErrFull) {
			return nil, err
		}
		if attempt == 0 && budget > 0 {
			giveUp = time.Now().Add(budget)
		}
		delay := chain.Backoff(attempt, publishBackoffBase, publishBackoffMax, rand.Float64)
		if !giveUp.IsZero() && time.Now().Add(delay).After(giveUp) {
			return nil, fmt.Errorf("%w (retried for %s)", err, budget)
		}
		if onRetry != nil {
			onRetry(err)
		}
		if err := wait.Sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}
