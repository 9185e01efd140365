package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// resultWatch reads a run's results back from the results stream as they are
// stored, noting when the bench saw each.
type resultWatch struct {
	pipe pipeline
	tag  string // of the run's request ids
	n    int
	cc   jetstream.ConsumeContext

	mu       sync.Mutex
	seen     []time.Time     // by request index; zero until seen
	count    int             // distinct requests answered
	bytes    int64           // payload and headers of the first result of each
	notOK    int             // results whose Detour-Status is not ok
	last     time.Time       // when the last new result was seen
	kept     []jetstream.Msg // the first result of each, once keep is set
	keep     bool
	progress time.Time // when the count last grew, or the clock restarted
	done     chan struct{}
}

// watchResults follows the results stream of pipe, which must be empty or
// hold only other runs' results, for the n results of a new run.
func (b *Bench) watchResults(ctx context.Context, pipe pipeline, n int) (*resultWatch, error) {
	b.seq++
	w := &resultWatch{pipe: pipe, tag: fmt.Sprint(b.runID, b.seq), n: n, seen: make([]time.Time, n), done: make(chan struct{})}
	cons, err := b.broker.js.OrderedConsumer(ctx, pipe.results, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{pipe.prefix + ">"},
	})
	if err == nil {
		w.cc, err = cons.Consume(w.handle, jetstream.PullMaxMessages(1000))
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", pipe.results, err)
	}
	return w, nil
}

func (w *resultWatch) handle(msg jetstream.Msg) {
	now := time.Now()
	i := requestIndex(w.tag, strings.TrimPrefix(msg.Subject(), w.pipe.prefix))
	if i < 0 || i >= w.n {
		return
	}
	status := msg.Headers().Get(wire.HeaderStatus)
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.seen[i].IsZero() {
		return
	}
	w.seen[i], w.last, w.progress = now, now, now
	w.count++
	if w.keep {
		w.kept = append(w.kept, msg)
	}
	w.bytes += int64(len(msg.Data()))
	for k, vs := range msg.Headers() {
		for _, v := range vs {
			w.bytes += int64(len(k) + len(v) + 4) // "k: v\r\n"
		}
	}
	if status != "" && status != string(chain.StatusOK) {
		w.notOK++
	}
	if w.count == w.n {
		close(w.done)
	}
}

func (w *resultWatch) seenCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.count
}

// wait waits until every result is seen. It fails when no new result
// arrives for stall, counted from now, when the run's work begins, or when a
// process of ps exits.
func (w *resultWatch) wait(ctx context.Context, stall time.Duration, ps []*proc) error {
	w.mu.Lock()
	w.progress = time.Now()
	w.mu.Unlock()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return nil
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-tick.C:
		}
		if err := anyExited(ps); err != nil {
			return err
		}
		w.mu.Lock()
		count, since := w.count, time.Since(w.progress)
		w.mu.Unlock()
		if since > stall {
			return fmt.Errorf("results stopped arriving: %d of %d results after %s without a new one", count, w.n, stall)
		}
	}
}

// results returns when each request's result was seen, the last of them,
// the mean result size in bytes and how many were not ok.
func (w *resultWatch) results() (seen []time.Time, last time.Time, meanBytes float64, notOK int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen, w.last, float64(w.bytes) / float64(max(w.count, 1)), w.notOK
}
