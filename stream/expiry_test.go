package stream_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// coolingRunner finds every provider cooling for an hour.
type coolingRunner struct{}

func (coolingRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	at := chain.Attempt{Provider: "p", Model: "m", Outcome: chain.OutcomeSkipped, Class: chain.ClassCooldown}
	return chain.Result{Status: chain.StatusFailed, Attempts: []chain.Attempt{at}},
		&chain.ExhaustedError{AllCooling: true, ReopenAt: time.Now().Add(time.Hour)}
}

// TestARequestWaitingOutItsTTLIsExpired: a request without a deadline, or
// with one later than DETOUR_REQUEST_TTL, waiting for a cooldown, is
// expired by a processor once the TTL has passed: dead-lettered expired,
// with a failed result saying why.
func TestARequestWaitingOutItsTTLIsExpired(t *testing.T) {
	const ttl = 2 * time.Second
	nc, js, p := newProcessor(t, ttl, func() stream.Runner { return coolingRunner{} }, "default")
	consume(t, js, p, 4, "default")
	ctx := context.Background()
	results, err := nc.SubscribeSync(wire.ResultsPrefix + ">")
	if err != nil {
		t.Fatal(err)
	}
	late := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	for id, deadline := range map[string]string{"no-deadline": "", "late-deadline": late} {
		body, _ := json.Marshal(wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "hi"}}, Deadline: deadline})
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: wire.RequestSubject("default"), Data: body}); err != nil {
			t.Fatal(err)
		}
	}
	failed := map[string]bool{}
	for len(failed) < 2 {
		m, err := results.NextMsg(ttl + 5*time.Second)
		if err != nil {
			t.Fatalf("results: %v; failed results seen for %v", err, failed)
		}
		res, err := wire.DecodeResult(m.Data, m.Header)
		if err != nil || res.Status != chain.StatusFailed {
			t.Fatalf("result %q (%v), want a failed one", m.Data, err)
		}
		failed[res.ID] = true
		want := "expired: deadline passed before any provider answered"
		if res.ID == "late-deadline" {
			want = "expired: no provider answered within DETOUR_REQUEST_TTL (2s), the longest a request may wait; its own deadline was later"
		}
		if res.Error != want {
			t.Errorf("%s: error %q, want %q", res.ID, res.Error, want)
		}
	}
	expired := expiredLetters(t, js)
	if !expired["no-deadline"] || !expired["late-deadline"] {
		t.Errorf("expired dead letters for %v, want no-deadline and late-deadline", expired)
	}
}

// expiredLetters names the requests dead-lettered expired.
func expiredLetters(t *testing.T, js jetstream.JetStream) map[string]bool {
	t.Helper()
	letters, err := deadletter.NewStore(js).List(context.Background(), deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	expired := map[string]bool{}
	for _, l := range letters {
		if l.Reason == deadletter.ReasonExpired {
			expired[l.RequestID] = true
		}
	}
	return expired
}

// TestARequestNoStoreTakesStaysPastItsTTL: when a request's TTL ends, its
// failed result and its dead letter cannot be stored (the results and
// dead-letter streams refuse writes, as a full store does). The request
// stays queued past the TTL, however long: the requests stream has no age
// limit to remove it without a trace. Once the streams take writes again it
// is dead-lettered expired, with its failed result.
func TestARequestNoStoreTakesStaysPastItsTTL(t *testing.T) {
	const ttl = time.Second
	_, js, p := newProcessor(t, ttl, func() stream.Runner { return coolingRunner{} }, "default")
	liftResults := fill(t, js, wire.ResultsStream, wire.ResultSubject("earlier"))
	liftDeadLetters := fill(t, js, wire.DeadLetterStream, wire.DeadLetterSubject("default"))
	ctx := context.Background()
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), requestBody("waits")); err != nil {
		t.Fatal(err)
	}
	consume(t, js, p, 4, "default")
	time.Sleep(3 * ttl)
	requests, err := js.Stream(ctx, wire.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := requests.Info(ctx); err != nil || info.State.Msgs != 1 {
		t.Fatalf("%s holds %d messages (%v) three TTLs on, want the request still there", wire.RequestsStream, info.State.Msgs, err)
	}
	liftDeadLetters()
	liftResults()
	waitSettled(t, js)
	if !expiredLetters(t, js)["waits"] {
		t.Error("the request was not dead-lettered expired")
	}
	if stored := storedResult(t, js, "waits"); stored["status"] != "failed" || !strings.HasPrefix(stored["error"].(string), "expired: ") {
		t.Errorf("stored result %v, want its failed result", stored)
	}
}
