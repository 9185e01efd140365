package chain_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// TestProviderUsageIsBounded: a provider's usage report is outside input.
// Negative counts read as 0 and huge ones as chain.MaxUsageTokens, in both
// flavours, so that token and cost counters never go backwards or
// overflow.
func TestProviderUsageIsBounded(t *testing.T) {
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		for name, tt := range map[string]struct {
			in   providertest.Usage
			want chain.Usage
		}{
			"negative": {providertest.Usage{Prompt: -1, Completion: -5}, chain.Usage{}},
			"huge":     {providertest.Usage{Prompt: math.MaxInt64, Completion: 7}, chain.Usage{PromptTokens: chain.MaxUsageTokens, CompletionTokens: 7}},
		} {
			t.Run(flavor.String()+"/"+name, func(t *testing.T) {
				resp, err := callFlavor(t, flavor, func(int, providertest.Request) providertest.Reply {
					return providertest.Reply{Status: 200, Content: "ok", Usage: &tt.in}
				})
				if err != nil {
					t.Fatal(err)
				}
				if resp.Usage != tt.want {
					t.Errorf("usage %+v, want %+v", resp.Usage, tt.want)
				}
			})
		}
	}
}

// TestProviderUsageInAnyShapeKeepsTheAnswer: usage only counts; an answer
// the provider was paid for stands whatever shape its usage takes. Counts
// written as floats (gateways written in Python send 12.0) or exponents are
// read rounded down and bounded; anything else reads as 0.
func TestProviderUsageInAnyShapeKeepsTheAnswer(t *testing.T) {
	counts := func(prompt, completion string) func(providertest.Flavor) json.RawMessage {
		return func(f providertest.Flavor) json.RawMessage {
			if f == providertest.Anthropic {
				return json.RawMessage(`{"input_tokens":` + prompt + `,"output_tokens":` + completion + `}`)
			}
			return json.RawMessage(`{"prompt_tokens":` + prompt + `,"completion_tokens":` + completion + `,"total_tokens":1}`)
		}
	}
	whole := func(usage string) func(providertest.Flavor) json.RawMessage {
		return func(providertest.Flavor) json.RawMessage { return json.RawMessage(usage) }
	}
	tests := map[string]struct {
		usage func(providertest.Flavor) json.RawMessage
		want  chain.Usage
	}{
		"floats":            {counts("12.0", "3.7"), chain.Usage{PromptTokens: 12, CompletionTokens: 3}},
		"exponents":         {counts("1.2e1", "1e40"), chain.Usage{PromptTokens: 12, CompletionTokens: chain.MaxUsageTokens}},
		"past float64":      {counts("1e400", "-1e400"), chain.Usage{PromptTokens: chain.MaxUsageTokens}},
		"past int64":        {counts("99999999999999999999", "-99999999999999999999"), chain.Usage{PromptTokens: chain.MaxUsageTokens}},
		"strings and nulls": {counts(`"12"`, "null"), chain.Usage{}},
		"lists and objects": {counts("[1]", `{"n":1}`), chain.Usage{}},
		"usage null":        {whole("null"), chain.Usage{}},
		"usage a string":    {whole(`"n/a"`), chain.Usage{}},
		"usage a list":      {whole(`[12, 3]`), chain.Usage{}},
	}
	for _, flavor := range []providertest.Flavor{providertest.OpenAI, providertest.Anthropic} {
		for name, tt := range tests {
			t.Run(flavor.String()+"/"+name, func(t *testing.T) {
				resp, err := callFlavor(t, flavor, func(int, providertest.Request) providertest.Reply {
					return providertest.Reply{Content: "ok", UsageJSON: tt.usage(flavor)}
				})
				if err != nil {
					t.Fatalf("the answer was refused: %v", err)
				}
				if resp.Content != "ok" || resp.Usage != tt.want {
					t.Errorf("content %q, usage %+v; want \"ok\", %+v", resp.Content, resp.Usage, tt.want)
				}
			})
		}
	}
}

