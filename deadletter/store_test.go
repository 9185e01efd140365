package deadletter_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/internal/natstest"
	"github.com/detourhq/detour/internal/topology"
	"github.com/detourhq/detour/wire"
)

// env is an embedded server with detour's topology for chains "default" and
// "other", a dead-letter publisher and a store.
type env struct {
	t     *testing.T
	js    jetstream.JetStream
	pub   *deadletter.Publisher
	store *deadletter.Store
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := natstest.Start(t)
	_, js := natstest.Connect(t, srv)
	err := topology.Ensure(context.Background(), js, topology.Streams{
		Chains: []string{"default", "other"}, Replicas: 1, AckWait: 30 * time.Second,
		MaxAckPending: 100, ResultTTL: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, js: js, pub: deadletter.NewPublisher(js), store: deadletter.NewStore(js)}
}

// letter stores a dead letter and returns its sequence.
func (e *env) letter(l deadletter.Letter) uint64 {
	e.t.Helper()
	if l.Deliveries == 0 {
		l.Deliveries = 1
	}
	if err := e.pub.Publish(context.Background(), l); err != nil {
		e.t.Fatal(err)
	}
	s, err := e.js.Stream(context.Background(), wire.DeadLetterStream)
	if err != nil {
		e.t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.LastSeq
}

// queueRequest publishes a request the way a client does and returns its
// sequence in DETOUR_REQUESTS.
func (e *env) queueRequest(chainName string, data []byte, header nats.Header) uint64 {
	e.t.Helper()
	msg := nats.NewMsg(wire.RequestSubject(chainName))
	msg.Data = data
	for k, v := range header {
		msg.Header[k] = v
	}
	ack, err := e.js.PublishMsg(context.Background(), msg)
	if err != nil {
		e.t.Fatal(err)
	}
	if ack.Duplicate {
		e.t.Fatalf("request dropped as a duplicate")
	}
	return ack.Sequence
}

// queued returns the requests waiting in DETOUR_REQUESTS on chainName.
func (e *env) queued(chainName string) []*jetstream.RawStreamMsg {
	e.t.Helper()
	ctx := context.Background()
	s, err := e.js.Stream(ctx, wire.RequestsStream)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []*jetstream.RawStreamMsg
	for seq := uint64(1); ; seq++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(wire.RequestSubject(chainName)))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return out
		}
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, m)
		seq = m.Sequence
	}
}

func jsonRequest(t *testing.T, fields map[string]any) []byte {
	t.Helper()
	if _, ok := fields["messages"]; !ok {
		fields["messages"] = []map[string]string{{"role": "user", "content": "hi"}}
	}
	b, err := json.Marshal(fields)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListGetFilter: every dead letter is listed oldest first with its
// chain, reason, error, deliveries and request id (from the body, the
// original Nats-Msg-Id or the sequence), and filters select by reason and chain.
func TestListGetFilter(t *testing.T) {
	e := newEnv(t)
	mp, err := msgpack.Marshal(map[string]any{"id": "mp-1", "messages": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	seqs := []uint64{
		e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, Err: errors.New("too late\nreally"), SourceSeq: 11, Deliveries: 3,
			Data: jsonRequest(t, map[string]any{"id": "body-id"}), Header: nats.Header{"Nats-Msg-Id": {"hdr-id"}, "X-Trace": {"t1"}}}),
		e.letter(deadletter.Letter{Chain: "other", Reason: deadletter.ReasonPoison, Err: errors.New("400"), SourceSeq: 12,
			Data: jsonRequest(t, map[string]any{}), Header: nats.Header{"Nats-Msg-Id": {"hdr-only"}}}),
		e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonBadRequest, Err: errors.New("garbage"), SourceSeq: 13,
			Data: []byte{0xc1, 0xff}}),
		e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, Err: errors.New("422"), SourceSeq: 14,
			Data: mp, Header: nats.Header{"Content-Type": {"application/msgpack"}}}),
	}
	all, err := e.store.List(context.Background(), deadletter.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		chain, id string
		reason    deadletter.Reason
	}{
		{"default", "body-id", deadletter.ReasonExpired},
		{"other", "hdr-only", deadletter.ReasonPoison},
		{"default", "13", deadletter.ReasonBadRequest},
		{"default", "mp-1", deadletter.ReasonPoison},
	}
	if len(all) != len(want) {
		t.Fatalf("listed %d dead letters, want %d: %+v", len(all), len(want), all)
	}
	for i, w := range want {
		got := all[i]
		if got.Seq != seqs[i] || got.Chain != w.chain || got.RequestID != w.id || got.Reason != w.reason || got.Time.IsZero() {
			t.Errorf("entry %d = %+v, want seq %d %+v", i, got, seqs[i], w)
		}
	}
	if all[0].Error != "too late really" || all[0].Deliveries != 3 || all[0].SourceSeq != 11 {
		t.Errorf("entry 0 details %+v", all[0])
	}

	poison, err := e.store.List(context.Background(), deadletter.Filter{Reason: deadletter.ReasonPoison})
	if err != nil || len(poison) != 2 || poison[0].Seq != seqs[1] || poison[1].Seq != seqs[3] {
		t.Fatalf("poison filter: %v %+v", err, poison)
	}
	defaultPoison, err := e.store.List(context.Background(), deadletter.Filter{Chain: "default", Reason: deadletter.ReasonPoison})
	if err != nil || len(defaultPoison) != 1 || defaultPoison[0].Seq != seqs[3] {
		t.Fatalf("chain+reason filter: %v %+v", err, defaultPoison)
	}
	none, err := e.store.List(context.Background(), deadletter.Filter{Chain: "nochain"})
	if err != nil || len(none) != 0 {
		t.Fatalf("unknown chain: %v %+v", err, none)
	}
	if _, err := e.store.List(context.Background(), deadletter.Filter{Reason: "bogus"}); err == nil {
		t.Fatal("unknown reason accepted")
	}
	if _, err := e.store.List(context.Background(), deadletter.Filter{Chain: "a.>"}); err == nil {
		t.Fatal("wildcard chain accepted")
	}

	m, err := e.store.Get(context.Background(), seqs[0])
	if err != nil {
		t.Fatal(err)
	}
	if m.Entry != all[0] || m.Header.Get("X-Trace") != "t1" || m.Header.Get(deadletter.HeaderOriginalMsgID) != "hdr-id" ||
		string(m.Data) != string(jsonRequest(t, map[string]any{"id": "body-id"})) {
		t.Fatalf("Get = %+v", m)
	}
	if _, err := e.store.Get(context.Background(), 999); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("Get(999): %v, want ErrNotFound", err)
	}
}

