package topology_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
)

// TestGoneReadsEveryWayAResourceIsMissing asks a real server for a stream,
// a bucket and a consumer that do not exist, and publishes where no stream
// listens: each error is Gone; a resource that exists, or an error of
// another kind, is not.
func TestGoneReadsEveryWayAResourceIsMissing(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx := t.Context()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "HERE", Subjects: []string{"here.>"}})
	if err != nil {
		t.Fatal(err)
	}
	_, noStream := js.Stream(ctx, "MISSING")
	_, noBucket := js.KeyValue(ctx, "missing")
	_, noConsumer := s.Consumer(ctx, "missing")
	_, noTaker := js.Publish(ctx, "nowhere.subject", []byte("x"))
	for name, err := range map[string]error{
		"stream": noStream, "bucket": noBucket, "consumer": noConsumer, "publish": noTaker,
		"wrapped ErrGone": fmt.Errorf("a bucket %w", topology.ErrGone),
	} {
		if !topology.Gone(err) {
			t.Errorf("%s: Gone(%v) = false", name, err)
		}
	}
	_, here := js.Publish(ctx, "here.subject", []byte("x"))
	for name, err := range map[string]error{
		"a stored publish": here, "a cancelled context": context.Canceled,
		"another error": errors.New("connection refused"),
	} {
		if topology.Gone(err) {
			t.Errorf("%s: Gone(%v) = true", name, err)
		}
	}
}

// TestReplaceIsACompareAndSetWithATTL: a write at the subject's last
// sequence lands with its TTL, and one at a sequence that is no longer the
// last is refused as jetstream.ErrKeyRevisionMismatch and stores nothing.
func TestReplaceIsACompareAndSetWithATTL(t *testing.T) {
	_, js := natstest.Connect(t, natstest.Start(t))
	ctx := t.Context()
	s, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "TTL", Subjects: []string{"ttl.>"}, AllowMsgTTL: true})
	if err != nil {
		t.Fatal(err)
	}
	first, err := topology.Replace(ctx, js, "ttl.key", []byte("one"), 0, time.Minute)
	if err != nil {
		t.Fatalf("first write at 0: %v", err)
	}
	if _, err := topology.Replace(ctx, js, "ttl.key", []byte("stale"), 0, time.Minute); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("a write at a stale sequence: %v, want ErrKeyRevisionMismatch", err)
	}
	second, err := topology.Replace(ctx, js, "ttl.key", []byte("two"), first, 30*time.Second)
	if err != nil || second <= first {
		t.Fatalf("a write at the last sequence: %d, %v", second, err)
	}
	msg, err := s.GetLastMsgForSubject(ctx, "ttl.key")
	if err != nil {
		t.Fatal(err)
	}
	if string(msg.Data) != "two" || msg.Sequence != second || msg.Header.Get(jetstream.MsgTTLHeader) != "30s" {
		t.Fatalf("last message: %q at %d, TTL %q; want \"two\" at %d with TTL 30s", msg.Data, msg.Sequence, msg.Header.Get(jetstream.MsgTTLHeader), second)
	}
}