// TestCostIsLeftOutWhenNotFinite: a Price set in Go may be anything; a
// cost that is not a finite number of at least 0 is left out, since a
// result with one could not be encoded.
func TestCostIsLeftOutWhenNotFinite(t *testing.T) {
	for name, price := range map[string]chain.Price{
		"infinite": {InputPerMTok: math.Inf(1)},
		"NaN":      {InputPerMTok: math.NaN()},
		"negative": {InputPerMTok: -1},
	} {
		t.Run(name, func(t *testing.T) {
			step, _ := fakeProvider(t, "p", func(int, providertest.Request) providertest.Reply {
				return providertest.Reply{Status: 200, Content: "ok", Usage: &providertest.Usage{Prompt: 10, Completion: 10}}
			}, chain.Policy{})
			step.Price = &price
			res, err := newChain(newMemState(), step).Run(context.Background(), &hello)
			if err != nil {
				t.Fatal(err)
			}
			if res.Cost != nil {
				t.Errorf("cost %v, want none", *res.Cost)
			}
		})
	}
}

// TestAnswerMetadataOfTheWrongKindKeepsTheAnswer: as with usage, a model
// or refusal of another JSON kind than a string does not void an answer
// the provider was paid for: it reads as absent. A stop reason of another
// kind reads as absent too, and an answer without one is not complete. An
// answer whose text itself is of the wrong kind is malformed, said without
// Go's types.
func TestAnswerMetadataOfTheWrongKindKeepsTheAnswer(t *testing.T) {
	for _, tt := range []struct {
		flavor providertest.Flavor
		body   string
	}{
		{providertest.OpenAI, `{"model":5,"choices":[{"message":{"content":"fine","refusal":{"x":1}},"finish_reason":"stop"}]}`},
		{providertest.OpenAI, `{"model":{"name":"m"},"choices":[{"message":{"content":"fine","refusal":false},"finish_reason":"stop"}]}`},
		{providertest.Anthropic, `{"model":[1],"content":[{"type":"text","text":"fine"}],"stop_reason":"end_turn"}`},
	} {
		resp, err := callFlavor(t, tt.flavor, func(int, providertest.Request) providertest.Reply { return providertest.Reply{RawBody: tt.body} })
		if err != nil || resp.Content != "fine" || resp.Model != "" || !resp.Complete || resp.Refusal != "" {
			t.Errorf("%s: %+v, %v; want the complete answer with no model or refusal", tt.body, resp, err)
		}
	}
	for _, tt := range []struct {
		flavor providertest.Flavor
		body   string
	}{
		{providertest.OpenAI, `{"choices":[{"message":{"content":"fine"},"finish_reason":["stop"]}]}`},
		{providertest.OpenAI, `{"choices":[{"message":{"content":"fine"},"finish_reason":7}]}`},
		{providertest.Anthropic, `{"content":[{"type":"text","text":"fine"}],"stop_reason":{"r":1}}`},
	} {
		resp, err := callFlavor(t, tt.flavor, func(int, providertest.Request) providertest.Reply { return providertest.Reply{RawBody: tt.body} })
		if err != nil || resp.Content != "fine" || resp.StopReason != "" || resp.Complete {
			t.Errorf("%s: %+v, %v; want the text with no stop reason, not complete", tt.body, resp, err)
		}
	}
	for _, tt := range []struct {
		flavor providertest.Flavor
		body   string
	}{
		{providertest.OpenAI, `{"choices":[{"message":{"content":["fine"]}}]}`},
		{providertest.OpenAI, `{"choices":{"message":"x"}}`},
		{providertest.Anthropic, `{"content":"fine"}`},
	} {
		_, err := callFlavor(t, tt.flavor, func(int, providertest.Request) providertest.Reply { return providertest.Reply{RawBody: tt.body} })
		var ce *chain.CallError
		if !errors.As(err, &ce) || ce.Class != chain.ClassInvalidOutput || !strings.Contains(err.Error(), "malformed answer body") {
			t.Errorf("%s: %v, want a malformed invalid_output", tt.body, err)
			continue
		}
		for _, internal := range []string{"Go struct", "json:", "RawMessage", "openAI", "anthropic"} {
			if strings.Contains(err.Error(), internal) {
				t.Errorf("%s: error %q shows the decoder's internals (%q)", tt.body, err, internal)
			}
		}
	}
}
