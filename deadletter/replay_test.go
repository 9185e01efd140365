package deadletter_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

var replyPrefixes = []string{"detour.results.", "_INBOX."}

// TestReplayRestoresTheRequest: outside the duplicate window a replay
// republishes the original body and headers with the original Nats-Msg-Id,
// without Detour-DLQ-* headers, and removes the dead letter.
func TestReplayRestoresTheRequest(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	body := jsonRequest(t, map[string]any{"id": "req-1", "metadata": map[string]string{"k": "v"}})
	// The original request was queued long ago: its Nats-Msg-Id is not in
	// the window (no request with it was published to this server).
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, Err: errors.New("400"), SourceSeq: 41,
		Data: body, Header: nats.Header{"Nats-Msg-Id": {"req-1"}, "Content-Type": {"application/json"}, "X-Trace": {"abc"}}})

	r, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Seq != seq || r.Chain != "default" || r.RequestID != "req-1" || r.MsgID != "req-1" || r.AlreadyQueued || r.BodyChanged || r.StreamSeq == 0 {
		t.Fatalf("Replayed %+v", r)
	}
	q := e.queued("default")
	if len(q) != 1 {
		t.Fatalf("%d requests queued, want 1", len(q))
	}
	got := q[0]
	if string(got.Data) != string(body) || got.Sequence != r.StreamSeq {
		t.Fatalf("queued %s at %d", got.Data, got.Sequence)
	}
	want := nats.Header{"Nats-Msg-Id": {"req-1"}, "Content-Type": {"application/json"}, "X-Trace": {"abc"}, deadletter.HeaderReplayOf: {strconv.FormatUint(seq, 10)}}
	if len(got.Header) != len(want) {
		t.Fatalf("headers %v, want %v", got.Header, want)
	}
	for k := range want {
		if got.Header.Get(k) != want.Get(k) {
			t.Fatalf("header %s = %q, want %q (all: %v)", k, got.Header.Get(k), want.Get(k), got.Header)
		}
	}
	if _, err := e.store.Get(ctx, seq); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("dead letter still there: %v", err)
	}
	if _, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{}); !errors.Is(err, deadletter.ErrNotFound) {
		t.Fatalf("second replay: %v, want ErrNotFound", err)
	}
}

// TestReplayInsideTheDuplicateWindow: a request dead-lettered within two
// minutes of its publish would be dropped by deduplication; the replay
// detects it and queues the request under "<msg id>-replay-<seq>", keeping
// the request id (moved into the body when the Nats-Msg-Id was the id).
func TestReplayInsideTheDuplicateWindow(t *testing.T) {
	cases := []struct {
		name        string
		body        func(t *testing.T) []byte
		header      nats.Header
		bodyChanged bool
	}{
		{"json with id", func(t *testing.T) []byte { return jsonRequest(t, map[string]any{"id": "r1"}) }, nil, false},
		{"json id in header", func(t *testing.T) []byte { return jsonRequest(t, map[string]any{}) }, nil, true},
		{"msgpack id in header", func(t *testing.T) []byte {
			b, err := msgpack.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "hi"}}, "max_tokens": 3})
			if err != nil {
				t.Fatal(err)
			}
			return b
		}, nats.Header{"Content-Type": {"application/msgpack"}}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			body := c.body(t)
			header := nats.Header{"Nats-Msg-Id": {"r1"}}
			for k, v := range c.header {
				header[k] = v
			}
			src := e.queueRequest("default", body, header)
			dl := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: src, Data: body, Header: header})

			r, err := e.store.Replay(ctx, dl, deadletter.ReplayOptions{})
			if err != nil {
				t.Fatal(err)
			}
			wantMsgID := "r1-replay-" + strconv.FormatUint(dl, 10)
			if r.MsgID != wantMsgID || r.RequestID != "r1" || r.AlreadyQueued || r.BodyChanged != c.bodyChanged {
				t.Fatalf("Replayed %+v", r)
			}
			q := e.queued("default")
			if len(q) != 2 || q[1].Sequence != r.StreamSeq || q[1].Header.Get("Nats-Msg-Id") != wantMsgID {
				t.Fatalf("queue %v", q)
			}
			// The processor sees the same request, with the same id.
			dec, err := wire.DecodeRequest(q[1].Data, q[1].Header, q[1].Sequence, replyPrefixes)
			if err != nil || dec.ID != "r1" || len(dec.Messages) != 1 {
				t.Fatalf("replayed request decodes as %+v (%v)", dec, err)
			}
			if !c.bodyChanged && string(q[1].Data) != string(body) {
				t.Fatalf("body changed: %s", q[1].Data)
			}

			// A retried replay of a dead letter (its first answer lost) is
			// recognised and queues nothing more. The dead letter here is the
			// replayed request's own, dead-lettered again.
			dl2 := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: r.StreamSeq, Data: body, Header: header})
			e.queueRequest("default", q[1].Data, nats.Header{"Nats-Msg-Id": {"r1-replay-" + strconv.FormatUint(dl2, 10)}})
			r2, err := e.store.Replay(ctx, dl2, deadletter.ReplayOptions{})
			if err != nil || !r2.AlreadyQueued {
				t.Fatalf("retried replay %+v (%v)", r2, err)
			}
			if n := len(e.queued("default")); n != 3 {
				t.Fatalf("%d queued after the retried replay, want 3", n)
			}
			if _, err := e.store.Get(ctx, dl2); !errors.Is(err, deadletter.ErrNotFound) {
				t.Fatalf("retried dead letter not removed: %v", err)
			}
		})
	}
}

