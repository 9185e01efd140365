package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// BenchmarkHandle is one delivery's whole life on a fast chain, one at a
// time: decode, run, store the result (waiting for its PubAck), ack. Its
// allocations per op are the processor's own cost per request beside the
// broker's; `go run ./cmd/bench` measures throughput and CPU against a
// minimal pipeline.
//
//	go test -run '^$' -bench Handle -benchmem ./stream
func BenchmarkHandle(b *testing.B) {
	srv := natstest.Start(b)
	nc, js := natstest.Connect(b, srv)
	ctx := context.Background()
	err := topology.Ensure(ctx, js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 1000,
		ResultTTL: time.Hour,
	})
	if err != nil {
		b.Fatal(err)
	}
	p, err := stream.NewProcessor(ctx, nc, js, stream.ProcessorConfig{
		Chains: map[string]stream.Runner{"default": &countingRunner{}}, ReplyPrefixes: []string{"detour.results."},
		MaxPayload: 1 << 20, RequestTTL: time.Hour, AckWait: 30 * time.Second,
	})
	if err != nil {
		b.Fatal(err)
	}
	for i := range b.N {
		body, _ := json.Marshal(wire.Request{ID: fmt.Sprintf("r%d", i), Messages: []chain.Message{{Role: "user", Content: "benchmark request"}}})
		if _, err := js.PublishAsync(wire.RequestSubject("default"), body); err != nil {
			b.Fatal(err)
		}
	}
	<-js.PublishAsyncComplete()
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		batch, err := cons.Fetch(min(b.N-done, 100), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			b.Fatal(err)
		}
		for msg := range batch.Messages() {
			p.Handle(ctx, "default", msg)
			done++
		}
		if err := batch.Error(); err != nil {
			b.Fatal(err)
		}
	}
}
