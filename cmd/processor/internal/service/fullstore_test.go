package service_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/wire"
)

// TestABacklogThatFillsTheQueueLeavesRoomForEveryAnswer: a backlog of large
// requests, published while no processor runs, on a server whose JetStream
// store is small (24 MiB). The requests stream fills at its
// DETOUR_REQUESTS_MAX_BYTES, well before the store does: the next publish is
// refused, saying the queue is full. The processor then answers what is
// queued, and every answer finds room: each accepted request gets exactly
// one ok result, its provider is called once, nothing is dead-lettered,
// nothing is left queued, and a new publish is taken again. Without the
// limits the backlog fills the whole store, and no answer can be stored.
func TestABacklogThatFillsTheQueueLeavesRoomForEveryAnswer(t *testing.T) {
	srv := natstest.StartWith(t, &server.Options{JetStreamMaxStore: 24 << 20})
	nc, js := natstest.Connect(t, srv)
	h := &harness{t: t, srv: srv, nc: nc, js: js}
	fake := providertest.New(providertest.OpenAI, providertest.OK())
	t.Cleanup(fake.Close)
	file := parseChainFile(t, fmt.Sprintf(`providers:
  - {name: primary, type: openai, base_url: %s, model: m, max_retries: 0}
chains:
  default: [primary]
`, fake.URL))
	settings := testSettings()
	settings.Workers = 4
	settings.RequestsMaxBytes, settings.ResultsMaxBytes, settings.DeadLetterMaxBytes = 3<<20, 8<<20, 6<<20
	p := h.buildProcessor(file, settings)

	// 300 requests of 100 KB: ten times what the queue takes, more than the
	// whole store.
	pad := strings.Repeat("x", 100<<10)
	reqs := make([]wire.Request, 300)
	for i := range reqs {
		id := fmt.Sprintf("big%d", i)
		reqs[i] = request(id, "request "+id+" "+pad)
	}
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	outcomes, err := c.PublishAll(context.Background(), "default", reqs, client.Options{Timeout: 10 * time.Second})
	if !errors.Is(err, wire.ErrFull) || !strings.Contains(err.Error(), "DETOUR_REQUESTS_MAX_BYTES reached") {
		t.Fatalf("publishing a backlog past the queue's limit: %v, want it refused as full", err)
	}
	var sent []string
	for _, o := range outcomes {
		if !o.Published.IsZero() {
			sent = append(sent, o.ID)
		}
	}
	if len(sent) == 0 || len(sent) == len(reqs) {
		t.Fatalf("%d of %d requests queued; want the queue to take some, not all", len(sent), len(reqs))
	}

	p.run()
	for _, id := range sent {
		res, _ := h.waitResult(id, 60*time.Second)
		if res.Status != chain.StatusOK {
			t.Errorf("%s: result %+v, want ok", id, res)
		}
	}
	eventually(t, 10*time.Second, "the queue to empty", func() bool {
		s, err := js.Stream(context.Background(), wire.RequestsStream)
		if err != nil {
			return false
		}
		info, err := s.Info(context.Background())
		return err == nil && info.State.Msgs == 0
	})
	s, err := js.Stream(context.Background(), wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil || info.State.Msgs != uint64(len(sent)) {
		t.Errorf("%s holds %d results (%v), want one for each of the %d requests queued", wire.ResultsStream, info.State.Msgs, err, len(sent))
	}
	calls := map[string]int{}
	for _, r := range fake.Received() {
		id, _, _ := strings.Cut(strings.TrimPrefix(r.Messages[len(r.Messages)-1].Content, "request "), " ")
		calls[id]++
	}
	for _, id := range sent {
		if calls[id] != 1 {
			t.Errorf("%s: %d provider calls, want 1", id, calls[id])
		}
	}
	if len(calls) != len(sent) {
		t.Errorf("the provider was asked for %d requests, want the %d queued", len(calls), len(sent))
	}
	if dl := h.deadLetters(); len(dl) != 0 {
		t.Errorf("%d dead letters, want none", len(dl))
	}
	h.publish("default", request("after", "request after"))
	if res, _ := h.waitResult("after", 30*time.Second); res.Status != chain.StatusOK {
		t.Errorf("a request once the queue drained: %+v", res)
	}
}

// TestAFullDeadLetterStreamHoldsNoWorker: when DETOUR_DEADLETTER is full,
// poison requests whose dead letter cannot be stored wait in
// DETOUR_REQUESTS, handed back, and hold no worker: a request of another
// chain is answered all the same.
func TestAFullDeadLetterStreamHoldsNoWorker(t *testing.T) {
	h := newHarness(t)
	bad := providertest.New(providertest.OpenAI, providertest.Status(400))
	t.Cleanup(bad.Close)
	good := providertest.New(providertest.OpenAI, providertest.OK())
	t.Cleanup(good.Close)
	file := parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: bad, type: openai, base_url: %s, model: m, max_retries: 0}
  - {name: good, type: openai, base_url: %s, model: m, max_retries: 0}
chains:
  poison: [bad]
  fine: [good]
`, bad.URL, good.URL))
	settings := testSettings()
	settings.Workers = 2
	settings.MaxPayload = 64 << 10
	settings.RequestsMaxBytes, settings.ResultsMaxBytes, settings.DeadLetterMaxBytes = 1<<20, 2<<20, 1<<20
	p := h.buildProcessor(file, settings)
	filled := 0
	for size := 60 << 10; size >= 1; size /= 2 {
		pad := []byte(strings.Repeat("x", size))
		for {
			if _, err := h.js.Publish(context.Background(), "detour.deadletter.poison", pad); err != nil {
				break
			}
			filled++
		}
	}
	if filled == 0 {
		t.Fatal("the dead-letter stream took nothing")
	}
	p.run()
	h.publish("poison", request("p1", "hello"))
	h.publish("poison", request("p2", "hello"))
	eventually(t, 10*time.Second, "both poison requests judged", func() bool { return bad.Requests() >= 2 })
	h.publish("fine", request("ok", "hello"))
	if res, _, err := h.result("ok", 20*time.Second); err != nil || res.Status != chain.StatusOK {
		t.Fatalf("a request of another chain: %+v, %v; want it answered while the poison ones wait", res, err)
	}
	for _, id := range []string{"p1", "p2"} {
		if _, _, err := h.result(id, 100*time.Millisecond); err == nil {
			t.Errorf("%s has a result, want none while its dead letter cannot be stored", id)
		}
	}
}
