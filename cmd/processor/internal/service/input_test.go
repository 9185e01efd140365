package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

func okChain(t *testing.T, url string) string {
	t.Helper()
	return fmt.Sprintf(`
providers:
  - {name: solo, type: openai, base_url: %s, model: solo-model}
chains:
  default: [solo]
`, url)
}

// TestReplyToInbox is the first half of acceptance 5: a result published to
// a custom reply subject under _INBOX. reaches a plain core-NATS subscriber
// with the headers of docs/requests.md.
func TestReplyToInbox(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())

	sub, err := h.nc.SubscribeSync("_INBOX.scenario.reply")
	if err != nil {
		t.Fatal(err)
	}
	req := request("inbox-1", "hello")
	req.ReplyTo = "_INBOX.scenario.reply"
	req.Metadata = chain.Metadata{"tenant": "acme"}
	h.publish("default", req)
	msg, err := sub.NextMsg(10 * time.Second)
	if err != nil {
		t.Fatalf("no reply on the inbox: %v", err)
	}
	want := map[string]string{
		"Nats-Msg-Id": "inbox-1", "Detour-Request-Id": "inbox-1", "Detour-Model": "solo-model",
		"Detour-Provider": "solo", "Detour-Degraded": "false", "Detour-Status": "ok", "Content-Type": "application/json",
	}
	for k, v := range want {
		if got := msg.Header.Get(k); got != v {
			t.Errorf("header %s = %q, want %q", k, got, v)
		}
	}
	var res chain.Result
	if err := json.Unmarshal(msg.Data, &res); err != nil {
		t.Fatalf("reply body: %v", err)
	}
	if res.ID != "inbox-1" || res.Status != chain.StatusOK || res.Content == "" || res.Metadata["tenant"] != "acme" {
		t.Fatalf("reply %+v", res)
	}
	// The result is stored as well, for a requester that was offline.
	if stored, _ := h.waitResult("inbox-1", 5*time.Second); stored.Content != res.Content {
		t.Fatalf("stored result %q differs from the reply %q", stored.Content, res.Content)
	}
}

// TestReplyToAPISubjectIsRefused is the second half of acceptance 5: a
// request must never make the processor publish to a JetStream API subject.
func TestReplyToAPISubjectIsRefused(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), testSettings())

	req := request("evil", "hello")
	req.ReplyTo = "$JS.API.STREAM.DELETE.DETOUR_REQUESTS"
	h.publish("default", req)
	eventually(t, 10*time.Second, "a dead letter", func() bool { return len(h.deadLetters()) == 1 })
	dl := h.deadLetters()[0]
	if got := dl.Header.Get(deadletter.HeaderReason); got != string(deadletter.ReasonBadReplySubject) {
		t.Fatalf("reason %q, want bad_reply_subject", got)
	}
	if _, err := h.js.Stream(context.Background(), wire.RequestsStream); err != nil {
		t.Fatalf("requests stream gone: %v", err)
	}
	if solo.Requests() != 0 {
		t.Fatalf("provider called %d times for a refused request", solo.Requests())
	}
}

// TestBadInputIsDeadLettered is acceptance 6: undecodable bytes, a request
// without messages and an oversized payload each land in the dead letters
// with their reason, and the processor keeps serving.
func TestBadInputIsDeadLettered(t *testing.T) {
	solo := providertest.New(providertest.OpenAI, providertest.OK())
	defer solo.Close()
	h := newHarness(t)
	settings := testSettings()
	settings.MaxPayload = 1024
	h.startProcessor(parseChainFile(t, okChain(t, solo.URL)), settings)

	oversized, _ := json.Marshal(request("big", strings.Repeat("x", 2000)))
	cases := []struct {
		body   []byte
		reason deadletter.Reason
	}{
		{[]byte{0xc1, 0xff, 0x00, 0x13}, deadletter.ReasonBadRequest},
		{[]byte(`{"id":"empty","messages":[]}`), deadletter.ReasonBadRequest},
		{oversized, deadletter.ReasonTooLarge},
	}
	bySeq := map[string]int{}
	for i, c := range cases {
		ack := h.publishRaw("default", c.body, nil)
		bySeq[strconv.FormatUint(ack.Sequence, 10)] = i
	}
	eventually(t, 10*time.Second, "three dead letters", func() bool { return len(h.deadLetters()) == len(cases) })
	for _, dl := range h.deadLetters() {
		i, ok := bySeq[dl.Header.Get(deadletter.HeaderSourceSeq)]
		if !ok {
			t.Fatalf("dead letter with unknown source seq: %v", dl.Header)
		}
		if got := dl.Header.Get(deadletter.HeaderReason); got != string(cases[i].reason) {
			t.Errorf("case %d: reason %q, want %q (error %q)", i, got, cases[i].reason, dl.Header.Get(deadletter.HeaderError))
		}
		if string(dl.Data) != string(cases[i].body) {
			t.Errorf("case %d: body changed", i)
		}
		if dl.Header.Get(deadletter.HeaderError) == "" {
			t.Errorf("case %d: no error header: %v", i, dl.Header)
		}
	}

	h.publish("default", request("after", "still there?"))
	if res, _ := h.waitResult("after", 10*time.Second); res.Status != chain.StatusOK {
		t.Fatalf("processor stopped serving: %+v", res)
	}
	if solo.Requests() != 1 {
		t.Fatalf("provider called %d times, want 1 (bad input calls no provider)", solo.Requests())
	}
}
