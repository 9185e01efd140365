package chain

import "time"

// Policy is how the chain treats one provider (the chain file's per-provider
// knobs). The zero value makes one attempt with no timeout and no cooldowns.
type Policy struct {
	// Timeout bounds one attempt; zero means no bound.
	Timeout time.Duration
	// MaxRetries is the number of extra attempts within one pass.
	MaxRetries int
	// BackoffBase and BackoffMax bound the jittered wait between retries.
	BackoffBase, BackoffMax time.Duration
	// MaxRetryWait is the longest Retry-After worth sleeping for; a longer one
	// opens a cooldown of that length instead.
	MaxRetryWait time.Duration
	Cooldown     CooldownPolicy
}

// Step is one provider of a chain with its policy.
type Step struct {
	Provider Provider
	Policy   Policy
	// Price is what the provider charges; nil leaves its answers without a
	// cost.
	Price *Price
}

// Price is what a provider charges per million tokens, in the operator's
// currency.
type Price struct {
	InputPerMTok  float64 // per million prompt tokens
	OutputPerMTok float64 // per million completion tokens
}

// Cost is what u costs at this price, in the price's currency.
func (p Price) Cost(u Usage) float64 {
	return (float64(u.PromptTokens)*p.InputPerMTok + float64(u.CompletionTokens)*p.OutputPerMTok) / 1e6
}
