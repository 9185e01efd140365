package chain_test

import (
	"context"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// TestAnswerStoppedEarlyFallsThrough: an answer that a content filter or a
// refusal ended, or that was cut short, is invalid_output even with text;
// the attempt records the stop reason, the next provider answers, and
// nothing is counted against the provider.
func TestAnswerStoppedEarlyFallsThrough(t *testing.T) {
	type want struct{ stop, text string }
	cases := []struct {
		name   string
		script providertest.Script
		want   map[providertest.Flavor]want
	}{
		{"content filter with partial text", providertest.ContentFiltered("Here is the first half of"), map[providertest.Flavor]want{
			providertest.OpenAI:    {"content_filter", "answer stopped by a content filter (stop_reason content_filter)"},
			providertest.Anthropic: {"refusal", "provider refused (stop_reason refusal)"},
		}},
		{"refusal", providertest.Refusal("I can't help with that."), map[providertest.Flavor]want{
			providertest.OpenAI:    {"refusal", "provider refused: I can't help with that."},
			providertest.Anthropic: {"refusal", "provider refused (stop_reason refusal)"},
		}},
		{"long refusal is cut", providertest.Refusal(strings.Repeat("No. ", 100)), map[providertest.Flavor]want{
			providertest.OpenAI:    {"refusal", "provider refused: No. No."},
			providertest.Anthropic: {"refusal", "provider refused (stop_reason refusal)"},
		}},
		{"truncated", providertest.Truncated(), map[providertest.Flavor]want{
			providertest.OpenAI:    {"length", "answer truncated"},
			providertest.Anthropic: {"max_tokens", "answer truncated"},
		}},
		{"anthropic context window stop", reply(providertest.Reply{Content: "partial", FinishReason: "model_context_window_exceeded"}), map[providertest.Flavor]want{
			providertest.Anthropic: {"model_context_window_exceeded", "answer truncated"},
		}},
	}
	// The filter reasons gateways pass on, in the spellings they use.
	for _, reason := range []string{"SAFETY", "recitation", "Prohibited_Content", "BLOCKLIST", "spii", "guardrail_intervened", "sensitive"} {
		w := want{reason, "answer stopped by a content filter (stop_reason " + reason + ")"}
		cases = append(cases, struct {
			name   string
			script providertest.Script
			want   map[providertest.Flavor]want
		}{"gateway " + reason, reply(providertest.Reply{Content: "partial", FinishReason: reason}), map[providertest.Flavor]want{
			providertest.OpenAI: w, providertest.Anthropic: w,
		}})
	}
	for _, tc := range cases {
		for f, w := range tc.want {
			t.Run(f.String()+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				state := newMemState()
				p, srv := adapterFor(t, f, tc.script)
				backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})

				res, err := newChain(state, chain.Step{Provider: p, Policy: chain.Policy{MaxRetries: 2}}, backup).Run(context.Background(), &hello)

				wantAnswer(t, res, err, "backup", 1)
				first := res.Attempts[0]
				if first.Class != chain.ClassInvalidOutput || first.StopReason != w.stop || !strings.Contains(first.Error, w.text) {
					t.Errorf("first attempt %+v; want invalid_output, stop_reason %q, error with %q", first, w.stop, w.text)
				}
				if len(first.Error) > 200 {
					t.Errorf("error of %d bytes: the refusal is not cut short", len(first.Error))
				}
				if res.Attempts[1].StopReason != "" {
					t.Errorf("a normal stop recorded as %q", res.Attempts[1].StopReason)
				}
				wantRequests(t, "primary", srv, 1)
				if n := state.allFailures(); n != 0 {
					t.Errorf("%d failures recorded against the state, want none", n)
				}
			})
		}
	}
}

// TestNormalStopsAnswer: the normal stop reasons, and a gateway's empty
// refusal beside real text, leave the answer standing.
func TestNormalStopsAnswer(t *testing.T) {
	for _, reason := range []string{"stop", "end_turn", "stop_sequence", "STOP"} {
		for _, f := range bothFlavors {
			resp, err := callFlavor(t, f, reply(providertest.Reply{Content: "fine", FinishReason: reason}))
			if err != nil || resp.Truncated || resp.Refusal != "" {
				t.Errorf("%s %s: %+v, %v", f, reason, resp, err)
			}
			state := newMemState()
			p, _ := adapterFor(t, f, reply(providertest.Reply{Content: "fine", FinishReason: reason}))
			res, err := newChain(state, chain.Step{Provider: p}).Run(context.Background(), &hello)
			if err != nil || res.Attempts[0].StopReason != "" {
				t.Errorf("%s %s: attempt %+v, %v; want an answer with no stop reason recorded", f, reason, res.Attempts, err)
			}
		}
	}
}
