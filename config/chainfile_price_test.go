package config

import (
	"testing"
)

// TestParsePrice reads a provider's price.
func TestParsePrice(t *testing.T) {
	f, err := Parse([]byte(provider("name: p\ntype: openai\nmodel: m\nprice: {input_per_mtok: 2.5, output_per_mtok: 10}")), env)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := f.Provider("p")
	if p.Price == nil || *p.Price != (Price{InputPerMTok: 2.5, OutputPerMTok: 10}) {
		t.Fatalf("Price = %+v, want 2.5 in, 10 out", p.Price)
	}
	f, err = Parse([]byte(provider("name: p\ntype: openai\nmodel: m\nprice:\n  input_per_mtok: 0\n  output_per_mtok: 3")), env)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := f.Provider("p"); p.Price == nil || p.Price.OutputPerMTok != 3 {
		t.Errorf("integer price: %+v", p.Price)
	}
	f, _ = Parse([]byte(provider("name: p\ntype: openai\nmodel: m")), env)
	if p, _ := f.Provider("p"); p.Price != nil {
		t.Errorf("no price key: Price = %+v, want nil", p.Price)
	}
}

// TestParsePriceErrors names the line of every problem with a price.
func TestParsePriceErrors(t *testing.T) {
	const base = "name: p\ntype: openai\nmodel: m\n"
	tests := []struct {
		name, yaml, want string
	}{
		{"not a mapping", provider(base + "price: 3"), "line 5: providers[0] \"p\": price: must be a mapping such as {input_per_mtok: 2.5, output_per_mtok: 10} (got \"3\")"},
		{"negative", provider(base + "price:\n  input_per_mtok: -1\n  output_per_mtok: 1"), "line 6: providers[0] \"p\": price: input_per_mtok: must not be negative (got -1)"},
		{"huge", provider(base + "price:\n  input_per_mtok: 1\n  output_per_mtok: 1e308"), "line 7: providers[0] \"p\": price: output_per_mtok: must be at most 1e+06 (got 1e+308)"},
		{"text", provider(base + "price:\n  input_per_mtok: cheap\n  output_per_mtok: 1"), "line 6: providers[0] \"p\": price: input_per_mtok: must be a number such as 2.5 (got \"cheap\")"},
		{"infinite", provider(base + "price:\n  input_per_mtok: 1\n  output_per_mtok: .inf"), "line 7: providers[0] \"p\": price: output_per_mtok: must be a number such as 2.5 (got +Inf)"},
		{"key left out", provider(base + "price:\n  input_per_mtok: 1"), "line 6: providers[0] \"p\": price: output_per_mtok: required (0 for free)"},
		{"typo", provider(base + "price:\n  input_per_mtok: 1\n  output_per_mtk: 2"), "line 7: providers[0] \"p\": price: unknown key \"output_per_mtk\"; did you mean \"output_per_mtok\"?"},
		{"rules", provider("name: p\ntype: rules\ndefault_reply: x\nprice: {input_per_mtok: 1, output_per_mtok: 1}"), "line 5: providers[0] \"p\": price: not allowed for type rules, which calls no paid API"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), env)
			if err == nil {
				t.Fatal("Parse() succeeded, want an error")
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
		})
	}
}
