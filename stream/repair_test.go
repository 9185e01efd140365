package stream_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

func repairTopology() topology.Streams {
	return topology.Streams{
		Chains: []string{"default", "other"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		ResultTTL: time.Hour,
	}
}

// within polls cond every 10ms until it holds or limit passes.
func within(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(limit); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsumeRecreatesTheRequestsStream: when the requests stream is
// deleted under a running consume loop, its pulls fail (Health says so), the
// loop recreates the stream and its consumers, and requests published
// afterwards are answered.
func TestConsumeRecreatesTheRequestsStream(t *testing.T) {
	nc, js := natstest.Connect(t, natstest.Start(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	topo := repairTopology()
	if err := topology.Ensure(ctx, js, topo); err != nil {
		t.Fatal(err)
	}
	repair, health := topology.NewRepairer(js, topo, nil), &stream.Health{}
	runner := &countingRunner{}
	p, err := stream.NewProcessor(ctx, nc, js, stream.ProcessorConfig{
		Chains:        map[string]stream.Runner{"default": runner, "other": runner},
		ReplyPrefixes: []string{"detour.results."}, MaxPayload: 1 << 20, RequestTTL: time.Hour,
		AckWait: 30 * time.Second, Repair: repair, Health: health,
	})
	if err != nil {
		t.Fatal(err)
	}
	consumed := make(chan error, 1)
	go func() {
		consumed <- stream.Consume(ctx, js, p, stream.ConsumerConfig{
			Chains: topo.Chains, Workers: 4, ShutdownTimeout: time.Second, Repair: repair, Health: health,
		})
	}()
	answered := func(id string) bool {
		s, err := js.Stream(ctx, wire.ResultsStream)
		if err != nil {
			return false
		}
		_, err = s.GetLastMsgForSubject(ctx, wire.ResultSubject(id))
		return err == nil
	}
	publish := func(id string) {
		t.Helper()
		body, _ := json.Marshal(wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "hi"}}})
		if _, err := js.Publish(ctx, wire.RequestSubject("default"), body); err != nil {
			t.Fatal(err)
		}
	}
	publish("before")
	within(t, 10*time.Second, "the first request answered", func() bool { return answered("before") })

	if err := js.DeleteStream(ctx, wire.RequestsStream); err != nil {
		t.Fatal(err)
	}
	sawFailing := false
	within(t, 10*time.Second, "the requests stream recreated and pulled from again", func() bool {
		if health.Err() != nil {
			sawFailing = true
			return false
		}
		_, err := js.Stream(ctx, wire.RequestsStream)
		return sawFailing && err == nil
	})
	for _, c := range topo.Chains {
		if _, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName(c)); err != nil {
			t.Fatalf("consumer of %s: %v", c, err)
		}
	}
	publish("after")
	within(t, 10*time.Second, "a request published after the repair answered", func() bool { return answered("after") })
	cancel()
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}
}