// TestReplayWhenAnotherRequestReusedTheID: ids may be reused, so the
// duplicate window may remember a request's Nats-Msg-Id for another request
// published since. The replay is then no duplicate of anything queued: it is
// queued under "<msg id>-replay-<seq>", and the dead letter goes only then.
func TestReplayWhenAnotherRequestReusedTheID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	header := nats.Header{"Nats-Msg-Id": {"reused"}}
	first := jsonRequest(t, map[string]any{"id": "reused", "messages": []any{map[string]any{"role": "user", "content": "first"}}})
	// The first request was taken and dead-lettered; its message is gone
	// from the requests stream. The second reuses its id.
	dl := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, SourceSeq: 77, Data: first, Header: header})
	second := jsonRequest(t, map[string]any{"id": "reused", "messages": []any{map[string]any{"role": "user", "content": "second"}}})
	e.queueRequest("default", second, header)

	r, err := e.store.Replay(ctx, dl, deadletter.ReplayOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantMsgID := "reused-replay-" + strconv.FormatUint(dl, 10)
	if r.AlreadyQueued || r.MsgID != wantMsgID {
		t.Fatalf("Replayed %+v; want it queued under %s", r, wantMsgID)
	}
	q := e.queued("default")
	if len(q) != 2 || string(q[1].Data) != string(first) || q[1].Header.Get("Nats-Msg-Id") != wantMsgID {
		t.Fatalf("queue %v; want the second request, then the first replayed", q)
	}

	// What the window remembers may also be an earlier replay of the same
	// dead letter, under the id it had (its removal failed, say): that one
	// is queued, and nothing more is.
	again := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, SourceSeq: 78, Data: first,
		Header: nats.Header{"Nats-Msg-Id": {"again"}}})
	e.queueRequest("default", first, nats.Header{"Nats-Msg-Id": {"again"}, deadletter.HeaderReplayOf: {strconv.FormatUint(again, 10)}})
	r, err = e.store.Replay(ctx, again, deadletter.ReplayOptions{})
	if err != nil || !r.AlreadyQueued || r.MsgID != "again" {
		t.Fatalf("Replayed %+v (%v); want it found already queued", r, err)
	}
	if n := len(e.queued("default")); n != 3 {
		t.Fatalf("%d queued; want 3, nothing more", n)
	}
}