// TestListManyAndEmpty: a listing reads past one pull batch, and an empty
// stream lists nothing at once.
func TestListManyAndEmpty(t *testing.T) {
	e := newEnv(t)
	start := time.Now()
	if got, err := e.store.List(context.Background(), deadletter.Filter{}); err != nil || len(got) != 0 {
		t.Fatalf("empty stream: %v %+v", err, got)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("listing an empty stream took %s", time.Since(start))
	}
	const n = 700
	for i := range n {
		reason := deadletter.ReasonPoison
		if i%7 == 0 {
			reason = deadletter.ReasonExpired
		}
		e.letter(deadletter.Letter{Chain: "default", Reason: reason, SourceSeq: uint64(i + 1), Data: jsonRequest(t, map[string]any{"id": fmt.Sprint("r", i)})})
	}
	all, err := e.store.List(context.Background(), deadletter.Filter{})
	if err != nil || len(all) != n {
		t.Fatalf("listed %d, want %d (%v)", len(all), n, err)
	}
	for i, en := range all {
		if en.RequestID != fmt.Sprint("r", i) {
			t.Fatalf("entry %d has id %q: out of order", i, en.RequestID)
		}
	}
	expired, err := e.store.List(context.Background(), deadletter.Filter{Reason: deadletter.ReasonExpired})
	if err != nil || len(expired) != n/7 {
		t.Fatalf("listed %d expired, want %d (%v)", len(expired), n/7, err)
	}
}

// TestPurge: by reason, by chain, then everything; counts are exact and
// the other dead letters stay.
func TestPurge(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	for i, l := range []struct {
		chain  string
		reason deadletter.Reason
	}{
		{"default", deadletter.ReasonPoison}, {"default", deadletter.ReasonExpired}, {"other", deadletter.ReasonPoison},
		{"other", deadletter.ReasonTooLarge}, {"default", deadletter.ReasonPoison}, {"other", deadletter.ReasonExpired},
	} {
		e.letter(deadletter.Letter{Chain: l.chain, Reason: l.reason, SourceSeq: uint64(i + 1), Data: []byte("{}")})
	}
	left := func() int {
		all, err := e.store.List(ctx, deadletter.Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return len(all)
	}
	steps := []struct {
		filter       deadletter.Filter
		purged, left int
	}{
		{deadletter.Filter{Reason: deadletter.ReasonPoison, Chain: "default"}, 2, 4},
		{deadletter.Filter{Reason: deadletter.ReasonPoison}, 1, 3},
		{deadletter.Filter{Reason: deadletter.ReasonPoison}, 0, 3},
		{deadletter.Filter{Chain: "other"}, 2, 1},
		{deadletter.Filter{}, 1, 0},
		{deadletter.Filter{}, 0, 0},
	}
	for i, s := range steps {
		n, err := e.store.Purge(ctx, s.filter)
		if err != nil || n != s.purged {
			t.Fatalf("step %d: purged %d (%v), want %d", i, n, err, s.purged)
		}
		if got := left(); got != s.left {
			t.Fatalf("step %d: %d left, want %d", i, got, s.left)
		}
	}
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: 9, Data: []byte("{}")})
	if _, err := e.store.PurgeSelected(ctx, deadletter.Selection{Seqs: []uint64{seq}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.PurgeSelected(ctx, deadletter.Selection{Seqs: []uint64{seq}}); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("second delete: %v, want ErrNotFound", err)
	}
}

