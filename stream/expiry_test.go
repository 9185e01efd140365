package stream_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// coolingRunner finds every provider cooling for an hour.
type coolingRunner struct{}

func (coolingRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	return chain.Result{Status: chain.StatusFailed}, &chain.ExhaustedError{AllCooling: true, ReopenAt: time.Now().Add(time.Hour)}
}

// TestARequestWaitingOutItsTTLExpiresBeforeTheStreamRemovesIt: the
// requests stream removes a message once it is DETOUR_REQUEST_TTL old, the
// default deadline. A request without a deadline, or with a later one,
// waiting for a cooldown is expired by a processor before then:
// dead-lettered expired, with a failed result saying why, not gone without
// a trace. (The exact moment is TestADeliveryExpiresBeforeTheStreamRemovesIt's.)
func TestARequestWaitingOutItsTTLExpiresBeforeTheStreamRemovesIt(t *testing.T) {
	// Its twentieth, 200 ms, leaves the last delivery time to reach a
	// worker and be dead-lettered on a loaded machine.
	const ttl = 4 * time.Second
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
			want = "expired: no provider answered within DETOUR_REQUEST_TTL (4s) less 200ms, before the requests stream removes the request at that age; its own deadline was later"
		}
		if res.Error != want {
			t.Errorf("%s: error %q, want %q", res.ID, res.Error, want)
		}
	}
	letters, err := deadletter.NewStore(js).List(ctx, deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	expired := map[string]bool{}
	for _, l := range letters {
		if l.Reason == deadletter.ReasonExpired {
			expired[l.RequestID] = true
		}
	}
	if !expired["no-deadline"] || !expired["late-deadline"] {
		t.Errorf("expired dead letters for %v, want no-deadline and late-deadline", expired)
	}
}
