package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/wait"
	"github.com/detourhq/detour/wire"
)

// requestID is the id of request i of a run.
func requestID(tag string, i int) string { return fmt.Sprintf("%s-%d", tag, i) }

// requestIndex is the i of requestID(tag, i), or -1 for an id of another run.
func requestIndex(tag, id string) int {
	rest, ok := strings.CutPrefix(id, tag+"-")
	i, err := strconv.Atoi(rest)
	if !ok || err != nil || i < 0 {
		return -1
	}
	return i
}

// requestMsg is a JSON request of about size bytes, with one user message
// padded to that size, published with its id as Nats-Msg-Id, as the
// publisher command sends them.
func requestMsg(subject, id string, size int) *nats.Msg {
	req := wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "benchmark request " + id}}}
	data, _ := json.Marshal(req) // cannot fail: strings only
	if pad := size - len(data); pad > 0 {
		req.Messages[0].Content += " " + strings.Repeat("x", pad-1)
		data, _ = json.Marshal(req)
	}
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(wire.HeaderMsgID, id)
	return m
}

// publish publishes the requests of w's run, at rate requests/s if rate is
// above 0 (stopping if a process of ps exits), and returns when each was
// published, once the stream has stored every one.
func (b *Bench) publish(ctx context.Context, w *resultWatch, rate int, ps []*proc) ([]time.Time, error) {
	n := w.n
	var pacer *wait.Pacer
	if rate > 0 {
		pacer = wait.NewPacer(float64(rate))
	}
	published := make([]time.Time, n)
	futures := make([]jetstream.PubAckFuture, n)
	for i := range n {
		if pacer != nil {
			if err := pacer.Wait(ctx); err != nil {
				return nil, err
			}
			if i%rate == 0 {
				if err := anyExited(ps); err != nil {
					return nil, err
				}
			}
		}
		msg := requestMsg(w.pipe.subject, requestID(w.tag, i), b.opts.RequestBytes)
		published[i] = time.Now()
		// When too many wait for their PubAcks, a publish may wait as long
		// as a run may go without progress, rather than the client's
		// 200 ms: a busy machine is slow, not broken.
		f, err := b.broker.js.PublishMsgAsync(msg, jetstream.WithStallWait(b.opts.Stall))
		if err != nil {
			return nil, fmt.Errorf("publishing request %d: %w", i, err)
		}
		futures[i] = f
	}
	select {
	case <-b.broker.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return nil, fmt.Errorf("publishing %d requests: not stored within a minute", n)
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				return nil, fmt.Errorf("publishing request %d: refused as a duplicate", i)
			}
		case err := <-f.Err():
			return nil, fmt.Errorf("publishing request %d: %w", i, err)
		}
	}
	return published, nil
}
