package stream_test

import (
	"context"
	"encoding/json"
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

// holdingRunner answers every request, and on its first answer has the
// proxy hold what the server sends the processor: the result's store
// reaches the server, and its acknowledgement waits in the proxy.
type holdingRunner struct {
	proxy *natstest.Proxy
	calls atomic.Int32
}

func (r *holdingRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	if r.calls.Add(1) == 1 {
		r.proxy.HoldReplies()
	}
	return chain.Result{ID: req.ID, Status: chain.StatusOK, Content: "answer to " + req.ID, Provider: "p", Model: "m"}, nil
}

// TestAStoredResultWhoseAckWasLostIsRepliedOnce: a processor's result lands
// in the results stream, and the connection that would bring back its
// acknowledgement closes first. The processor's next try is refused (the
// id is a duplicate, or the subject has moved on from what the delivery
// knew), finds its own delivery's result there, and counts it as stored:
// one stored result, and one reply on reply_to, sent by the try that
// learned of the store. Taking its own result for another delivery's would
// ack and never reply, and the requester would wait forever.
//
// The ack is lost for certain, not by timing: the proxy holds everything
// the server sends from the moment the answer comes, before the result is
// published, and drops what it holds when it closes the connection, which
// it does once the result is seen stored.
func TestAStoredResultWhoseAckWasLostIsRepliedOnce(t *testing.T) {
	const id, replyTo = "lost-ack", "_INBOX.lostack.reply"
	srv := natstest.Start(t)
	nc, js := natstest.Connect(t, srv)
	ctx := context.Background()
	if err := topology.Ensure(ctx, js, testTopology(time.Hour, "default")); err != nil {
		t.Fatal(err)
	}
	replies, err := nc.SubscribeSync(replyTo)
	if err != nil {
		t.Fatal(err)
	}

	proxy := natstest.StartProxy(t, srv.Addr().String())
	ncP, err := nats.Connect(proxy.URL(), nats.ReconnectWait(50*time.Millisecond), nats.MaxReconnects(-1),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the closed connection is no news
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ncP.Close)
	jsP, err := jetstream.New(ncP)
	if err != nil {
		t.Fatal(err)
	}
	runner := &holdingRunner{proxy: proxy}
	p, err := stream.NewProcessor(ctx, ncP, jsP, stream.ProcessorConfig{
		Chains: map[string]stream.Runner{"default": runner}, ReplyPrefixes: []string{"_INBOX."},
		MaxPayload: 1 << 20, RequestTTL: time.Hour, AckWait: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	consume(t, jsP, p, 1, "default")

	body, _ := json.Marshal(wire.Request{ID: id, ReplyTo: replyTo, Messages: []chain.Message{{Role: "user", Content: "hi"}}})
	if _, err := js.Publish(ctx, wire.RequestSubject("default"), body); err != nil {
		t.Fatal(err)
	}
	within(t, 10*time.Second, "the result to be stored", func() bool {
		return subjectCounts(t, js, wire.ResultsStream, wire.ResultSubject(id))[wire.ResultSubject(id)] == 1
	})
	proxy.Refuse() // the acknowledgement goes with the connection
	proxy.Restore()

	waitSettled(t, js)
	if n := subjectCounts(t, js, wire.ResultsStream, wire.ResultSubject(id))[wire.ResultSubject(id)]; n != 1 {
		t.Errorf("%d results stored, want 1", n)
	}
	if n := repliesIn(t, replies, nc, ncP, nc)[replyTo]; n != 1 {
		t.Errorf("%d replies on %s, want 1", n, replyTo)
	}
	if n := runner.calls.Load(); n != 1 {
		t.Errorf("the chain ran %d times, want once", n)
	}
}