// TestReplayWithoutMsgID: a request published without Nats-Msg-Id gets a
// replay id of its own, so a retried replay cannot queue it twice, and
// keeps its id: the body's, or its old sequence written into the body.
func TestReplayWithoutMsgID(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	withID := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: 5, Data: jsonRequest(t, map[string]any{"id": "body-1"})})
	noID := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: 6, Data: jsonRequest(t, map[string]any{})})
	r1, err := e.store.Replay(ctx, withID, deadletter.ReplayOptions{})
	if err != nil || r1.MsgID != "body-1-replay-"+strconv.FormatUint(withID, 10) || r1.BodyChanged || r1.RequestID != "body-1" {
		t.Fatalf("%+v %v", r1, err)
	}
	r2, err := e.store.Replay(ctx, noID, deadletter.ReplayOptions{})
	if err != nil || r2.MsgID != "6-replay-"+strconv.FormatUint(noID, 10) || !r2.BodyChanged || r2.RequestID != "6" {
		t.Fatalf("%+v %v", r2, err)
	}
	q := e.queued("default")
	if len(q) != 2 {
		t.Fatalf("%d queued", len(q))
	}
	dec, err := wire.DecodeRequest(q[1].Data, q[1].Header, q[1].Sequence, replyPrefixes)
	if err != nil || dec.ID != "6" {
		t.Fatalf("replayed request decodes as %+v (%v)", dec, err)
	}
}

// TestReplayFailureKeepsTheLetter: when the publish fails (here no stream
// takes the chain's subject any more) the dead letter stays.
func TestReplayFailureKeepsTheLetter(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	seq := e.letter(deadletter.Letter{Chain: "retired", Reason: deadletter.ReasonPoison, SourceSeq: 3, Data: jsonRequest(t, map[string]any{"id": "x"})})
	if _, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{}); err == nil {
		t.Fatal("replay to a chain no stream takes succeeded")
	}
	if _, err := e.store.Get(ctx, seq); err != nil {
		t.Fatalf("dead letter lost after a failed replay: %v", err)
	}
}

// TestReplayDeadline: a request whose deadline has passed is refused (it
// would only expire again) unless the replay gives a new deadline, which
// replaces the body's.
func TestReplayDeadline(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, SourceSeq: 8,
		Data: jsonRequest(t, map[string]any{"id": "late", "deadline": past})})
	if _, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{}); !errors.Is(err, deadletter.ErrDeadlinePassed) {
		t.Fatalf("replay: %v, want ErrDeadlinePassed", err)
	}
	if _, err := e.store.Get(ctx, seq); err != nil {
		t.Fatalf("refused dead letter lost: %v", err)
	}
	// Read as a processor reads it, as time.Parse reads RFC 3339: it takes
	// a one-digit hour and a comma before the fraction.
	for i, passed := range []string{"2020-01-01T1:00:00Z", "2020-01-01T00:00:00,5Z"} {
		seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, SourceSeq: uint64(20 + i),
			Data: jsonRequest(t, map[string]any{"id": fmt.Sprintf("late-%d", i), "deadline": passed})})
		if _, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{}); !errors.Is(err, deadletter.ErrDeadlinePassed) {
			t.Fatalf("replay with deadline %s: %v, want ErrDeadlinePassed", passed, err)
		}
	}
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	r, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{Deadline: deadline})
	if err != nil || !r.BodyChanged {
		t.Fatalf("%+v %v", r, err)
	}
	q := e.queued("default")
	dec, err := wire.DecodeRequest(q[0].Data, q[0].Header, q[0].Sequence, replyPrefixes)
	if err != nil || dec.ID != "late" || !dec.DeadlineAt.Equal(deadline) {
		t.Fatalf("replayed request decodes as %+v (%v)", dec, err)
	}
}

// TestReplayTimestampDeadline: a msgpack request's deadline sent as a msgpack
// timestamp is read like an RFC 3339 one: passed, the replay is refused; a
// new deadline replaces it.
func TestReplayTimestampDeadline(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	body, err := msgpack.Marshal(map[string]any{"id": "late-ts", "messages": []any{map[string]any{"role": "user"}},
		"deadline": time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	seq := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, SourceSeq: 9, Data: body})
	if _, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{}); !errors.Is(err, deadletter.ErrDeadlinePassed) {
		t.Fatalf("replay: %v, want ErrDeadlinePassed", err)
	}
	deadline := time.Now().Add(time.Hour).Truncate(time.Second)
	if _, err := e.store.Replay(ctx, seq, deadletter.ReplayOptions{Deadline: deadline}); err != nil {
		t.Fatal(err)
	}
	q := e.queued("default")
	dec, err := wire.DecodeRequest(q[0].Data, q[0].Header, q[0].Sequence, replyPrefixes)
	if err != nil || dec.ID != "late-ts" || !dec.DeadlineAt.Equal(deadline) {
		t.Fatalf("replayed request decodes as %+v (%v)", dec, err)
	}
}

