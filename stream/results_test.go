package stream_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/wire"
)

// TestResultsAnsweredTogetherKeepTheirOwnHeaders: a backlog answered by
// many workers at once gives each request a result of its own, whose
// subject, body and headers all name that request, though the processor
// reuses what it builds results in.
func TestResultsAnsweredTogetherKeepTheirOwnHeaders(t *testing.T) {
	const workers, requests = 16, 300
	var results *nats.Subscription
	seqs := map[string]uint64{}      // request id -> its sequence in the requests stream
	stored := map[string]time.Time{} // request id -> when the requests stream stored it
	consumeChainsAfter(t, workers, func(nc *nats.Conn) {
		var err error
		if results, err = nc.SubscribeSync(wire.ResultsPrefix + ">"); err != nil {
			t.Fatal(err)
		}
		for i := range requests {
			id := "together-" + strconv.Itoa(i)
			ack, err := nc.Request(wire.RequestSubject("default"), requestBody(id), 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			var pub struct{ Seq uint64 }
			if err := json.Unmarshal(ack.Data, &pub); err != nil || pub.Seq == 0 {
				t.Fatalf("publishing %s: %q (%v)", id, ack.Data, err)
			}
			seqs[id] = pub.Seq
		}
		// The messages' stored times, read before any is answered and
		// removed from the work queue.
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		requests, err := js.Stream(t.Context(), wire.RequestsStream)
		if err != nil {
			t.Fatal(err)
		}
		for id, seq := range seqs {
			m, err := requests.GetMsg(t.Context(), seq)
			if err != nil {
				t.Fatal(err)
			}
			stored[id] = m.Time
		}
	}, "default")
	seen := map[string]bool{}
	for range requests {
		m, err := results.NextMsg(10 * time.Second)
		if err != nil {
			t.Fatalf("results: %v (%d of %d seen)", err, len(seen), requests)
		}
		id := strings.TrimPrefix(m.Subject, wire.ResultsPrefix)
		res, err := wire.DecodeResult(m.Data, m.Header)
		if err != nil {
			t.Fatalf("result of %s: %v", id, err)
		}
		if res.ID != id || m.Header.Get(wire.HeaderRequestID) != id || m.Header.Get(wire.HeaderMsgID) != id {
			t.Errorf("result on %s: body id %q, %s %q, %s %q", m.Subject, res.ID,
				wire.HeaderRequestID, m.Header.Get(wire.HeaderRequestID), wire.HeaderMsgID, m.Header.Get(wire.HeaderMsgID))
		}
		if seq, ok := seqs[id]; !ok || !wire.Answers(m.Header, seq, stored[id]) || m.Header.Get(wire.HeaderRequestTime) == "" {
			t.Errorf("result on %s: %s %q and %s %q, want %d and %v", m.Subject, wire.HeaderRequestSeq, m.Header.Get(wire.HeaderRequestSeq),
				wire.HeaderRequestTime, m.Header.Get(wire.HeaderRequestTime), seq, stored[id])
		}
		if seen[id] {
			t.Errorf("a second result for %s", id)
		}
		seen[id] = true
	}
}
