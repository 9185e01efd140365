package chains

import (
	"fmt"
	"log/slog"
	"net/http"

	"github.com/samber/lo"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/config"
	"github.com/detourhq/detour/internal/logs"
)

// Build turns the chain file into runnable chains, keyed by chain name, that
// share state (nil: no outage memory, as `processor check` runs them). client
// calls the HTTP providers (nil: chain.DefaultHTTPClient); a nil logger
// discards. The file has been validated by config.Load; a provider type it
// does not know is an error.
func Build(file *config.File, state chain.State, client *http.Client, logger *slog.Logger) (map[string]*chain.Chain, error) {
	logger = logs.OrDiscard(logger)
	providers := make(map[string]chain.Step, len(file.Providers))
	for _, p := range file.Providers {
		provider, err := newProvider(p, client)
		if err != nil {
			return nil, err
		}
		step := chain.Step{Provider: provider, Policy: policyOf(p)}
		if p.Price != nil {
			step.Price = &chain.Price{InputPerMTok: p.Price.InputPerMTok, OutputPerMTok: p.Price.OutputPerMTok}
		}
		providers[p.Name] = step
	}
	return lo.MapValues(file.Chains, func(members []string, name string) *chain.Chain {
		steps := lo.Map(members, func(m string, _ int) chain.Step { return providers[m] })
		return &chain.Chain{Name: name, Steps: steps, State: state, Logger: logger.With("chain", name)}
	}), nil
}

// newProvider builds the adapter for one provider of the chain file.
func newProvider(p config.Provider, client *http.Client) (chain.Provider, error) {
	switch p.Type {
	case config.TypeOpenAI:
		return chain.NewOpenAI(p.Name, p.BaseURL, p.Model, p.APIKey, client), nil
	case config.TypeAnthropic:
		return chain.NewAnthropic(p.Name, p.BaseURL, p.Model, p.APIKey, client), nil
	case config.TypeRules:
		rules := lo.Map(p.Rules, func(r config.Rule, _ int) chain.Rule { return chain.Rule{Match: r.Match, Reply: r.Reply} })
		return chain.NewRules(p.Name, rules, p.DefaultReply), nil
	default:
		return nil, fmt.Errorf("provider %q: type %q is not supported yet", p.Name, p.Type)
	}
}

// policyOf maps a provider's chain-file knobs to the chain's policy.
func policyOf(p config.Provider) chain.Policy {
	timeout := p.Timeout
	if p.Type == config.TypeRules {
		// A template answers at once, doing no I/O: a timer per call
		// would cost more than the call.
		timeout = 0
	}
	return chain.Policy{
		Timeout:      timeout,
		MaxRetries:   p.MaxRetries,
		BackoffBase:  p.BackoffBase,
		BackoffMax:   p.BackoffMax,
		MaxRetryWait: p.MaxRetryWait,
		Cooldown: chain.CooldownPolicy{
			FailureThreshold: p.FailureThreshold,
			Cooldown:         p.Cooldown,
			MaxCooldown:      p.MaxCooldown,
			TripWindow:       p.TripWindow,
			AuthCooldown:     p.AuthCooldown,
		},
	}
}