// TestReplayAll: every selected dead letter is replayed; one that cannot be
// stays, with its error reported, and does not stop the others.
func TestReplayAll(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: 1, Data: jsonRequest(t, map[string]any{"id": "a"})})
	stuck := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: 2, Data: jsonRequest(t, map[string]any{"id": "b", "deadline": past})})
	e.letter(deadletter.Letter{Chain: "other", Reason: deadletter.ReasonPoison, SourceSeq: 3, Data: jsonRequest(t, map[string]any{"id": "c"})})
	kept := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonBadRequest, SourceSeq: 4, Data: []byte("junk")})

	done, err := e.store.ReplayAll(ctx, deadletter.Filter{Reason: deadletter.ReasonPoison}, deadletter.ReplayOptions{})
	if !errors.Is(err, deadletter.ErrDeadlinePassed) {
		t.Fatalf("ReplayAll error %v, want the passed deadline reported", err)
	}
	if len(done) != 2 || done[0].RequestID != "a" || done[1].RequestID != "c" {
		t.Fatalf("replayed %+v", done)
	}
	left, err := e.store.List(ctx, deadletter.Filter{})
	if err != nil || len(left) != 2 || left[0].Seq != stuck || left[1].Seq != kept {
		t.Fatalf("left %+v (%v)", left, err)
	}
}

// TestReplaySelected: named sequences are replayed in the order given; one
// that is missing or refused is reported and does not stop the others, and
// stays. Sequences and a filter together are refused before anything is
// replayed; a filter alone replays what it selects.
func TestReplaySelected(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	a := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonPoison, SourceSeq: 1, Data: jsonRequest(t, map[string]any{"id": "a"})})
	stuck := e.letter(deadletter.Letter{Chain: "default", Reason: deadletter.ReasonExpired, SourceSeq: 2, Data: jsonRequest(t, map[string]any{"id": "b", "deadline": past})})
	c := e.letter(deadletter.Letter{Chain: "other", Reason: deadletter.ReasonPoison, SourceSeq: 3, Data: jsonRequest(t, map[string]any{"id": "c"})})

	if done, err := e.store.ReplaySelected(ctx, deadletter.Selection{Seqs: []uint64{a}, Filter: deadletter.Filter{Chain: "default"}}, deadletter.ReplayOptions{}); err == nil || len(done) != 0 {
		t.Fatalf("sequences and a filter together: replayed %+v (%v)", done, err)
	}
	if left, err := e.store.List(ctx, deadletter.Filter{}); err != nil || len(left) != 3 {
		t.Fatalf("a refused selection changed the dead letters: %+v (%v)", left, err)
	}

	done, err := e.store.ReplaySelected(ctx, deadletter.Selection{Seqs: []uint64{c, 999, stuck, a}}, deadletter.ReplayOptions{})
	if !errors.Is(err, deadletter.ErrNotFound) || !errors.Is(err, deadletter.ErrDeadlinePassed) {
		t.Fatalf("error %v, want the missing sequence and the passed deadline reported", err)
	}
	if len(done) != 2 || done[0].Seq != c || done[0].RequestID != "c" || done[1].Seq != a || done[1].RequestID != "a" {
		t.Fatalf("replayed %+v, want c then a", done)
	}
	left, err := e.store.List(ctx, deadletter.Filter{})
	if err != nil || len(left) != 1 || left[0].Seq != stuck {
		t.Fatalf("left %+v (%v), want only the refused one", left, err)
	}

	done, err = e.store.ReplaySelected(ctx, deadletter.Selection{Filter: deadletter.Filter{Chain: "default"}},
		deadletter.ReplayOptions{Deadline: time.Now().Add(time.Hour)})
	if err != nil || len(done) != 1 || done[0].Seq != stuck || !done[0].BodyChanged {
		t.Fatalf("filtered replay with a new deadline: %+v (%v)", done, err)
	}
}
