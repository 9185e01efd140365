package service_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/wire"
)

// bodyOfSize is a JSON request of exactly size bytes whose prompt is filler.
func bodyOfSize(t *testing.T, id string, size int, withMessages bool) []byte {
	t.Helper()
	shape := `{"id":%q,"messages":[{"role":"user","content":"%s"}]}`
	if !withMessages {
		shape = `{"id":%q,"messages":[],"note":"%s"}`
	}
	empty := fmt.Sprintf(shape, id, "")
	body := []byte(fmt.Sprintf(shape, id, strings.Repeat("x", size-len(empty))))
	if len(body) != size || !json.Valid(body) {
		t.Fatalf("built a %d-byte body, want %d bytes of JSON", len(body), size)
	}
	return body
}

// TestResultTooLargeForTheServerFailsOnce: against a server with the default
// max payload (1 MiB), a request of 1,048,400 bytes whose answer echoes it
// cannot have its result stored. It gets a failed result saying so and a
// dead letter, within 10 s, and its provider is called once: it neither
// loops (re-calling the provider on every redelivery) nor vanishes.
func TestResultTooLargeForTheServerFailsOnce(t *testing.T) {
	echo := providertest.New(providertest.OpenAI, providertest.OK())
	defer echo.Close()
	h := newHarness(t)
	if got := h.nc.MaxPayload(); got != 1<<20 {
		t.Fatalf("server max payload %d, want the default 1 MiB", got)
	}
	h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: echo, type: openai, base_url: %s, model: m1}
chains:
  default: [echo]
`, echo.URL)), testSettings())

	h.publishRaw("default", bodyOfSize(t, "big", 1_048_400, true), nil)
	res, _ := h.waitResult("big", 10*time.Second)
	if res.Status != chain.StatusFailed || !strings.Contains(res.Error, "max payload") || res.Content != "" {
		t.Fatalf("result %+v, want failed: too large for the server", res)
	}
	letters := h.deadLetters()
	if len(letters) != 1 || letters[0].Header.Get(deadletter.HeaderReason) != string(deadletter.ReasonTooLarge) {
		t.Fatalf("dead letters %d (%v), want one too_large", len(letters), letters)
	}
	if dl := letters[0].Header; dl.Get(deadletter.HeaderTrimmed) != "true" || dl.Get(deadletter.HeaderOriginalSize) != "1048400" {
		t.Errorf("dead letter headers %v, want it cut to fit with the original size", dl)
	}
	waitSettled(t, h, "default")
	if got := echo.Requests(); got != 1 {
		t.Fatalf("the provider was called %d times, want once", got)
	}
}

// TestBadRequestTooLargeToDeadLetterWhole: a bad request that fitted the
// server whole is dead-lettered cut down instead of failing to store on
// every delivery.
func TestBadRequestTooLargeToDeadLetterWhole(t *testing.T) {
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, `
providers:
  - {name: template, type: rules, default_reply: "sorry"}
chains:
  default: [template]
`), testSettings())
	h.publishRaw("default", bodyOfSize(t, "bad-big", 1_048_400, false), nil)
	eventually(t, 10*time.Second, "a dead letter", func() bool { return len(h.deadLetters()) == 1 })
	dl := h.deadLetters()[0].Header
	if dl.Get(deadletter.HeaderReason) != string(deadletter.ReasonBadRequest) || dl.Get(deadletter.HeaderTrimmed) != "true" {
		t.Fatalf("dead letter headers %v, want bad_request cut to fit", dl)
	}
	waitSettled(t, h, "default")
}

// waitSettled waits until the chain's consumer holds nothing pending or
// unacknowledged: every request was settled for good.
func waitSettled(t *testing.T, h *harness, chainName string) {
	t.Helper()
	cons, err := h.js.Consumer(context.Background(), wire.RequestsStream, wire.ConsumerName(chainName))
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Second, "every request to be settled", func() bool {
		info, err := cons.Info(context.Background())
		return err == nil && info.NumAckPending == 0 && info.NumPending == 0 && info.NumRedelivered == 0
	})
}

// TestDeadLetterStreamDeletedIsRecreated: a processor that finds
// DETOUR_DEADLETTER gone when it must dead-letter a request puts the stream
// back and stores the dead letter, instead of retrying for ever.
func TestDeadLetterStreamDeletedIsRecreated(t *testing.T) {
	h := newHarness(t)
	h.startProcessor(parseChainFile(t, `
providers:
  - {name: template, type: rules, default_reply: "sorry"}
chains:
  default: [template]
`), testSettings())
	ctx := context.Background()
	if err := h.js.DeleteStream(ctx, wire.DeadLetterStream); err != nil {
		t.Fatal(err)
	}
	h.publishRaw("default", []byte(`{"id":"no-messages","messages":[]}`), nil)
	eventually(t, 10*time.Second, "the dead letter to be stored in a recreated stream", func() bool {
		s, err := h.js.Stream(ctx, wire.DeadLetterStream)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == 1
	})
	if dl := h.deadLetters()[0].Header; dl.Get(deadletter.HeaderReason) != string(deadletter.ReasonBadRequest) {
		t.Fatalf("dead letter headers %v, want bad_request", dl)
	}
	waitSettled(t, h, "default")
}
