package stream_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
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
	err := topology.Ensure(ctx, js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		ResultTTL: time.Hour,
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
	err := topology.Ensure(context.Background(), js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100,
		ResultTTL: time.Hour,
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

// fullResults gives a processor of chain "default" with a counting runner
// whose results stream refuses writes (full, discard new); lift makes it
// take them again.
func fullResults(t *testing.T) (js jetstream.JetStream, p *stream.Processor, runner *countingRunner, lift func()) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	err := topology.Ensure(ctx, js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 2 * time.Second, MaxAckPending: 100,
		ResultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	lift = fill(t, js, wire.ResultsStream, wire.ResultSubject("earlier"))
	runner = &countingRunner{}
	p, err = stream.NewProcessor(ctx, nc, js, stream.ProcessorConfig{
		Chains: map[string]stream.Runner{"default": runner}, ReplyPrefixes: []string{"detour.results."},
		MaxPayload: 1 << 20, RequestTTL: time.Hour, AckWait: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return js, p, runner, lift
}

// fill makes the stream name refuse writes: full at one message, published
// to subject, and discarding new ones. lift makes it take them again.
func fill(t *testing.T, js jetstream.JetStream, name, subject string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	full := s.CachedInfo().Config
	full.MaxMsgs, full.Discard = 1, jetstream.DiscardNew
	if _, err := js.UpdateStream(ctx, full); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, subject, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	return func() {
		full.MaxMsgs = -1
		if _, err := js.UpdateStream(ctx, full); err != nil {
			t.Fatal(err)
		}
	}
}

// TestAnAnswerThatCannotBeStoredIsKeptNotPaidForAgain: while the results
// stream refuses writes (full, with discard new; a disk or account limit
// does the same), the worker keeps the answer it paid for and the delivery,
// and stores it once the stream takes it again. Handing the request back
// would call the provider again on every redelivery.
func TestAnAnswerThatCannotBeStoredIsKeptNotPaidForAgain(t *testing.T) {
	js, p, runner, lift := fullResults(t)
	ctx := context.Background()
	body, _ := json.Marshal(wire.Request{ID: "paid", Messages: []chain.Message{{Role: "user", Content: "hi"}}})
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), body); err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		p.Handle(ctx, "default", nextDelivery(t, js, "default"))
	}()
	// Past the AckWait, and past the first few retries of the store.
	time.Sleep(5 * time.Second)
	select {
	case <-handled:
		t.Fatal("the delivery was settled while its answer could not be stored")
	default:
	}
	lift()
	<-handled
	if n := runner.calls.Load(); n != 1 {
		t.Fatalf("the chain ran %d times, want once", n)
	}
	results, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := results.GetLastMsgForSubject(ctx, wire.ResultSubject("paid")); err != nil {
		t.Fatalf("the answer was not stored: %v", err)
	}
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		t.Fatal(err)
	}
	// The ack is not waited for: the server takes it a moment later.
	eventually(t, func() bool {
		info, err := cons.Info(ctx)
		if err == nil && info.NumRedelivered != 0 {
			t.Fatalf("consumer %+v: the delivery was redelivered; want it kept, then acked", info)
		}
		return err == nil && info.NumAckPending == 0
	})
}

// TestAnAnswerNotStoredByTheDeadlineIsDeadLettered: an answer the results
// stream refuses until the request's deadline is dead-lettered expired,
// saying that the answer could not be stored, not that no provider
// answered.
//
// The failed result is kept like an answer: once the stream takes writes
// again it is stored, naming no answer.
func TestAnAnswerNotStoredByTheDeadlineIsDeadLettered(t *testing.T) {
	js, p, runner, lift := fullResults(t)
	ctx := context.Background()
	deadline := time.Now().Add(2 * time.Second).UTC().Truncate(time.Second).Add(time.Second)
	body, _ := json.Marshal(wire.Request{ID: "late", Messages: []chain.Message{{Role: "user", Content: "hi"}}, Deadline: deadline.Format(time.RFC3339)})
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), body); err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		p.Handle(ctx, "default", nextDelivery(t, js, "default"))
	}()
	dl, err := js.Stream(ctx, wire.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	var m *jetstream.RawStreamMsg
	eventually(t, func() bool {
		m, err = dl.GetLastMsgForSubject(ctx, wire.DeadLetterSubject("default"))
		return err == nil
	})
	if m.Header.Get("Detour-DLQ-Reason") != "expired" || !strings.Contains(m.Header.Get("Detour-DLQ-Error"), "the answer could not be stored before the deadline") {
		t.Fatalf("dead letter %v; want expired, the answer not stored", m.Header)
	}
	lift()
	<-handled
	if n := runner.calls.Load(); n != 1 {
		t.Fatalf("the chain ran %d times, want once", n)
	}
	if stored := storedResult(t, js, "late"); stored["status"] != "failed" || stored["content"] != nil && stored["content"] != "" {
		t.Fatalf("stored result %v, want a failed result naming no answer", stored)
	}
}

