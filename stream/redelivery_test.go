package stream_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// countingRunner answers every request and counts the calls.
type countingRunner struct{ calls atomic.Int32 }

func (r *countingRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	r.calls.Add(1)
	return chain.Result{ID: req.ID, Status: chain.StatusOK, Content: "fresh", Provider: "p", Model: "m"}, nil
}

// TestRedeliveryOfAnsweredRequestCallsNothing checks step 3 of a delivery's
// life: when a request is delivered again after its result was stored (a
// crash or a lost ack), it is acked without running the chain and without a
// second result.
func TestRedeliveryOfAnsweredRequestCallsNothing(t *testing.T) {
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	err := stream.EnsureTopology(ctx, js, stream.Topology{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		RequestTTL: time.Hour, ResultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	runner := &countingRunner{}
	p, err := stream.NewProcessor(ctx, nc, js, stream.ProcessorConfig{
		Chains: map[string]stream.Runner{"default": runner}, ReplyPrefixes: []string{"detour.results."},
		MaxPayload: 1 << 20, RequestTTL: time.Hour, AckWait: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The deadline passes between the first delivery and the redelivery: an
	// answered request must still be recognised, not expired after the fact.
	deadline := time.Now().Add(1500 * time.Millisecond).UTC().Truncate(time.Second).Add(time.Second)
	body, _ := json.Marshal(wire.Request{ID: "once", Messages: []chain.Message{{Role: "user", Content: "hi"}}, Deadline: deadline.Format(time.RFC3339)})
	pub, err := js.Publish(ctx, wire.RequestSubject("default"), body)
	if err != nil {
		t.Fatal(err)
	}

	// First delivery: a processor stored the result and died before acking.
	first := nextDelivery(t, js, "default")
	stored := nats.NewMsg(wire.ResultSubject("once"))
	stored.Data = []byte(`{"id":"once","status":"ok","content":"from the first processor"}`)
	stored.Header.Set(wire.HeaderMsgID, "once")
	meta, err := first.Metadata()
	if err != nil {
		t.Fatal(err)
	}
	wire.MarkAnswers(stored.Header, pub.Sequence, meta.Timestamp)
	if _, err := js.PublishMsg(ctx, stored); err != nil {
		t.Fatal(err)
	}
	if err := first.Nak(); err != nil { // the server delivers again
		t.Fatal(err)
	}
	time.Sleep(time.Until(deadline) + 100*time.Millisecond)
	second := nextDelivery(t, js, "default")
	if meta, _ := second.Metadata(); meta.NumDelivered != 2 {
		t.Fatalf("second delivery has NumDelivered %d", meta.NumDelivered)
	}
	p.Handle(ctx, "default", second)
	if runner.calls.Load() != 0 {
		t.Fatalf("the redelivery ran the chain (%d calls)", runner.calls.Load())
	}
	info, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	si, err := info.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != 1 {
		t.Fatalf("%d results stored, want 1", si.State.Msgs)
	}
	if dl, err := js.Stream(ctx, wire.DeadLetterStream); err != nil {
		t.Fatal(err)
	} else if di, err := dl.Info(ctx); err != nil || di.State.Msgs != 0 {
		t.Fatalf("an answered request was dead-lettered (%v)", err)
	}
	// The redelivery was acked: the work queue is empty.
	eventually(t, func() bool {
		rs, err := js.Stream(ctx, wire.RequestsStream)
		if err != nil {
			return false
		}
		ri, err := rs.Info(ctx)
		return err == nil && ri.State.Msgs == 0
	})
}

func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestConsumeStoppedBeforeItsFirstPull: a stop that comes while Consume
// still opens its consumers (a signal during start-up) is a stop, not an
// error.
func TestConsumeStoppedBeforeItsFirstPull(t *testing.T) {
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	err := stream.EnsureTopology(context.Background(), js, stream.Topology{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		RequestTTL: time.Hour, ResultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = stream.Consume(ctx, js, nil, stream.ConsumerConfig{Chains: []string{"default"}, Workers: 1, ShutdownTimeout: time.Second})
	if err != nil {
		t.Fatalf("Consume stopped before its first pull: %v, want nil", err)
	}
}