// TestPublishDropsPublishDirectives: a request published with
// Nats-Expected-Stream (or another one-publish directive) can still be
// dead-lettered; copied as it was, the header would make the dead letter's
// publish fail and the request would never leave the queue.
func TestPublishDropsPublishDirectives(t *testing.T) {
	e := newEnv(t)
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonBadRequest, SourceSeq: 1, Data: []byte("x"),
		Header: nats.Header{"Nats-Expected-Stream": {wire.RequestsStream}, "Nats-Expected-Last-Sequence": {"0"}, "X-Keep": {"k"}}})
	m, err := e.store.Get(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	if m.Header.Get("Nats-Expected-Stream") != "" || m.Header.Get("X-Keep") != "k" {
		t.Fatalf("headers %v", m.Header)
	}
}

// TestPublishDropsTheRequestsOwnDeadLetterHeaders: the Detour-DLQ-* headers
// of a dead letter are the processor's account of it. A request that came
// with such headers of its own would otherwise have its dead letter say it
// was cut down (and refuse to replay), or name another id or attempts.
func TestPublishDropsTheRequestsOwnDeadLetterHeaders(t *testing.T) {
	e := newEnv(t)
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonBadRequest, SourceSeq: 1,
		Data: jsonRequest(t, map[string]any{"id": "mine"}),
		Header: nats.Header{
			deadletter.HeaderTrimmed: {"true"}, "detour-dlq-original-size": {"123456"},
			deadletter.HeaderOriginalMsgID: {"someone-elses-id"}, deadletter.HeaderAttempts: {`[{"provider":"forged"}]`},
			"Detour-Dlq-Reason": {"auth"}, "X-Keep": {"k"},
		}})
	m, err := e.store.Get(context.Background(), seq)
	if err != nil {
		t.Fatal(err)
	}
	for k := range m.Header {
		switch k {
		case nats.MsgIdHdr, deadletter.HeaderReason, deadletter.HeaderSourceSeq, deadletter.HeaderDeliveries, deadletter.HeaderTime, "X-Keep":
		default:
			t.Errorf("dead letter header %s: %q, which the request brought", k, m.Header.Values(k))
		}
	}
	if m.RequestID != "mine" || m.Reason != deadletter.ReasonBadRequest || len(m.Header.Values(deadletter.HeaderReason)) != 1 {
		t.Fatalf("dead letter %+v, headers %v", m, m.Header)
	}
	if _, err := e.store.Replay(context.Background(), seq, deadletter.ReplayOptions{}); err != nil {
		t.Fatalf("replay: %v", err)
	}
}

// TestPurgeSelected: named sequences are removed and counted; a missing one
// is reported and does not stop the others. Sequences and a filter together
// are refused; the zero Selection removes everything.
func TestPurgeSelected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var seqs []uint64
	for i := range 3 {
		seqs = append(seqs, e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: uint64(i + 1), Data: []byte("{}")}))
	}
	n, err := e.store.PurgeSelected(ctx, deadletter.Selection{Seqs: []uint64{seqs[2], 999, seqs[0]}})
	if n != 2 || !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("purged %d (%v), want 2 and the missing sequence reported", n, err)
	}
	left, err := e.store.List(ctx, deadletter.Filter{})
	if err != nil || len(left) != 1 || left[0].Seq != seqs[1] {
		t.Fatalf("left %+v (%v)", left, err)
	}
	n, err = e.store.PurgeSelected(ctx, deadletter.Selection{Seqs: []uint64{seqs[1]}, Filter: deadletter.Filter{Reason: deadletter.ReasonPoison}})
	if n != 0 || err == nil {
		t.Fatalf("sequences and a filter together: purged %d (%v)", n, err)
	}
	if n, err = e.store.PurgeSelected(ctx, deadletter.Selection{}); n != 1 || err != nil {
		t.Fatalf("purging everything: %d (%v), want 1", n, err)
	}
}
