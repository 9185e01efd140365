package config

import (
	"strings"
	"testing"
	"time"
)

const cacheProviders = "providers:\n  - {name: p, type: openai, model: m}\n  - {name: r, type: rules, default_reply: x}\n"

func TestParseChainMappingForm(t *testing.T) {
	f, err := Parse([]byte(cacheProviders+`chains:
  listed: [p, r]
  cached: {providers: [p, r], cache_ttl: 10m, stale_ttl: 1h}
  defaulted:
    providers: [p]
    cache_ttl: 30s
  plain: {providers: [r]}
  fresh_only: {providers: [p], cache_ttl: 5s, stale_ttl: 0}
`), env)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct {
		members []string
		cache   ChainCache
	}{
		"listed":     {[]string{"p", "r"}, ChainCache{}},
		"cached":     {[]string{"p", "r"}, ChainCache{TTL: 10 * time.Minute, StaleTTL: time.Hour}},
		"defaulted":  {[]string{"p"}, ChainCache{TTL: 30 * time.Second, StaleTTL: DefaultStaleTTL}},
		"plain":      {[]string{"r"}, ChainCache{}},
		"fresh_only": {[]string{"p"}, ChainCache{TTL: 5 * time.Second}},
	} {
		if got := f.Chains[name]; strings.Join(got, ",") != strings.Join(want.members, ",") {
			t.Errorf("chain %s = %v, want %v", name, got, want.members)
		}
		if got := f.Cache(name); got != want.cache || got.On() != (want.cache.TTL > 0) {
			t.Errorf("chain %s cache = %+v, want %+v", name, got, want.cache)
		}
	}
}

func TestParseChainCacheErrors(t *testing.T) {
	tests := []struct {
		name   string
		chains string
		want   string
	}{
		{"unknown key", "  c: {providers: [p], cache_tll: 1m}\n", `line 5: chains.c: unknown key "cache_tll"; did you mean "cache_ttl"?`},
		{"unrelated key", "  c:\n    providers: [p]\n    size: 5\n", "line 7: chains.c: unknown key \"size\"\nkeys of a chain: providers, cache_ttl, stale_ttl"},
		{"bad duration", "  c:\n    providers: [p]\n    cache_ttl: ten\n", `line 7: chains.c: cache_ttl: must be a duration such as 500ms, 30s or 10m (got "ten")`},
		{"negative", "  c: {providers: [p], cache_ttl: -1m}\n", "line 5: chains.c: cache_ttl: must not be negative"},
		{"over a year", "  c: {providers: [p], cache_ttl: 1h, stale_ttl: 2562047h}\n", "line 5: chains.c: stale_ttl: must be at most 8760h0m0s (got 2562047h0m0s)"},
		{"fraction", "  c:\n    providers: [p]\n    cache_ttl: 1m\n    stale_ttl: 1500ms\n", "line 8: chains.c: stale_ttl: must be a whole number of seconds (got 1.5s)"},
		{"stale without cache", "  c:\n    providers: [p]\n    stale_ttl: 1h\n", "line 7: chains.c: stale_ttl: needs a cache_ttl above 0 (the cache is off without one)"},
		{"no providers", "  c: {cache_ttl: 1m}\n", "line 5: chains.c: must list at least one provider"},
		{"providers not a list", "  c: {providers: p}\n", `line 5: chains.c: providers: must be a list of provider names, such as [primary, backup] (got "p")`},
		{"unknown provider", "  c:\n    providers: [p, q]\n    cache_ttl: 1m\n", `line 6: chains.c[1]: unknown provider "q"`},
		{"neither list nor mapping", "  c: p\n", `line 5: chains.c: must be a list of provider names, such as [primary, backup], or a mapping such as {providers: [primary, backup], cache_ttl: 10m} (got "p")`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(cacheProviders+"chains:\n"+tt.chains), env)
			if err == nil || err.Error() != tt.want {
				t.Errorf("error:\n%v\nwant:\n%s", err, tt.want)
			}
		})
	}
}
