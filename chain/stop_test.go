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
				res, srv, state := backupAnswers(t, f, tc.script, 2)
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

// backupAnswers runs a chain of the flavour f provider under script,
// allowed retries, then an OpenAI backup, and wants the backup's answer;
// it returns the result, the provider's server and the state.
func backupAnswers(t *testing.T, f providertest.Flavor, script providertest.Script, retries int) (chain.Result, *providertest.Server, *memState) {
	t.Helper()
	state := newMemState()
	p, srv := adapterFor(t, f, script)
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})
	res, err := newChain(state, chain.Step{Provider: p, Policy: chain.Policy{MaxRetries: retries}}, backup).Run(context.Background(), &hello)
	wantAnswer(t, res, err, "backup", 1)
	return res, srv, state
}

// TestCompleteEndingsAnswer: the endings each API documents as complete,
// in any case, leave the answer standing, with no stop reason recorded.
func TestCompleteEndingsAnswer(t *testing.T) {
	complete := map[providertest.Flavor][]string{
		providertest.OpenAI:    {"stop", "STOP"},
		providertest.Anthropic: {"end_turn", "stop_sequence", "END_TURN"},
	}
	for f, reasons := range complete {
		for _, reason := range reasons {
			script := reply(providertest.Reply{Content: "fine", FinishReason: reason})
			resp, err := callFlavor(t, f, script)
			if err != nil || !resp.Complete || resp.Refusal != "" {
				t.Errorf("%s %s: %+v, %v; want a complete answer", f, reason, resp, err)
			}
			p, _ := adapterFor(t, f, script)
			res, err := newChain(newMemState(), chain.Step{Provider: p}).Run(context.Background(), &hello)
			if err != nil || res.Content != "fine" || res.Attempts[0].StopReason != "" {
				t.Errorf("%s %s: %+v, %v; want the answer with no stop reason recorded", f, reason, res, err)
			}
		}
	}
}

// TestEndingsThatAreNotCompleteAreNoAnswer: any other ending, an API's own
// that is not complete, the other API's word for a complete one, a
// gateway's unknown value, or none at all, makes an answer with text
// invalid_output: the stop reason is recorded, the next provider answers,
// and nothing is counted against the provider.
func TestEndingsThatAreNotCompleteAreNoAnswer(t *testing.T) {
	notComplete := map[providertest.Flavor][]string{
		providertest.OpenAI:    {"end_turn", "stop_sequence", "error", "tool_calls", "function_call", "eos_token", "abort", "something_new"},
		providertest.Anthropic: {"stop", "pause_turn", "tool_use", "error", "something_new"},
	}
	for f, reasons := range notComplete {
		for _, reason := range append(reasons, "") {
			name := reason
			r := providertest.Reply{Content: "An answer that may be whole", FinishReason: reason}
			switch {
			case reason == "":
				name, r.NullFinishReason = "null", true
			case f == providertest.OpenAI && (reason == "end_turn" || reason == "stop_sequence"):
				// The fake spells a normal stop in its flavour's word.
				r = providertest.Reply{RawBody: `{"choices":[{"message":{"content":"An answer that may be whole"},"finish_reason":"` + reason + `"}]}`}
			case f == providertest.Anthropic && reason == "stop":
				r = providertest.Reply{RawBody: `{"content":[{"type":"text","text":"An answer that may be whole"}],"stop_reason":"stop"}`}
			}
			t.Run(f.String()+"/"+name, func(t *testing.T) {
				t.Parallel()
				res, srv, state := backupAnswers(t, f, reply(r), 2)
				first := res.Attempts[0]
				wantError := "not a complete ending"
				if reason == "" {
					wantError = "no stop reason"
				}
				if first.Class != chain.ClassInvalidOutput || first.StopReason != reason || !strings.Contains(first.Error, wantError) {
					t.Errorf("first attempt %+v; want invalid_output, stop_reason %q, error with %q", first, reason, wantError)
				}
				wantRequests(t, "primary", srv, 1)
				if n := state.allFailures(); n != 0 {
					t.Errorf("%d failures recorded against the state, want none", n)
				}
			})
		}
	}
}

// TestAnErrorEndingAnAnswerIsItsClass: an answer that ends with an error
// object in place of a complete ending (OpenRouter's finish_reason "error"
// with the error on the choice; a gateway's at the top level) is no answer,
// whatever text came before it: the failure of the class the error's code
// names, retried and counted as such, with the stop reason recorded; with
// no text at all it is the same failure, not an empty answer.
func TestAnErrorEndingAnAnswerIsItsClass(t *testing.T) {
	const fragment = "The three primary colours of light are red, gre"
	for _, tc := range []struct {
		name    string
		flavors []providertest.Flavor
		script  providertest.Script
		class   chain.Class
		calls   int // with MaxRetries 1
	}{
		{"fragment 502", bothFlavors, providertest.DiedMidAnswer(fragment, 502), chain.ClassServer, 2},
		{"empty 502", bothFlavors, providertest.DiedMidAnswer("", 502), chain.ClassServer, 2},
		{"fragment 429", bothFlavors, providertest.DiedMidAnswer(fragment, 429), chain.ClassRateLimit, 2},
		{"fragment 408", []providertest.Flavor{providertest.OpenAI}, providertest.DiedMidAnswer(fragment, 408), chain.ClassTimeout, 2},
		{"fragment 400", []providertest.Flavor{providertest.OpenAI}, providertest.DiedMidAnswer(fragment, 400), chain.ClassRequest, 1},
		{"top-level error", []providertest.Flavor{providertest.OpenAI}, reply(providertest.Reply{RawBody: `{"choices":[{"message":{"content":"` + fragment +
			`"},"finish_reason":"error"}],"error":{"code":503,"message":"upstream connection reset"}}`}), chain.ClassServer, 2},
		{"no stop reason, error on the choice", []providertest.Flavor{providertest.OpenAI}, reply(providertest.Reply{RawBody: `{"choices":[{"message":{"content":"` + fragment +
			`"},"finish_reason":null,"error":{"code":502,"message":"Provider returned error"}}]}`}), chain.ClassServer, 2},
	} {
		for _, f := range tc.flavors {
			t.Run(f.String()+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				res, srv, state := backupAnswers(t, f, tc.script, 1)
				if strings.Contains(res.Content, fragment) {
					t.Errorf("content %q holds the fragment", res.Content)
				}
				first := res.Attempts[0]
				if first.Outcome != chain.OutcomeFailed || first.Class != tc.class || first.StatusCode != 200 {
					t.Errorf("first attempt %+v; want failed, class %s, status 200", first, tc.class)
				}
				if tc.name != "no stop reason, error on the choice" && first.StopReason != "error" {
					t.Errorf("stop reason %q recorded, want error", first.StopReason)
				}
				wantRequests(t, "primary", srv, tc.calls)
				counted := 0
				if tc.class.Counts() {
					counted = tc.calls
				}
				if n := len(state.failures("p")); n != counted {
					t.Errorf("%d failures recorded, want %d", n, counted)
				}
			})
		}
	}
}