// storedResult is the result stored for id, decoded as JSON; it fails t
// when there is none.
func storedResult(t *testing.T, js jetstream.JetStream, id string) map[string]any {
	t.Helper()
	results, err := js.Stream(t.Context(), wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := results.GetLastMsgForSubject(t.Context(), wire.ResultSubject(id))
	if err != nil {
		t.Fatalf("no result stored for %s: %v", id, err)
	}
	var stored map[string]any
	if err := json.Unmarshal(m.Data, &stored); err != nil {
		t.Fatalf("result of %s: %v", id, err)
	}
	return stored
}

// TestADeadLetterThatCannotBeStoredIsRetriedWithBackoff: while the
// dead-letter stream refuses writes, a request to dead-letter is handed
// back and tried again, nothing lost, but after a delay that doubles with
// each delivery: a fixed second would log an error every second for each
// such request.
func TestADeadLetterThatCannotBeStoredIsRetriedWithBackoff(t *testing.T) {
	_, js, p := newProcessor(t, time.Hour, func() stream.Runner { return &countingRunner{} }, "default")
	ctx := context.Background()
	fill(t, js, wire.DeadLetterStream, wire.DeadLetterSubject("default"))
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), []byte("not a request")); err != nil {
		t.Fatal(err)
	}
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		t.Fatal(err)
	}
	// Deliveries at 0 s, then 1 s, 2 s, 4 s… after each: at most three in
	// four seconds.
	deliveries := 0
	for end := time.Now().Add(4 * time.Second); time.Until(end) > 0; {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(time.Until(end)))
		if err != nil {
			t.Fatal(err)
		}
		for msg := range batch.Messages() {
			deliveries++
			p.Handle(ctx, "default", msg)
		}
	}
	if deliveries > 3 {
		t.Errorf("%d deliveries in 4 s, want at most 3", deliveries)
	}
	if info, err := cons.Info(ctx); err != nil || info.NumPending+uint64(info.NumAckPending) != 1 {
		t.Fatalf("consumer %+v (%v); want the request still queued", info, err)
	}
}

// heldRunner answers every request once release is closed, counting calls.
type heldRunner struct {
	calls   atomic.Int32
	release chan struct{}
}

func (r *heldRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	r.calls.Add(1)
	<-r.release
	return chain.Result{ID: req.ID, Status: chain.StatusOK, Content: "held", Provider: "p", Model: "m"}, nil
}

// TestADeliveryOfARequestBeingWorkedOnCallsNothing: the server can deliver
// a request again, as a first delivery, while a worker of this processor
// still runs it, when its consumer was deleted and created again (by hand,
// or by a processor repairing it). That delivery is handed back, not run:
// once the first has stored the answer, the next delivery finds it.
// consumerRecreatedMidCall gives a processor whose held runner is on a
// request with id, and whose chain's consumer was then deleted and made
// again; first is closed once that first Handle returns.
func consumerRecreatedMidCall(t *testing.T, id string) (js jetstream.JetStream, p *stream.Processor, runner *heldRunner, first <-chan struct{}) {
	t.Helper()
	runner = &heldRunner{release: make(chan struct{})}
	_, js, p = newProcessor(t, time.Hour, func() stream.Runner { return runner }, "default")
	ctx := context.Background()
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), requestBody(id)); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Handle(ctx, "default", nextDelivery(t, js, "default"))
	}()
	eventually(t, func() bool { return runner.calls.Load() == 1 })
	if err := js.DeleteConsumer(ctx, wire.RequestsStream, wire.ConsumerName("default")); err != nil {
		t.Fatal(err)
	}
	if err := topology.Ensure(ctx, js, testTopology(time.Hour, "default")); err != nil {
		t.Fatal(err)
	}
	return js, p, runner, done
}

