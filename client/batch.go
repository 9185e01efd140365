package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/wait"
	"github.com/detourhq/detour/wire"
)

// Outcome is what became of one request of PublishAll: its result, or why
// none arrived. Its Receipt always has the ID; the rest of it is zero when
// the request was not published.
type Outcome struct {
	Receipt
	Result chain.Result // zero (empty Status) when no result arrived
	Err    error        // wraps ErrNoResult or ErrNotPublished when Result is zero
	// Arrived is when the result reached the client or, for a result read
	// back from DETOUR_RESULTS, when the server stored it.
	Arrived time.Time
}

// HasResult reports whether a result arrived.
func (o Outcome) HasResult() bool { return o.Result.Status != "" }

// EndToEnd is the time from publish to the result's arrival. ok is false when
// there is no such time: not sent, no result, or a duplicate.
func (o Outcome) EndToEnd() (d time.Duration, ok bool) {
	if o.Published.IsZero() || !o.HasResult() || o.Duplicate || o.Arrived.Before(o.Published) {
		return 0, false
	}
	return o.Arrived.Sub(o.Published), true
}

// Options tune PublishAll. The zero value publishes as fast as
// acknowledgements come back and does not wait for results.
type Options struct {
	// Wait makes the run wait for every request's result.
	Wait bool
	// Rate is how many requests are published per second, on a fixed
	// schedule: a slow publish is made up for by the next ones rather than
	// lowering the rate. 0 or less publishes as fast as possible.
	Rate float64
	// Timeout bounds the wait for results once the last request is
	// published, and how long one failed publish is retried (a server
	// restart); 0 waits and retries until the context ends. Publishing
	// itself is not bounded by it, so a slow Rate does not eat into the
	// wait.
	Timeout time.Duration
	// OnRetry, if set, is called with the error of each publish that is
	// about to be retried.
	OnRetry func(error)
	// OnPublished is called after each request is published, OnResult once
	// per result that arrives. Calls are never concurrent with each other;
	// they run on the client's goroutines (OnResult on a NATS subscription's)
	// and must return quickly.
	OnPublished func(Outcome)
	OnResult    func(Outcome)
	// Stop, when closed, ends publishing early: the requests not yet sent
	// are marked ErrNotPublished, and those sent are still awaited. (Ending
	// the context instead ends the wait too.)
	Stop <-chan struct{}
}

// PublishAll publishes reqs to chainName in order, each as Publish does
// (a failed publish retried for up to opts.Timeout, and ErrNoStream retried
// too once a request of the run was stored: the stream is coming back after
// a restart), and, when opts.Wait is set, collects their results as Send
// does, on one subscription. Requests without an id get a NUID; reqs itself is not
// modified. The outcomes are in the order of reqs, one per request, whatever
// happened. The error is non-nil when publishing failed or the context ended
// before every request was sent (the results of those that were sent are
// still collected), and alone when nothing was sent; an id that is not a
// subject token (wire.ErrBadRequest) or that two requests share sends
// nothing. Stopping through opts.Stop is not an error. Once the wait ends,
// one last read of DETOUR_RESULTS, at most 5 s even after ctx ended, picks
// up the results whose replies were missed.
func (c *Client) PublishAll(ctx context.Context, chainName string, reqs []wire.Request, opts Options) ([]Outcome, error) {
	reqs = slices.Clone(reqs)
	inbox := c.nc.NewInbox()
	col := newCollector(reqs, opts)
	replySubjects := map[string]bool{}
	var invalid error
	for i := range reqs {
		r := &reqs[i]
		if r.ID == "" {
			r.ID = nuid.Next()
		} else if invalid == nil { // the first bad id is reported
			invalid = checkID(i, r.ID, col.index)
		}
		if opts.Wait {
			if r.ReplyTo == "" {
				r.ReplyTo = inbox + "." + r.ID
			} else {
				replySubjects[r.ReplyTo] = true
			}
		}
		col.outcomes[i].ID = r.ID
		col.index[r.ID] = i
	}
	if invalid != nil {
		col.unsent(0, invalid)
		return col.outcomes, invalid
	}
	if opts.Wait {
		// A request that names its own reply subject is answered there, not
		// on the inbox; listening there too keeps the run from waiting for
		// the timeout to read it back from the stream.
		replySubjects[inbox+".>"] = true
		for subject := range replySubjects {
			sub, err := c.nc.Subscribe(subject, func(m *nats.Msg) {
				if res, err := wire.DecodeResult(m.Data, m.Header); err == nil {
					col.deliver(res.ID, res, time.Now())
				}
			})
			if err != nil {
				err = fmt.Errorf("client: subscribing to %s: %w", subject, err)
				col.unsent(0, err)
				return col.outcomes, err
			}
			defer sub.Unsubscribe()
		}
	}

	sent, pubErr := c.publishAll(ctx, chainName, reqs, col, opts)
	if pubErr != nil {
		col.unsent(sent, pubErr)
	}
	if errors.Is(pubErr, ErrStopped) {
		pubErr = nil
	}
	if sent == 0 && pubErr != nil {
		return col.outcomes, pubErr
	}
	if pubErr != nil {
		pubErr = fmt.Errorf("client: publishing stopped after %d of %d requests: %w", sent, len(reqs), pubErr)
	}
	if !opts.Wait {
		return col.outcomes, pubErr
	}
	waitCtx, cancel := ctx, context.CancelFunc(func() {})
	if opts.Timeout > 0 {
		waitCtx, cancel = context.WithTimeout(ctx, opts.Timeout)
	}
	defer cancel()
	c.await(waitCtx, col)
	c.collectStored(context.WithoutCancel(ctx), col, col.pending(false))
	col.fail(0, ErrNoResult)
	return col.outcomes, pubErr
}

