package chain_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/chain/providertest"
)

// staleHello is hello carrying a stale answer of backup's that may stand
// in until until.
func staleHello(created, until time.Time) *chain.Request {
	req := hello
	req.Stale = &chain.StaleAnswer{Content: "remembered", Provider: "backup", Model: "model-backup",
		Usage: chain.Usage{PromptTokens: 3, CompletionTokens: 4}, CreatedAt: created, Until: until}
	return &req
}

func TestStaleAnswerStandsInBeforeRulesProvider(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusServiceUnavailable), chain.Policy{})
	backup, _ := fakeProvider(t, "backup", providertest.Status(http.StatusServiceUnavailable), chain.Policy{})
	template := chain.Step{Provider: chain.NewRules("template", nil, "try again later")}
	c := newChain(newMemState(), primary, backup, template)
	c.Now = func() time.Time { return now }

	res, err := c.Run(context.Background(), staleHello(now.Add(-90*time.Second), now.Add(time.Second)))

	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Status != chain.StatusOK || res.Cache != chain.CacheStale || !res.Degraded || res.Content != "remembered" ||
		res.Provider != "backup" || res.Model != "model-backup" || res.Position != 1 || res.AgeS != 90 || res.Usage.CompletionTokens != 4 {
		t.Errorf("result %+v; want the stale answer of backup (position 1), degraded, age 90s", res)
	}
	wantTrail(t, res, "primary failed server 503", "backup failed server 503")
}

func TestStaleAnswerPastItsWindowLeavesItToRulesProvider(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusServiceUnavailable), chain.Policy{})
	template := chain.Step{Provider: chain.NewRules("template", nil, "try again later")}
	c := newChain(newMemState(), primary, template)
	c.Now = func() time.Time { return now }

	res, err := c.Run(context.Background(), staleHello(now.Add(-time.Hour), now))

	wantAnswer(t, res, err, "template", 1)
	if res.Cache != "" || res.Content != "try again later" {
		t.Errorf("cache %q, content %q; want the rules reply, no cache status", res.Cache, res.Content)
	}
}

func TestStaleAnswerStandsInWhenEveryProviderIsCooling(t *testing.T) {
	t.Parallel()
	now := time.Now()
	state := newMemState()
	state.open("primary", now.Add(time.Minute))
	primary, srv := fakeProvider(t, "primary", providertest.OK(), chain.Policy{})

	res, err := newChain(state, primary).Run(context.Background(), staleHello(now, now.Add(time.Hour)))

	if err != nil || res.Cache != chain.CacheStale || res.Content != "remembered" || res.Position != 1 {
		t.Fatalf("Run: %v, result %+v; want the stale answer at the end of a chain without rules (position 1)", err, res)
	}
	wantRequests(t, "primary", srv, 0)
}

func TestStaleAnswerNeverAnswersAPoisonRequest(t *testing.T) {
	t.Parallel()
	primary, _ := fakeProvider(t, "primary", providertest.Status(http.StatusBadRequest), chain.Policy{})
	template := chain.Step{Provider: chain.NewRules("template", nil, "try again later")}
	now := time.Now()

	res, err := newChain(newMemState(), primary, template).Run(context.Background(), staleHello(now, now.Add(time.Hour)))

	if err == nil || res.Status != chain.StatusFailed || res.Cache != "" {
		t.Fatalf("Run: %v, result %+v; want a poison failure, no stale answer", err, res)
	}

	// Nor one that may be poison, waiting for a cooling provider to judge
	// it, in a chain with or without a rules provider.
	state := newMemState()
	state.open("backup", now.Add(time.Minute))
	backup, _ := fakeProvider(t, "backup", providertest.OK(), chain.Policy{})
	for _, steps := range [][]chain.Step{{primary, backup, template}, {primary, backup}} {
		res, err := newChain(state, steps...).Run(context.Background(), staleHello(now, now.Add(time.Hour)))
		var ex *chain.ExhaustedError
		if !errors.As(err, &ex) || !ex.Undecided || res.Status != chain.StatusFailed || res.Cache != "" {
			t.Fatalf("%d steps: Run: %v, result %+v; want an undecided failure, no stale answer", len(steps), err, res)
		}
	}
}
