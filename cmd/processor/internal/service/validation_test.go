package service_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
	"github.com/detourhq/detour/deadletter"
	"github.com/detourhq/detour/kvstate"
)

// TestInvalidAnswersFallThrough is acceptance 6 of the failure-semantics
// issue (and, run for both adapters, part of 7): an empty answer, one cut
// short for length, and JSON that fails the request's schema are each skipped
// for the next provider, recorded with their provider, and none is cooled.
func TestInvalidAnswersFallThrough(t *testing.T) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		t.Run(flavor.String(), func(t *testing.T) {
			empty := providertest.New(flavor, providertest.Empty())
			defer empty.Close()
			cut := providertest.New(flavor, providertest.Truncated())
			defer cut.Close()
			wrong := providertest.New(flavor, providertest.JSON(map[string]any{"answer": 42}))
			defer wrong.Close()
			good := providertest.New(flavor, providertest.JSON(map[string]any{"answer": "forty-two"}))
			defer good.Close()
			h := newHarness(t)
			h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: empty, type: %[1]s, base_url: %[2]s, model: m-empty, failure_threshold: 1}
  - {name: cut, type: %[1]s, base_url: %[3]s, model: m-cut, failure_threshold: 1}
  - {name: wrong, type: %[1]s, base_url: %[4]s, model: m-wrong, failure_threshold: 1}
  - {name: good, type: %[1]s, base_url: %[5]s, model: m-good}
chains:
  default: [empty, cut, wrong, good]
`, flavor, empty.URL, cut.URL, wrong.URL, good.URL)), testSettings())

			for i := range 3 {
				req := request(fmt.Sprintf("v%d", i), "what is the answer?")
				req.ResponseSchema = map[string]any{
					"type":       "object",
					"required":   []any{"answer"},
					"properties": map[string]any{"answer": map[string]any{"type": "string"}},
				}
				h.publish("default", req)
				res, _ := h.waitResult(req.ID, 10*time.Second)
				if res.Status != chain.StatusOK || res.Provider != "good" || res.Position != 3 || !res.Degraded {
					t.Fatalf("%s: %+v, want the answer of good", req.ID, res)
				}
				for j, name := range []string{"empty", "cut", "wrong"} {
					a := res.Attempts[j]
					if a.Provider != name || a.Class != chain.ClassInvalidOutput || a.Error == "" {
						t.Fatalf("%s: attempt %d = %+v, want invalid_output from %s", req.ID, j, a, name)
					}
				}
			}
			for _, s := range []*providertest.Server{empty, cut, wrong, good} {
				if s.Requests() != 3 {
					t.Fatalf("a provider received %d requests, want 3 (never skipped)", s.Requests())
				}
			}
			kv, err := h.js.KeyValue(context.Background(), kvstate.Bucket)
			if err != nil {
				t.Fatal(err)
			}
			keys, err := kv.Keys(context.Background())
			if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
				t.Fatal(err)
			}
			// The processor's record of what it runs is no provider state.
			keys = slices.DeleteFunc(keys, func(k string) bool { return strings.HasSuffix(k, "."+kvstate.SuffixRunning) })
			if len(keys) != 0 {
				t.Fatalf("invalid answers wrote provider state: %v", keys)
			}
		})
	}
}

// TestUnanswerableRequestIsDeadLetteredAfterMaxInvalidDeliveries: a request
// whose response_schema no provider's answers satisfy (plain text from each,
// the rules template included) is tried DETOUR_MAX_INVALID_DELIVERIES times,
// then dead-lettered invalid_output with a failed result, instead of paying
// every provider once a minute until its deadline a day later.
func TestUnanswerableRequestIsDeadLetteredAfterMaxInvalidDeliveries(t *testing.T) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		t.Run(flavor.String(), func(t *testing.T) {
			prose := providertest.New(flavor, providertest.OK())
			defer prose.Close()
			refusing := providertest.New(flavor, providertest.Status(400))
			defer refusing.Close()
			h := newHarness(t)
			h.startProcessor(parseChainFile(t, fmt.Sprintf(`
providers:
  - {name: prose, type: %[1]s, base_url: %[2]s, model: m-prose, failure_threshold: 1}
  - {name: refusing, type: %[1]s, base_url: %[3]s, model: m-refusing, failure_threshold: 1}
  - {name: template, type: rules, default_reply: "The AI service is having trouble."}
chains:
  default: [prose, refusing, template]
`, flavor, prose.URL, refusing.URL)), testSettings())

			req := request("schema-1", "what is the answer?")
			req.ResponseSchema = map[string]any{"type": "object", "required": []any{"answer"}}
			h.publish("default", req)
			res, _ := h.waitResult(req.ID, 20*time.Second)
			if res.Status != chain.StatusFailed || res.Deliveries != 3 || !strings.Contains(res.Error, "valid") {
				t.Fatalf("result %+v, want failed after 3 deliveries", res)
			}
			if got := prose.Requests(); got != 3 {
				t.Fatalf("prose received %d requests, want 3 (one per delivery)", got)
			}
			letters := h.deadLetters()
			if len(letters) != 1 {
				t.Fatalf("%d dead letters, want 1", len(letters))
			}
			dl := letters[0].Header
			if dl.Get(deadletter.HeaderReason) != string(deadletter.ReasonInvalidOutput) || dl.Get("Detour-DLQ-Deliveries") != "3" {
				t.Fatalf("dead letter headers %v, want reason invalid_output after 3 deliveries", dl)
			}
			var attempts []chain.Attempt
			if err := json.Unmarshal([]byte(dl.Get("Detour-DLQ-Attempts")), &attempts); err != nil || len(attempts) != 3 {
				t.Fatalf("dead letter attempts %q (%v), want the last delivery's 3", dl.Get("Detour-DLQ-Attempts"), err)
			}
			for _, a := range attempts {
				if a.Class != chain.ClassInvalidOutput && a.Class != chain.ClassRequest {
					t.Errorf("attempt %+v, want invalid_output or request", a)
				}
			}
			waitSettled(t, h, "default")
		})
	}
}