func TestADeliveryOfARequestBeingWorkedOnCallsNothing(t *testing.T) {
	js, p, runner, first := consumerRecreatedMidCall(t, "twice")
	ctx := context.Background()
	again := nextDelivery(t, js, "default")
	if meta, _ := again.Metadata(); meta.NumDelivered != 1 {
		t.Fatalf("the new consumer's delivery has NumDelivered %d, want 1", meta.NumDelivered)
	}
	second := make(chan struct{})
	go func() { defer close(second); p.Handle(ctx, "default", again) }()
	for done := false; !done; {
		select {
		case <-second:
			done = true
		case <-time.After(10 * time.Millisecond):
			if n := runner.calls.Load(); n != 1 {
				close(runner.release)
				t.Fatalf("the chain ran %d times for one request", n)
			}
		}
	}
	close(runner.release)
	<-first
	// The first worker's ack may settle the new consumer's delivery (same
	// consumer name and sequences); otherwise the delivery handed back
	// comes again and finds the answer.
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		batch, err := cons.Fetch(1, jetstream.FetchMaxWait(500*time.Millisecond))
		if err != nil {
			return false
		}
		for msg := range batch.Messages() {
			p.Handle(ctx, "default", msg)
		}
		rs, err := js.Stream(ctx, wire.RequestsStream)
		if err != nil {
			return false
		}
		ri, err := rs.Info(ctx)
		return err == nil && ri.State.Msgs == 0
	})
	if n := runner.calls.Load(); n != 1 {
		t.Fatalf("the chain ran %d times for one request", n)
	}
}

// TestAFailedResultThatCannotBeStoredIsKept: a request dead-lettered while
// the results stream refuses writes still gets its failed result: no waiting
// client is left without an answer (docs/failures.md, Dead letters). The worker keeps the
// delivery and retries the result, as it does an answer, and terminates the
// request once the result is stored; the dead letter is stored once.
func TestAFailedResultThatCannotBeStoredIsKept(t *testing.T) {
	js, p, runner, lift := fullResults(t)
	ctx := context.Background()
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), []byte(`{"id": "refused", "messages": []}`)); err != nil {
		t.Fatal(err)
	}
	handled := make(chan struct{})
	go func() {
		defer close(handled)
		p.Handle(ctx, "default", nextDelivery(t, js, "default"))
	}()
	time.Sleep(3 * time.Second) // past the AckWait, and a few retries
	select {
	case <-handled:
		t.Fatal("the delivery was settled while its failed result could not be stored")
	default:
	}
	lift()
	<-handled
	if n := runner.calls.Load(); n != 0 {
		t.Fatalf("the chain ran %d times for a bad request", n)
	}
	if stored := storedResult(t, js, "refused"); stored["status"] != "failed" || !strings.HasPrefix(fmt.Sprint(stored["error"]), "bad_request: ") {
		t.Fatalf("stored result %v, want the failed result of a bad request", stored)
	}
	dl, err := js.Stream(ctx, wire.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := dl.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("dead-letter stream %+v (%v), want the one dead letter", info, err)
	}
	cons, err := js.Consumer(ctx, wire.RequestsStream, wire.ConsumerName("default"))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, func() bool {
		info, err := cons.Info(ctx)
		if err == nil && info.NumRedelivered != 0 {
			t.Fatalf("consumer %+v: the delivery was redelivered; want it kept, then terminated", info)
		}
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0
	})
}

// TestARequestAnsweredHereAndDeliveredAnewCallsNothing: a consumer deleted
// and made again while a worker is on a request ignores that worker's ack
// (it has not delivered the request yet) and hands the request out again,
// as a first delivery. The processor that answered it remembers the
// sequences it settled recently and checks such a delivery for its answer,
// as it does a redelivery, instead of paying a provider twice.
func TestARequestAnsweredHereAndDeliveredAnewCallsNothing(t *testing.T) {
	js, p, runner, first := consumerRecreatedMidCall(t, "once")
	ctx := context.Background()
	close(runner.release)
	<-first // answered, stored, and acked to a consumer that ignores it

	again := nextDelivery(t, js, "default")
	if meta, _ := again.Metadata(); meta.NumDelivered != 1 {
		t.Fatalf("the new consumer's delivery has NumDelivered %d, want 1", meta.NumDelivered)
	}
	p.Handle(ctx, "default", again)
	if n := runner.calls.Load(); n != 1 {
		t.Fatalf("the chain ran %d times for one request", n)
	}
	eventually(t, func() bool {
		rs, err := js.Stream(ctx, wire.RequestsStream)
		if err != nil {
			return false
		}
		ri, err := rs.Info(ctx)
		return err == nil && ri.State.Msgs == 0
	})
}
