package stream_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// echoRunner answers each request with its last message.
type echoRunner struct{}

func (echoRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	return chain.Result{Status: chain.StatusOK, Content: req.Messages[len(req.Messages)-1].Content, Provider: "p", Model: "m"}, nil
}

// TestARecreatedRequestsStreamsRequestsGetTheirOwnResults: a request that
// names no id is known by its sequence in the requests stream, and a
// requests stream deleted and created again (by an operator, or by a
// processor repairing it) hands out its sequences again. A request of the
// new stream must get a result of its own, on its first delivery and on a
// redelivery alike, not be taken as answered by the result of the old
// stream's request of the same sequence, even one stored by an older
// processor that recorded no time.
func TestARecreatedRequestsStreamsRequestsGetTheirOwnResults(t *testing.T) {
	_, js, p := newProcessor(t, time.Hour, func() stream.Runner { return echoRunner{} }, "default")
	ctx := context.Background()
	results, err := js.Stream(ctx, wire.ResultsStream)
	if err != nil {
		t.Fatal(err)
	}
	// ask publishes an id-less request saying prompt and hands its
	// delivery to the processor, after handing the first back when
	// nakFirst (so that the processor sees a redelivery); it returns the
	// request's sequence.
	ask := func(prompt string, nakFirst bool) uint64 {
		t.Helper()
		body, _ := json.Marshal(wire.Request{Messages: []chain.Message{{Role: "user", Content: prompt}}})
		pub, err := js.Publish(ctx, wire.RequestSubject("default"), body)
		if err != nil {
			t.Fatal(err)
		}
		msg := nextDelivery(t, js, "default")
		if nakFirst {
			if err := msg.Nak(); err != nil {
				t.Fatal(err)
			}
			msg = nextDelivery(t, js, "default")
		}
		p.Handle(ctx, "default", msg)
		return pub.Sequence
	}
	resultOf := func(seq uint64) string {
		t.Helper()
		m, err := results.GetLastMsgForSubject(ctx, wire.ResultSubject(wire.RequestID("", "", seq)))
		if err != nil {
			t.Fatal(err)
		}
		res, err := wire.DecodeResult(m.Data, m.Header)
		if err != nil {
			t.Fatal(err)
		}
		return res.Content
	}

	old1, old2 := ask("old one", false), ask("old two", false)
	if err := js.DeleteStream(ctx, wire.RequestsStream); err != nil {
		t.Fatal(err)
	}
	if err := topology.Ensure(ctx, js, testTopology(time.Hour, "default")); err != nil {
		t.Fatal(err)
	}
	// The first within the results' duplicate window: its store is refused
	// as a duplicate of the old result. The second is delivered twice.
	new1, new2 := ask("new one", false), ask("new two", true)
	if new1 != old1 || new2 != old2 {
		t.Fatalf("the recreated stream gave sequences %d and %d, want %d and %d again", new1, new2, old1, old2)
	}
	if got := resultOf(new1); got != "new one" {
		t.Errorf("first delivery: the result of sequence %d says %q, want %q", new1, got, "new one")
	}
	if got := resultOf(new2); got != "new two" {
		t.Errorf("redelivery: the result of sequence %d says %q, want %q", new2, got, "new two")
	}

	// A result stored by an older processor names its request by sequence
	// alone; one stored before the request was published is not its answer.
	untimed := nats.NewMsg(wire.ResultSubject(wire.RequestID("", "", new2+1)))
	untimed.Data = []byte(`{"status":"ok","content":"old three"}`)
	untimed.Header.Set(wire.HeaderMsgID, wire.RequestID("", "", new2+1))
	untimed.Header.Set(wire.HeaderRequestSeq, strconv.FormatUint(new2+1, 10))
	if _, err := js.PublishMsg(ctx, untimed); err != nil {
		t.Fatal(err)
	}
	new3 := ask("new three", true)
	if got := resultOf(new3); new3 != new2+1 || got != "new three" {
		t.Errorf("after an older processor's result: the result of sequence %d says %q, want %q", new3, got, "new three")
	}
}
