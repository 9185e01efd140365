package chain_test

import (
	"context"
	"testing"

	"github.com/detourhq/detour/chain"
)

func TestRulesAnswers(t *testing.T) {
	rules := chain.NewRules("template", []chain.Rule{
		{Match: []string{"weather", "天气"}, Reply: "weather reply"},
		{Match: []string{"Refund"}, Reply: "refund reply"},
		{Match: []string{"rain"}, Reply: "rain reply"},
	}, "default reply")

	user := func(text string) chain.Message { return chain.Message{Role: "user", Content: text} }
	tests := []struct {
		name     string
		messages []chain.Message
		want     string
	}{
		{"match ignores case", []chain.Message{user("What's the WEATHER like?")}, "weather reply"},
		{"rule match ignores case", []chain.Message{user("I want a refund")}, "refund reply"},
		{"non-ASCII match", []chain.Message{user("今天天气怎么样？")}, "weather reply"},
		{"first matching rule wins", []chain.Message{user("rain and weather")}, "weather reply"},
		{"no match gives the default", []chain.Message{user("tell me a joke")}, "default reply"},
		{"no messages gives the default", nil, "default reply"},
		{
			"only the last user message counts",
			[]chain.Message{user("weather?"), {Role: "assistant", Content: "sunny"}, user("will it rain")},
			"rain reply",
		},
		{
			"assistant and system text is ignored",
			[]chain.Message{{Role: "system", Content: "you know the weather"}, user("hi"), {Role: "assistant", Content: "refund"}},
			"default reply",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := rules.Call(context.Background(), &chain.Request{Messages: tt.messages})
			if err != nil {
				t.Fatalf("Call: %v", err)
			}
			if resp.Content != tt.want || resp.Model != chain.RulesModel {
				t.Errorf("Call = %q (model %q), want %q (model %q)", resp.Content, resp.Model, tt.want, chain.RulesModel)
			}
		})
	}
}

// TestRulesEmptyMatchNeverMatches: an empty pattern would match every
// message and shadow the rules after it.
func TestRulesEmptyMatchNeverMatches(t *testing.T) {
	rules := chain.NewRules("template", []chain.Rule{{Match: []string{""}, Reply: "empty"}}, "default reply")
	resp, _ := rules.Call(context.Background(), &chain.Request{Messages: []chain.Message{{Role: "user", Content: "anything"}}})
	if resp.Content != "default reply" {
		t.Errorf("Call = %q, want the default reply", resp.Content)
	}
}

func TestRulesIdentity(t *testing.T) {
	rules := chain.NewRules("template", nil, "")
	if rules.Name() != "template" || rules.Model() != chain.RulesModel {
		t.Errorf("Name %q, Model %q; want template, %q", rules.Name(), rules.Model(), chain.RulesModel)
	}
}
