package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/client"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// The tests here run against a real server with detour's topology and no
// processor: they check what the client stores and how it reads what is
// stored. What a processor answers is checked with the real one, in
// cmd/processor/internal/service (client_test.go, ask_test.go) and
// cmd/publisher.

// serverWithStreams starts a server with the streams and consumer of the chain
// "default", as a processor creates them.
func serverWithStreams(t *testing.T) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	err := topology.Ensure(context.Background(), js, topology.Streams{
		Chains: []string{"default"}, Replicas: 1, AckWait: 30 * time.Second, MaxAckPending: 100, ResultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

func newClient(t *testing.T, nc *nats.Conn) *client.Client {
	t.Helper()
	c, err := client.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func hello(id string) wire.Request {
	return wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "hello"}}}
}

// TestPublishStoresTheRequestOnce: a request without an id gets one, is
// stored as JSON under Nats-Msg-Id, and publishing it again within the
// duplicate window queues nothing: the receipt says duplicate, with the
// first one's sequence.
func TestPublishStoresTheRequestOnce(t *testing.T) {
	nc, js := serverWithStreams(t)
	c := newClient(t, nc)
	ctx := context.Background()
	r, err := c.Publish(ctx, "default", hello(""))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ID) != 22 || r.Seq != 1 || r.Duplicate || r.Published.IsZero() {
		t.Fatalf("receipt %+v; want a NUID, sequence 1, not a duplicate", r)
	}
	s, err := js.Stream(ctx, wire.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetMsg(ctx, r.Seq)
	if err != nil {
		t.Fatal(err)
	}
	var stored wire.Request
	if err := json.Unmarshal(m.Data, &stored); err != nil || stored.ID != r.ID || m.Subject != "detour.requests.default" {
		t.Fatalf("stored %s on %s (%v); want the request with id %s", m.Data, m.Subject, err, r.ID)
	}
	if m.Header.Get(wire.HeaderMsgID) != r.ID || m.Header.Get(wire.HeaderContentType) != "application/json" {
		t.Fatalf("headers %v; want Nats-Msg-Id %s and JSON", m.Header, r.ID)
	}
	again, err := c.Publish(ctx, "default", hello(r.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate || again.Seq != r.Seq || again.ID != r.ID {
		t.Fatalf("second receipt %+v; want a duplicate of sequence %d", again, r.Seq)
	}
}

// TestPublishToAnUnknownChainFailsAtOnce: no stream takes the subject, and
// that is final, not retried.
func TestPublishToAnUnknownChainFailsAtOnce(t *testing.T) {
	nc, _ := serverWithStreams(t)
	c := newClient(t, nc)
	start := time.Now()
	_, err := c.Publish(context.Background(), "nosuch", hello("x"))
	if !errors.Is(err, client.ErrNoStream) || !strings.Contains(err.Error(), `is chain "nosuch" configured`) {
		t.Fatalf("error %v; want ErrNoStream naming the chain", err)
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("took %s; want no retries", took)
	}
}

// TestABadIDSendsNothing: an id that cannot be a subject token is refused
// before anything is stored, by Publish, by Ask and by PublishAll, which
// refuses an id two requests share too, and reports every request unsent.
func TestABadIDSendsNothing(t *testing.T) {
	nc, js := serverWithStreams(t)
	c := newClient(t, nc)
	ctx := context.Background()
	if _, err := c.Publish(ctx, "default", hello("a b")); !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("Publish: %v; want wire.ErrBadRequest", err)
	}
	if _, err := c.Ask(ctx, "default", hello("a.b")); !errors.Is(err, wire.ErrBadRequest) {
		t.Errorf("Ask: %v; want wire.ErrBadRequest", err)
	}
	for name, reqs := range map[string][]wire.Request{
		"not a token": {hello("ok"), hello("a*")},
		"twice":       {hello("same"), hello("other"), hello("same")},
	} {
		outcomes, err := c.PublishAll(ctx, "default", reqs, client.Options{Wait: true})
		if err == nil {
			t.Errorf("%s: PublishAll accepted", name)
		}
		for i, o := range outcomes {
			if !errors.Is(o.Err, client.ErrNotPublished) || !o.Published.IsZero() {
				t.Errorf("%s: outcome %d %+v; want not published", name, i, o)
			}
		}
		t.Logf("%s: %v", name, err)
	}
	s, err := js.Stream(ctx, wire.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	if info, err := s.Info(ctx); err != nil || info.State.Msgs != 0 {
		t.Fatalf("%s holds %d requests (%v); want none", wire.RequestsStream, info.State.Msgs, err)
	}
}

// TestPublishAllLeavesItsRequestsAlone: the ids and reply subjects it
// assigns are in the outcomes, not written into the caller's slice.
func TestPublishAllLeavesItsRequestsAlone(t *testing.T) {
	nc, _ := serverWithStreams(t)
	c := newClient(t, nc)
	reqs := []wire.Request{hello(""), hello("mine")}
	want := []wire.Request{hello(""), hello("mine")}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	outcomes, err := c.PublishAll(ctx, "default", reqs, client.Options{Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(reqs, want) {
		t.Fatalf("requests became %+v", reqs)
	}
	if len(outcomes[0].ID) != 22 || outcomes[1].ID != "mine" {
		t.Fatalf("outcome ids %q, %q; want a NUID and mine", outcomes[0].ID, outcomes[1].ID)
	}
	for _, o := range outcomes {
		if !errors.Is(o.Err, client.ErrNoResult) || o.Published.IsZero() {
			t.Errorf("outcome %+v; want published, without a result (no processor runs)", o)
		}
	}
}

// storeResult stores res under detour.results.<id> as answering the
// request message at requestSeq, as a processor does. It may be called
// from any goroutine.
func storeResult(t *testing.T, js jetstream.JetStream, res chain.Result, requestSeq uint64) {
	t.Helper()
	msg := nats.NewMsg(wire.ResultSubject(res.ID))
	msg.Data, _ = json.Marshal(res)
	msg.Header.Set(wire.HeaderContentType, "application/json")
	wire.MarkAnswers(msg.Header, requestSeq, time.Now())
	if _, err := js.PublishMsg(context.Background(), msg); err != nil {
		t.Errorf("storing a result: %v", err)
	}
}

// TestResultTakesOnlyItsRequestsAnswer: a result stored under the id for
// another request message is passed over until the request's own is
// stored; a receipt without a sequence takes any.
func TestResultTakesOnlyItsRequestsAnswer(t *testing.T) {
	nc, js := serverWithStreams(t)
	c := newClient(t, nc)
	r, err := c.Publish(context.Background(), "default", hello("reused"))
	if err != nil {
		t.Fatal(err)
	}
	storeResult(t, js, chain.Result{ID: "reused", Status: chain.StatusOK, Content: "earlier"}, r.Seq+100)

	ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
	defer cancel()
	if res, err := c.Result(ctx, r); !errors.Is(err, client.ErrNoResult) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Result: %+v, %v; want ErrNoResult and the deadline", res, err)
	}
	if res, err := c.Result(context.Background(), client.Receipt{ID: "reused"}); err != nil || res.Content != "earlier" {
		t.Fatalf("Result without a sequence: %+v, %v; want the stored one", res, err)
	}

	stored := make(chan struct{})
	go func() {
		defer close(stored)
		time.Sleep(700 * time.Millisecond) // a poll or two after Result starts
		storeResult(t, js, chain.Result{ID: "reused", Status: chain.StatusOK, Content: "its own"}, r.Seq)
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := c.Result(ctx, r)
	<-stored
	if err != nil || res.Content != "its own" {
		t.Fatalf("Result: %+v, %v; want the request's own answer", res, err)
	}
}

// TestResultWithoutAResultsStream: no processor has created DETOUR_RESULTS;
// Result says so at once instead of waiting.
func TestResultWithoutAResultsStream(t *testing.T) {
	srv := natstest.Start(t)
	nc, _ := natstest.Connect(t, srv)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Result(ctx, client.Receipt{ID: "x", Seq: 1}); !errors.Is(err, jetstream.ErrStreamNotFound) || ctx.Err() != nil {
		t.Fatalf("Result: %v; want jetstream.ErrStreamNotFound at once", err)
	}
}

// TestAskWithoutAProcessor: nobody serves detour.ask.<chain>; Ask says so
// at once.
func TestAskWithoutAProcessor(t *testing.T) {
	nc, _ := serverWithStreams(t)
	c := newClient(t, nc)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := c.Ask(ctx, "default", hello("x"))
	if !errors.Is(err, nats.ErrNoResponders) || !strings.Contains(err.Error(), "detour.ask.default") || ctx.Err() != nil {
		t.Fatalf("Ask: %v; want no responders on detour.ask.default, at once", err)
	}
}

// TestAskErrorNamesTheCondition: an error reply's reason maps to the
// sentinel of wire that callers branch on, as a publish's error does.
func TestAskErrorNamesTheCondition(t *testing.T) {
	tests := []struct {
		description string
		want        error // nil: none
	}{
		{"bad request: messages: must be a list", wire.ErrBadRequest},
		{"bad reply subject: reply_to \"x\": a request to detour.ask.default is answered on its own reply subject", wire.ErrBadReplySubject},
		{"not stored: " + wire.ErrFull.Error() + " (maximum bytes exceeded: DETOUR_REQUESTS_MAX_BYTES reached); try again shortly", wire.ErrFull},
		{"duplicate: DETOUR_REQUESTS already holds a request with Nats-Msg-Id \"x\"", nil},
		{"too large: payload of 5000 bytes exceeds DETOUR_MAX_PAYLOAD 4096", nil},
	}
	sentinels := []error{wire.ErrBadRequest, wire.ErrBadReplySubject, wire.ErrFull}
	for _, tt := range tests {
		var err error = &client.AskError{Code: "400", Description: tt.description}
		for _, s := range sentinels {
			if got := errors.Is(err, s); got != (s == tt.want) {
				t.Errorf("%q: errors.Is(%v) = %t", tt.description, s, got)
			}
		}
		if !strings.Contains(err.Error(), "(400)") || !strings.Contains(err.Error(), tt.description) {
			t.Errorf("Error() = %q; want the code and the reason", err)
		}
	}
}
