package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// baselineReady is the line the baseline prints once it is consuming.
const baselineReady = "baseline: consuming"

// baselineResult is the result the baseline stores: small, fixed content.
type baselineResult struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Content string `json:"content"`
	Model   string `json:"model"`
}

// RunBaseline is the baseline pipeline, the least a JetStream worker must do
// for what detour does to a request: with the fast pull API (Consume) on its
// own work-queue stream and durable consumer, workers goroutines each decode
// a request, store a small result under the baseline's results prefix + id with a
// JetStream publish that waits for the PubAck, and only then ack. It runs
// until ctx ends, then stops pulling, lets the workers finish and returns.
func RunBaseline(ctx context.Context, url string, workers int, log io.Writer) error {
	nc, err := nats.Connect(url, nats.Name("detour-bench-baseline"), nats.MaxReconnects(-1))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, _ := jetstream.New(nc) // fails only on bad options
	cons, err := js.Consumer(ctx, baselinePipe.stream, baselinePipe.consumer)
	if err != nil {
		return fmt.Errorf("consumer %s: %w", baselinePipe.consumer, err)
	}
	work := make(chan jetstream.Msg)
	stopping := make(chan struct{})
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for msg := range work {
				baselineHandle(js, msg)
			}
		})
	}
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		select {
		case work <- msg:
		case <-stopping:
			_ = msg.Nak()
		}
	}, jetstream.PullMaxMessages(workers))
	if err != nil {
		close(work)
		wg.Wait()
		return err
	}
	fmt.Fprintln(log, baselineReady)
	<-ctx.Done()
	close(stopping)
	cc.Stop()
	<-cc.Closed()
	close(work)
	wg.Wait()
	return nc.Drain()
}

// baselineHandle answers one request: decode, store the result, ack.
func baselineHandle(js jetstream.JetStream, msg jetstream.Msg) {
	var req struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(msg.Data(), &req); err != nil || req.ID == "" {
		_ = msg.Term()
		return
	}
	data, _ := json.Marshal(baselineResult{ID: req.ID, Status: "ok", Content: "ok", Model: "baseline"}) // strings only
	res := nats.NewMsg(baselinePipe.prefix + req.ID)
	res.Data = data
	res.Header.Set(nats.MsgIdHdr, req.ID)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := js.PublishMsg(ctx, res); err != nil {
		_ = msg.Nak()
		return
	}
	_ = msg.Ack()
}
