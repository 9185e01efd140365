package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

// TestDLQReplay is the dead-letter acceptance of "Nothing lost, nothing
// done twice": a running processor dead-letters one request of every
// reason; each is listed with its reason and id; the expired one, replayed
// with a new deadline, and the poison one, replayed once its provider
// accepts it, are answered, and their dead letters are gone.
func TestDLQReplay(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	var picky atomic.Bool // the picky provider refuses everything until set
	pickyServer := providertest.New(providertest.OpenAI, func(n int, req providertest.Request) providertest.Reply {
		if picky.Load() {
			return providertest.OK()(n, req)
		}
		return providertest.Status(400)(n, req)
	})
	defer pickyServer.Close()
	h := newHarness(t)
	settings := testSettings()
	settings.MaxPayload = 1024
	h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: solo, type: openai, base_url: %s, model: solo-model}
  - {name: picky, type: openai, base_url: %s, model: picky-model}
chains:
  default: [solo]
  strict: [picky]
`, solo.URL, pickyServer.URL)), settings)

	jsonBody := func(r wire.Request) []byte {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	past := time.Now().Add(-time.Minute).UTC().Format(time.RFC3339)
	expired := request("exp-1", "late question")
	expired.Deadline = past
	badReply := request("evil-1", "hello")
	badReply.ReplyTo = "$JS.API.STREAM.DELETE.DETOUR_REQUESTS"
	cases := []struct {
		chain  string
		body   []byte
		header nats.Header
		id     string
		reason deadletter.Reason
	}{
		{"default", []byte(`{"id":"bad-1","messages":[]}`), nil, "bad-1", deadletter.ReasonBadRequest},
		{"default", jsonBody(badReply), nil, "evil-1", deadletter.ReasonBadReplySubject},
		{"default", jsonBody(request("big-1", strings.Repeat("x", 2000))), nil, "big-1", deadletter.ReasonTooLarge},
		// Published as the client does, with its id as Nats-Msg-Id: the
		// replay comes within the two-minute duplicate window.
		{"default", jsonBody(expired), nats.Header{"Nats-Msg-Id": {"exp-1"}}, "exp-1", deadletter.ReasonExpired},
		{"strict", jsonBody(request("poison-1", "hello")), nats.Header{"Nats-Msg-Id": {"poison-1"}}, "poison-1", deadletter.ReasonPoison},
	}
	for _, c := range cases {
		h.publishRaw(c.chain, c.body, c.header)
	}
	eventually(t, 15*time.Second, "a dead letter per reason", func() bool { return len(h.deadLetters()) == len(cases) })

	ctx := context.Background()
	store := deadletter.NewStore(h.js)
	listed, err := store.List(ctx, deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	byReason := map[deadletter.Reason]deadletter.Entry{}
	for _, e := range listed {
		byReason[e.Reason] = e
	}
	for _, c := range cases {
		e, ok := byReason[c.reason]
		if !ok {
			t.Fatalf("no %s dead letter listed: %+v", c.reason, listed)
		}
		if e.RequestID != c.id || e.Chain != c.chain || e.Error == "" || e.Deliveries != 1 {
			t.Errorf("%s: listed %+v, want id %s on %s with an error", c.reason, e, c.id, c.chain)
		}
		only, err := store.List(ctx, deadletter.Filter{Reason: c.reason})
		if err != nil || len(only) != 1 || only[0].Seq != e.Seq {
			t.Errorf("filter %s: %+v (%v)", c.reason, only, err)
		}
	}
	// The expired request's failed result was published for its requester.
	if res, _ := h.waitResult("exp-1", 5*time.Second); res.Status != chain.StatusFailed {
		t.Fatalf("expired request's result %+v", res)
	}

	// Replayed as it is, the expired request would only expire again.
	exp := byReason[deadletter.ReasonExpired]
	if _, err := store.Replay(ctx, exp.Seq, deadletter.ReplayOptions{}); err == nil {
		t.Fatal("replay of a request whose deadline passed was not refused")
	}
	r, err := store.Replay(ctx, exp.Seq, deadletter.ReplayOptions{Deadline: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	// The original Nats-Msg-Id is still in the requests stream's duplicate
	// window: the replay is queued under an id of its own.
	if r.RequestID != "exp-1" || r.AlreadyQueued || r.MsgID != fmt.Sprintf("exp-1-replay-%d", exp.Seq) {
		t.Fatalf("replayed %+v", r)
	}
	waitAnswered(t, h, "exp-1")

	picky.Store(true)
	if _, err := store.Replay(ctx, byReason[deadletter.ReasonPoison].Seq, deadletter.ReplayOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAnswered(t, h, "poison-1")

	left, err := store.List(ctx, deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != len(cases)-2 {
		t.Fatalf("%d dead letters left, want %d: %+v", len(left), len(cases)-2, left)
	}
	for _, e := range left {
		if e.Reason == deadletter.ReasonExpired || e.Reason == deadletter.ReasonPoison {
			t.Fatalf("replayed dead letter still listed: %+v", e)
		}
	}
	if solo.Requests() != 1 || pickyServer.Requests() != 2 {
		t.Fatalf("provider calls: solo %d (want 1), picky %d (want 2)", solo.Requests(), pickyServer.Requests())
	}
}

// waitAnswered waits until the stored result of id is an answer.
func waitAnswered(t *testing.T, h *harness, id string) {
	t.Helper()
	var last chain.Result
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		res, _, err := h.result(id, 5*time.Second)
		if err == nil && res.Status == chain.StatusOK {
			return
		}
		last = res
		time.Sleep(50 * time.Millisecond)
	}
	// Seen when the answer was published but DETOUR_RESULTS dropped it as a
	// duplicate of the earlier failed result (same Nats-Msg-Id, within the
	// two-minute window): a replayed request's result needs an id of its own.
	t.Fatalf("replayed request %s was not answered; last stored result %+v", id, last)
}
