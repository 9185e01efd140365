package stream_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// TestAnAnswerKeptUntilTheStoreHasRoomIsPaidForOnce: the results and the
// dead-letter streams both refuse writes when a request's answer comes, and
// take them again a little before its deadline. The worker keeps the
// answer until the deadline itself, so it is stored once the store has room:
// one provider call, one result. Giving up on it while the next try would
// come after the deadline would dead-letter it (refused too), hand it back,
// and have its redelivery, still live, call the provider again.
func TestAnAnswerKeptUntilTheStoreHasRoomIsPaidForOnce(t *testing.T) {
	js, p, runner, lift := fullResults(t)
	liftDeadLetters := fill(t, js, wire.DeadLetterStream, wire.DeadLetterSubject("default"))
	ctx := context.Background()
	// Retries come 0.25, 0.75, 1.75, 3.75 and 7.75 s after the first try:
	// the deadline falls between the last two.
	published := time.Now()
	deadline := published.UTC().Truncate(time.Second).Add(7 * time.Second)
	body, _ := json.Marshal(wire.Request{ID: "paid", Messages: []chain.Message{{Role: "user", Content: "hi"}}, Deadline: deadline.Format(time.RFC3339)})
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), body); err != nil {
		t.Fatal(err)
	}
	consume(t, js, p, 4, "default")
	time.Sleep(time.Until(published.Add(4200 * time.Millisecond)))
	lift()
	liftDeadLetters()

	waitSettled(t, js)
	if n := runner.calls.Load(); n != 1 {
		t.Errorf("the chain ran %d times, want once", n)
	}
	if stored := storedResult(t, js, "paid"); stored["status"] != "ok" {
		t.Errorf("stored result %v, want the answer", stored)
	}
	if n := subjectCounts(t, js, wire.ResultsStream, wire.ResultSubject("paid"))[wire.ResultSubject("paid")]; n != 1 {
		t.Errorf("%d results stored, want 1", n)
	}
	if n := subjectCounts(t, js, wire.DeadLetterStream, wire.DeadLetterSubject("default"))[wire.DeadLetterSubject("default")]; n != 1 {
		t.Errorf("%d messages in the dead-letter stream, want only the one that filled it", n)
	}
}

// unsubscribe takes the subjects of stream name away, so that a publish to
// them finds no stream, until lift gives them back.
func unsubscribe(t *testing.T, js jetstream.JetStream, name string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	s, err := js.Stream(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	subjects := cfg.Subjects
	cfg.Subjects = []string{"unsubscribed." + name}
	if _, err := js.UpdateStream(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	return func() {
		cfg.Subjects = subjects
		if _, err := js.UpdateStream(ctx, cfg); err != nil {
			t.Fatal(err)
		}
	}
}

// poisonRunner rejects every request as poison, counting the calls.
type poisonRunner struct{ calls atomic.Int32 }

func (r *poisonRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	r.calls.Add(1)
	at := chain.Attempt{Provider: "p", Model: "m", Outcome: chain.OutcomeFailed, Class: chain.ClassRequest, StatusCode: 400}
	return chain.Result{ID: req.ID, Attempts: []chain.Attempt{at}}, &chain.ExhaustedError{Poison: true, Last: errors.New("rejected")}
}

// TestAPoisonRequestWhoseDeadLetterWaitsIsNotRunAgain: every provider
// rejected the request, each call paid for, while the dead-letter stream
// refuses writes for a while (it has lost its subject, as an operator's
// edit leaves it). The worker keeps the dead letter and the delivery, and
// retries until the stream takes it: handing the request back would call
// every provider again on each redelivery while it lives. (A stream that
// refuses for want of room is another matter: waiting does not make room,
// and the request is handed back; see TestAFullDeadLetterStreamHoldsNoWorker.)
func TestAPoisonRequestWhoseDeadLetterWaitsIsNotRunAgain(t *testing.T) {
	runner := &poisonRunner{}
	_, js, p := newProcessor(t, time.Hour, func() stream.Runner { return runner }, "default")
	lift := unsubscribe(t, js, wire.DeadLetterStream)
	ctx := context.Background()
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), requestBody("poison")); err != nil {
		t.Fatal(err)
	}
	consume(t, js, p, 4, "default")
	// Handed back, it would come again after 1 s, then 2 s more.
	time.Sleep(3500 * time.Millisecond)
	lift()
	waitSettled(t, js)
	if n := runner.calls.Load(); n != 1 {
		t.Errorf("the chain ran %d times, want once", n)
	}
	dl, err := js.Stream(ctx, wire.DeadLetterStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dl.GetLastMsgForSubject(ctx, wire.DeadLetterSubject("default"))
	if err != nil || m.Header.Get("Detour-DLQ-Reason") != "poison" {
		t.Fatalf("last dead letter %v (%v), want the poison request's", m, err)
	}
	if stored := storedResult(t, js, "poison"); stored["status"] != "failed" {
		t.Errorf("stored result %v, want the failed result", stored)
	}
}
