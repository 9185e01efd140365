package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/wire"
)

// requestID is the id of request i of a run.
func requestID(tag string, i int) string { return fmt.Sprintf("%s-%d", tag, i) }

// requestIndex is the i of requestID(tag, i), or -1 for an id of another run.
func requestIndex(tag, id string) int {
	rest, ok := strings.CutPrefix(id, tag+"-")
	if !ok {
		return -1
	}
	i := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			return -1
		}
		i = i*10 + int(c-'0')
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

// preload queues n requests of the run tag and waits until the stream has
// stored every one.
func (b *Bench) preload(ctx context.Context, subject, tag string, n int) error {
	futures := make([]jetstream.PubAckFuture, 0, n)
	for i := range n {
		f, err := b.broker.js.PublishMsgAsync(requestMsg(subject, requestID(tag, i), b.opts.RequestBytes), b.stallWait())
		if err != nil {
			return fmt.Errorf("queueing request %d: %w", i, err)
		}
		futures = append(futures, f)
	}
	select {
	case <-b.broker.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return fmt.Errorf("queueing %d requests: not stored within a minute", n)
	case <-ctx.Done():
		return context.Cause(ctx)
	}
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			if ack.Duplicate {
				return fmt.Errorf("queueing request %d: refused as a duplicate", i)
			}
		case err := <-f.Err():
			return fmt.Errorf("queueing request %d: %w", i, err)
		}
	}
	return nil
}

// stallWait lets an asynchronous publish wait, when too many are waiting for
// their PubAcks, as long as a run may go without progress, rather than the
// client's 200 ms: a busy machine is slow, not broken.
func (b *Bench) stallWait() jetstream.PublishOpt { return jetstream.WithStallWait(b.opts.Stall) }