// checkID refuses the id of request i when it cannot be a subject token (a
// processor would dead-letter the request, and the reply subject the run
// gives it would not be one) or when an earlier request has it, in index.
func checkID(i int, id string, index map[string]int) error {
	if err := wire.ValidateID(id); err != nil {
		return fmt.Errorf("client: request %d: %w", i, err)
	}
	if first, twice := index[id]; twice {
		return fmt.Errorf("client: request %d: id %q is already request %d's", i, id, first)
	}
	return nil
}

// publishAll publishes reqs in order, paced, and stops at the first error
// or when opts.Stop closes, returning how many it published.
func (c *Client) publishAll(ctx context.Context, chainName string, reqs []wire.Request, col *collector, opts Options) (int, error) {
	pacer := wait.NewPacer(opts.Rate)
	pacing, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if opts.Stop != nil {
		// Ends when Stop closes or, at the latest, when publishAll returns.
		go func() {
			select {
			case <-opts.Stop:
				cancel(ErrStopped)
			case <-pacing.Done():
			}
		}()
	}
	for i, r := range reqs {
		if err := pacer.Wait(pacing); err != nil {
			return i, context.Cause(pacing)
		}
		at := time.Now()
		ack, err := c.publishRetrying(pacing, chainName, r, opts.Timeout, i > 0, opts.OnRetry)
		if err != nil {
			return i, err
		}
		col.published(i, at, ack)
	}
	return len(reqs), nil
}

// await blocks until every sent request has a result or ctx ends. Results of
// duplicates are not sent to this run's inbox, so they are polled from the
// stream meanwhile.
func (c *Client) await(ctx context.Context, col *collector) {
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-col.done:
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			// Every 5 s, look for all pending results too: a reply lost on
			// the inbox (a reconnect) is still stored.
			c.collectStored(ctx, col, col.pending(n%10 != 0))
		}
	}
}

// collectStored reads the results of pending from DETOUR_RESULTS, within 5 s.
func (c *Client) collectStored(ctx context.Context, col *collector, pending []Receipt) {
	if len(pending) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		return
	}
	for _, r := range pending {
		res, at, found, err := storedResult(ctx, s, r)
		switch {
		case found && err == nil:
			col.deliver(r.ID, res, at)
		case !found && err != nil:
			return // the stream is unreachable: the rest would fail alike
		}
	}
}

// collector holds the outcomes of one run while results arrive on NATS
// goroutines.
type collector struct {
	opts     Options
	index    map[string]int // written before any subscription starts, then only read
	mu       sync.Mutex
	outcomes []Outcome
	waiting  int // requests neither answered nor known to be unsent
	done     chan struct{}
}

func newCollector(reqs []wire.Request, opts Options) *collector {
	col := &collector{
		opts: opts, index: make(map[string]int, len(reqs)), outcomes: make([]Outcome, len(reqs)),
		waiting: len(reqs), done: make(chan struct{}),
	}
	if len(reqs) == 0 {
		close(col.done)
	}
	return col
}

func (col *collector) settle() {
	if col.waiting--; col.waiting == 0 {
		close(col.done)
	}
}

func (col *collector) published(i int, at time.Time, ack *jetstream.PubAck) {
	col.mu.Lock()
	defer col.mu.Unlock()
	col.outcomes[i].Published, col.outcomes[i].Duplicate = at, ack.Duplicate
	col.outcomes[i].Seq = ack.Sequence
	if col.opts.OnPublished != nil {
		col.opts.OnPublished(col.outcomes[i])
	}
}

// unsent marks requests from..end as never published because of err.
func (col *collector) unsent(from int, err error) {
	col.fail(from, fmt.Errorf("%w: %w", ErrNotPublished, err))
}

// fail gives err to the requests from..end that have neither a result nor
// an error yet.
func (col *collector) fail(from int, err error) {
	col.mu.Lock()
	defer col.mu.Unlock()
	for i := from; i < len(col.outcomes); i++ {
		if o := &col.outcomes[i]; !o.HasResult() && o.Err == nil {
			o.Err = err
			col.settle()
		}
	}
}

func (col *collector) deliver(id string, res chain.Result, at time.Time) {
	i, ok := col.index[id]
	if !ok {
		return
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	o := &col.outcomes[i]
	if o.HasResult() || o.Err != nil {
		return
	}
	o.Result, o.Arrived = res, at
	col.settle()
	if col.opts.OnResult != nil {
		col.opts.OnResult(*o)
	}
}

// pending lists the receipts of the sent requests still without a result,
// whose sequence a stored result must answer (one of an earlier request
// that used the id does not); onlyDuplicates narrows it to those JetStream
// took for duplicates.
func (col *collector) pending(onlyDuplicates bool) []Receipt {
	col.mu.Lock()
	defer col.mu.Unlock()
	return lo.FilterMap(col.outcomes, func(o Outcome, _ int) (Receipt, bool) {
		return o.Receipt, !o.HasResult() && o.Err == nil && !o.Published.IsZero() && (o.Duplicate || !onlyDuplicates)
	})
}
