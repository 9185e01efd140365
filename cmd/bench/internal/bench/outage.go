package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/samber/lo"

	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/kvstate"
	"github.com/detourhq/detour/wire"
)

// deadProvider is the outage chain's primary (fakeChain's first).
const deadProvider = "fake"

// outage runs the outage scenario once a round.
func (b *Bench) outage(ctx context.Context) (*OutageReport, error) {
	measured, err := rounds(b, Outage, []string{deadProvider}, func(string) (OutageRounds, string, error) {
		res, err := b.outageRun(ctx)
		return res, fmt.Sprintf("%d calls to the dead provider (threshold %d, %d requests in flight at the cooldown), last %.1f ms after it",
			res.Calls, fakeFailureThreshold, res.RequestsInFlightAtOpen, res.LastCallAfterOpenMs), err
	})
	if err != nil {
		return nil, err
	}
	return summarizeOutage(b.opts, measured[0]), nil
}

// outageRun answers the backlog through a dead primary and a healthy backup
// and reads, from the dead fake and the provider bucket, what the outage
// cost.
func (b *Bench) outageRun(ctx context.Context) (res OutageRounds, _ error) {
	c := fakeChain(providertest.Status(500), providertest.OK())
	defer c.close()
	dead := c.fakes[0]
	run := runSpec{pipe: detourPipe, procs: outageProcs, workers: outageWorkers,
		maxAckPending: max(defaults.MaxAckPending, outageProcs*outageWorkers), chain: c}
	// What the bench notes when the cooldown key appears, set before seen
	// is closed: the key's creation by the server's clock, and the dead
	// provider's calls in progress.
	var (
		created  time.Time
		inFlight int
	)
	seen := make(chan struct{})
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	var results *resultWatch
	released := func(ctx context.Context, w *resultWatch) error {
		w.mu.Lock()
		results, w.keep = w, true
		w.mu.Unlock()
		kv, err := b.broker.js.KeyValue(ctx, kvstate.Bucket)
		if err != nil {
			return err
		}
		watcher, err := kv.Watch(watchCtx, kvstate.CooldownKey(deadProvider), jetstream.UpdatesOnly())
		if err != nil {
			return err
		}
		go func() {
			defer func() { _ = watcher.Stop() }()
			for e := range watcher.Updates() {
				if e != nil && e.Operation() == jetstream.KeyValuePut {
					inFlight, created = dead.InFlight(), e.Created()
					close(seen)
					return
				}
			}
		}()
		return nil
	}
	if _, err := b.backlog(ctx, run, b.opts.OutageRequests, released); err != nil {
		return res, err
	}
	select {
	case <-seen:
	case <-time.After(5 * time.Second):
		return res, errors.New("no cooldown key appeared for the dead provider")
	}
	res.Calls, res.ProviderInFlightAtOpen = dead.Requests(), inFlight
	results.mu.Lock()
	kept := results.kept
	results.mu.Unlock()
	var err error
	if res.RequestsInFlightAtOpen, err = inFlightAt(kept, created); err != nil {
		return res, err
	}
	received := dead.Received()
	res.CallsBeforeOpen = lo.CountBy(received, func(r providertest.Request) bool { return r.At.Before(created) })
	last := lo.MaxBy(received, func(a, b providertest.Request) bool { return a.At.After(b.At) })
	res.LastCallAfterOpenMs = millis(last.At.Sub(created))
	return res, nil
}

// inFlightAt counts the requests of results in flight at t, by the server's
// clock: those whose chain began by t (the result's store time less its
// latency_ms) and whose result was stored after t.
func inFlightAt(results []jetstream.Msg, t time.Time) (int, error) {
	count := 0
	for _, msg := range results {
		meta, err := msg.Metadata()
		if err != nil {
			return 0, err
		}
		res, err := wire.DecodeResult(msg.Data(), msg.Headers())
		if err != nil {
			return 0, fmt.Errorf("result %s: %w", msg.Subject(), err)
		}
		start := meta.Timestamp.Add(-time.Duration(res.LatencyMs) * time.Millisecond)
		if !start.After(t) && meta.Timestamp.After(t) {
			count++
		}
	}
	return count, nil
}
