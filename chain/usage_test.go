package chain_test

import (
	"context"
	"math"
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
				srv := providertest.New(flavor, func(int, providertest.Request) providertest.Reply {
					return providertest.Reply{Status: 200, Content: "ok", Usage: &tt.in}
				})
				t.Cleanup(srv.Close)
				var p chain.Provider = chain.NewOpenAI("p", srv.URL, "m", "", nil)
				if flavor == providertest.Anthropic {
					p = chain.NewAnthropic("p", srv.URL, "m", "", nil)
				}
				resp, err := p.Call(context.Background(), &chain.Request{Messages: []chain.Message{{Role: "user", Content: "hi"}}})
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
