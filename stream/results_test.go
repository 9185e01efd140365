package stream_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/stream"
	"github.com/detourhq/detour/wire"
)

// hitEvenRunner answers every request, from its cache when its id ends in an
// even digit.
type hitEvenRunner struct{}

func (hitEvenRunner) Run(_ context.Context, req *chain.Request) (chain.Result, error) {
	res := chain.Result{Status: chain.StatusOK, Content: "answer to " + req.ID, Provider: "p", Model: "m"}
	if endsEven(req.ID) {
		res.Cache = chain.CacheHit
	}
	return res, nil
}

func endsEven(id string) bool { return (id[len(id)-1]-'0')%2 == 0 }

// TestResultsAnsweredTogetherKeepTheirOwnHeaders: a backlog answered by
// many workers at once gives each request a result of its own, in its
// encoding, stored and, for a request that names a reply subject, sent there
// too; every copy's subject, body and headers name its request (its id, its
// message's sequence and time, its own cache header or none), though the
// processor reuses what it builds results in.
func TestResultsAnsweredTogetherKeepTheirOwnHeaders(t *testing.T) {
	const workers, requests = 16, 300
	nc, js, p := newProcessor(t, time.Hour, func() stream.Runner { return hitEvenRunner{} }, "default")
	results, err := nc.SubscribeSync(wire.ResultsPrefix + ">")
	if err != nil {
		t.Fatal(err)
	}
	replies, err := nc.SubscribeSync("_INBOX.together.>")
	if err != nil {
		t.Fatal(err)
	}
	requestsStream, err := js.Stream(t.Context(), wire.RequestsStream)
	if err != nil {
		t.Fatal(err)
	}
	type sent struct {
		seq     uint64
		stored  time.Time
		replyTo string
	}
	sents := map[string]sent{}
	for i := range requests {
		id := "together-" + strconv.Itoa(i)
		req := wire.Request{ID: id, Messages: []chain.Message{{Role: "user", Content: "hi"}}}
		if i%3 == 0 {
			req.ReplyTo = "_INBOX.together." + id
		}
		msg := nats.NewMsg(wire.RequestSubject("default"))
		msg.Data, _ = json.Marshal(req)
		if i%2 == 1 {
			msg.Data, _ = msgpack.Marshal(req)
			msg.Header.Set(wire.HeaderContentType, wire.MsgPack.ContentType())
		}
		ack, err := js.PublishMsg(t.Context(), msg)
		if err != nil {
			t.Fatal(err)
		}
		// Read before any request is answered and leaves the work queue.
		m, err := requestsStream.GetMsg(t.Context(), ack.Sequence)
		if err != nil {
			t.Fatal(err)
		}
		sents[id] = sent{seq: ack.Sequence, stored: m.Time, replyTo: req.ReplyTo}
	}
	consume(t, js, p, workers, "default")

	check := func(m *nats.Msg, id string) {
		t.Helper()
		s := sents[id]
		res, err := wire.DecodeResult(m.Data, m.Header)
		if err != nil {
			t.Fatalf("result on %s: %v", m.Subject, err)
		}
		want := wire.JSON
		if n, _ := strconv.Atoi(strings.TrimPrefix(id, "together-")); n%2 == 1 {
			want = wire.MsgPack
		}
		if enc, err := wire.DetectEncoding(m.Data, nil); err != nil || enc != want || m.Header.Get(wire.HeaderContentType) != want.ContentType() {
			t.Errorf("result on %s: %s %q, body in %v, want %s", m.Subject, wire.HeaderContentType, m.Header.Get(wire.HeaderContentType), enc, want.ContentType())
		}
		if res.ID != id || res.Content != "answer to "+id || m.Header.Get(wire.HeaderRequestID) != id || m.Header.Get(wire.HeaderMsgID) != id {
			t.Errorf("result on %s: body id %q, content %q, %s %q, %s %q", m.Subject, res.ID, res.Content,
				wire.HeaderRequestID, m.Header.Get(wire.HeaderRequestID), wire.HeaderMsgID, m.Header.Get(wire.HeaderMsgID))
		}
		if !wire.Answers(m.Header, time.Time{}, s.seq, s.stored) || m.Header.Get(wire.HeaderRequestTime) == "" {
			t.Errorf("result on %s: %s %q and %s %q, want %d and %v", m.Subject, wire.HeaderRequestSeq, m.Header.Get(wire.HeaderRequestSeq),
				wire.HeaderRequestTime, m.Header.Get(wire.HeaderRequestTime), s.seq, s.stored)
		}
		wantCache := chain.CacheStatus("")
		if endsEven(id) {
			wantCache = chain.CacheHit
		}
		if got, ok := m.Header[wire.HeaderCache]; ok != (wantCache != "") || m.Header.Get(wire.HeaderCache) != string(wantCache) || res.Cache != wantCache {
			t.Errorf("result on %s: %s %q and cache %q in its body, want %q", m.Subject, wire.HeaderCache, got, res.Cache, wantCache)
		}
	}
	seen := map[string]bool{}
	for range requests {
		m, err := results.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("results: %v (%d of %d seen)", err, len(seen), requests)
		}
		id := strings.TrimPrefix(m.Subject, wire.ResultsPrefix)
		if seen[id] {
			t.Errorf("a second result for %s", id)
		}
		seen[id] = true
		check(m, id)
	}
	for range (requests + 2) / 3 {
		m, err := replies.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("replies: %v", err)
		}
		id := strings.TrimPrefix(m.Subject, "_INBOX.together.")
		if sents[id].replyTo != m.Subject {
			t.Errorf("a reply on %s, which no request named", m.Subject)
		}
		check(m, id)
	}
}
