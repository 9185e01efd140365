package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/cmd/processor/internal/metrics"
)

// TestUsageCountsOnlyWhatWasPaidFor: an answer from a provider counts its
// tokens and cost; a failed result, a cache hit and a stale answer count
// nothing, and negative figures (which would make a counter panic) are
// left out.
func TestUsageCountsOnlyWhatWasPaidFor(t *testing.T) {
	m := metrics.New()
	cost := 0.5
	paid := chain.Result{Status: chain.StatusOK, Provider: "p", Model: "m", Usage: chain.Usage{PromptTokens: 10, CompletionTokens: 5}, Cost: &cost}
	hit, stale := paid, paid
	hit.Cache, stale.Cache = chain.CacheHit, chain.CacheStale
	negative := -1.0
	odd := chain.Result{Status: chain.StatusOK, Provider: "p", Model: "m", Usage: chain.Usage{PromptTokens: -3}, Cost: &negative}
	for _, r := range []chain.Result{paid, {Status: chain.StatusFailed, Provider: "p", Model: "m", Usage: paid.Usage, Cost: &cost}, hit, stale, odd} {
		m.Usage(r)
	}
	text := scrape(t, m)
	for _, series := range []string{
		`detour_tokens_total{kind="prompt",model="m",provider="p"} 10`,
		`detour_tokens_total{kind="completion",model="m",provider="p"} 5`,
		`detour_cost_total{model="m",provider="p"} 0.5`,
	} {
		if line(text, series) == "" {
			t.Errorf("no series %s in\n%s", series, text)
		}
	}
}

// TestUsageBoundsTheModelsOfAProvider: the model label comes from the
// provider's answer. One that names a new model on every answer would grow
// the series without bound: past 32 models of one provider, a model not
// seen yet is counted as "other", and the ones seen keep their names.
func TestUsageBoundsTheModelsOfAProvider(t *testing.T) {
	m := metrics.New()
	for i := range 100 {
		m.Usage(chain.Result{Status: chain.StatusOK, Provider: "p", Model: fmt.Sprintf("m%d", i), Usage: chain.Usage{PromptTokens: 1}})
	}
	m.Usage(chain.Result{Status: chain.StatusOK, Provider: "p", Model: "m0", Usage: chain.Usage{PromptTokens: 1}})
	m.Usage(chain.Result{Status: chain.StatusOK, Provider: "q", Model: "m99", Usage: chain.Usage{PromptTokens: 1}})
	text := scrape(t, m)
	if n := strings.Count(text, "detour_tokens_total{"); n != 34 {
		t.Errorf("%d token series, want 32 named models of p, other, and q's one", n)
	}
	for _, series := range []string{
		`detour_tokens_total{kind="prompt",model="m0",provider="p"} 2`,
		`detour_tokens_total{kind="prompt",model="other",provider="p"} 68`,
		`detour_tokens_total{kind="prompt",model="m99",provider="q"} 1`,
	} {
		if line(text, series) == "" {
			t.Errorf("no series %s", series)
		}
	}
}
