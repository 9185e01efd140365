package service_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

// TestHostileInputNeitherKnocksOutNorIsLost is the acceptance of "Never
// knocked out, never silently lost": one small message with a 5,000-byte reply
// subject (in the body, or in the Detour-Reply-To header) would make the
// processor send a PUB line over the server's control-line limit, and the
// server would drop its connection for good; a 90 KB nested response_schema
// would take seconds and gigabytes to compile. Each is dead-lettered with its
// reason instead, no provider is called for them, and the processor, still
// connected, answers the next request.
func TestHostileInputNeitherKnocksOutNorIsLost(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())

	longReply := "_INBOX." + strings.Repeat("x", 5000)
	inBody := request("long-reply-body", "hello")
	inBody.ReplyTo = longReply
	bodyJSON, err := json.Marshal(inBody)
	if err != nil {
		t.Fatal(err)
	}
	inHeader, err := json.Marshal(request("long-reply-header", "hello"))
	if err != nil {
		t.Fatal(err)
	}
	nested := `{"id":"nested-schema","messages":[{"role":"user","content":"hi"}],"response_schema":` +
		strings.Repeat(`{"items":`, 9990) + `{}` + strings.Repeat(`}`, 9990) + `}`
	cases := []struct {
		body   []byte
		header nats.Header
		reason deadletter.Reason
	}{
		{bodyJSON, nil, deadletter.ReasonBadReplySubject},
		{inHeader, nats.Header{wire.HeaderReplyTo: {longReply}}, deadletter.ReasonBadReplySubject},
		{[]byte(nested), nil, deadletter.ReasonBadRequest},
	}
	bySeq := map[string]int{}
	for i, c := range cases {
		ack := h.publishRaw("default", c.body, c.header)
		bySeq[strconv.FormatUint(ack.Sequence, 10)] = i
	}
	eventually(t, 10*time.Second, "three dead letters", func() bool { return len(h.deadLetters()) == len(cases) })
	for _, dl := range h.deadLetters() {
		i, ok := bySeq[dl.Header.Get(deadletter.HeaderSourceSeq)]
		if !ok {
			t.Fatalf("dead letter with unknown source seq: %v", dl.Header)
		}
		if got := dl.Header.Get(deadletter.HeaderReason); got != string(cases[i].reason) {
			t.Errorf("case %d: reason %q, want %q (error %.200q)", i, got, cases[i].reason, dl.Header.Get(deadletter.HeaderError))
		}
		if n := len(dl.Header.Get(deadletter.HeaderError)); n == 0 || n > 500 {
			t.Errorf("case %d: error header of %d bytes, want a short reason", i, n)
		}
	}

	h.publish("default", request("after", "still there?"))
	if res, _ := h.waitResult("after", 10*time.Second); res.Status != chain.StatusOK {
		t.Fatalf("processor stopped serving: %+v", res)
	}
	if solo.Requests() != 1 {
		t.Fatalf("provider called %d times, want 1 (hostile input calls no provider)", solo.Requests())
	}
}
