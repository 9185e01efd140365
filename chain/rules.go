package chain

import (
	"context"
	"strings"
	"unicode"
)

// RulesModel is the model name a rules template answers with.
const RulesModel = "rules"

// Rule answers a request whose last user message contains any of Match
// (case-insensitive).
type Rule struct {
	Match []string
	Reply string
}

// Rules is the last-resort template provider: it never fails and never calls
// out, so a chain that ends with it always has an answer for an outage.
type Rules struct {
	name         string
	rules        []Rule
	defaultReply string
}

// NewRules returns a rules provider; defaultReply answers what no rule matches.
func NewRules(name string, rules []Rule, defaultReply string) *Rules {
	return &Rules{name: name, rules: rules, defaultReply: defaultReply}
}

// Name returns the provider's name.
func (r *Rules) Name() string { return r.name }

// Model returns RulesModel.
func (r *Rules) Model() string { return RulesModel }

// Call picks the first rule matching the last user message.
func (r *Rules) Call(_ context.Context, req *Request) (Response, error) {
	text := ""
	for i := len(req.Messages) - 1; i >= 0; i-- {
		if req.Messages[i].Role == "user" {
			text = strings.ToLower(req.Messages[i].Content)
			break
		}
	}
	for _, rule := range r.rules {
		for _, m := range rule.Match {
			if m != "" && strings.Contains(text, strings.ToLower(m)) {
				return Response{Content: rule.Reply, Model: RulesModel, Complete: true}, nil
			}
		}
	}
	return Response{Content: r.defaultReply, Model: RulesModel, Complete: true}, nil
}

func isBlank(s string) bool { return strings.TrimFunc(s, unicode.IsSpace) == "" }
