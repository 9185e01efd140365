package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

const secret = "sk-test-DO-NOT-PRINT"

// env is the lookupEnv of these tests: only the key variables are set.
func env(name string) (string, bool) {
	switch name {
	case "OPENAI_API_KEY", "ANTHROPIC_API_KEY":
		return secret, true
	case "EMPTY_KEY":
		return "  ", true
	}
	return "", false
}

const validFile = `
providers:
  - name: primary
    type: openai
    model: gpt-4o
    api_key_env: OPENAI_API_KEY
  - name: backup
    type: anthropic
    model: claude-sonnet-4-5
    api_key_env: ANTHROPIC_API_KEY
    timeout: 20s
    max_retries: 0
    backoff_base: 250ms
    backoff_max: 2s
    max_retry_wait: 0
    failure_threshold: 0
    cooldown: 30s
    max_cooldown: 5m
    trip_window: 30m
    auth_cooldown: 2h
  - name: economy
    type: openai
    base_url: http://localhost:11434/v1/
    model: llama3
  - name: template
    type: rules
    rules:
      - match: ["weather", "天气"]
        reply: "Weather is unavailable right now."
    default_reply: "Please try again shortly."
chains:
  default: [primary, backup, economy, template]
  cheap: [economy]
`

func TestParseValid(t *testing.T) {
	f, err := Parse([]byte(validFile), env)
	if err != nil {
		t.Fatal(err)
	}
	want := []Provider{{
		Name: "primary", Type: TypeOpenAI, BaseURL: DefaultOpenAIBaseURL, Model: "gpt-4o",
		APIKeyEnv: "OPENAI_API_KEY", APIKey: secret,
		Timeout: 30 * time.Second, MaxRetries: 1, BackoffBase: 500 * time.Millisecond,
		BackoffMax: 10 * time.Second, MaxRetryWait: 10 * time.Second, FailureThreshold: 3,
		Cooldown: 10 * time.Minute, MaxCooldown: time.Hour, TripWindow: time.Hour, AuthCooldown: time.Hour,
	}, {
		// Explicit zeros are kept, not replaced by defaults.
		Name: "backup", Type: TypeAnthropic, BaseURL: DefaultAnthropicBaseURL, Model: "claude-sonnet-4-5",
		APIKeyEnv: "ANTHROPIC_API_KEY", APIKey: secret,
		Timeout: 20 * time.Second, MaxRetries: 0, BackoffBase: 250 * time.Millisecond,
		BackoffMax: 2 * time.Second, MaxRetryWait: 0, FailureThreshold: 0,
		Cooldown: 30 * time.Second, MaxCooldown: 5 * time.Minute, TripWindow: 30 * time.Minute, AuthCooldown: 2 * time.Hour,
	}, {
		Name: "economy", Type: TypeOpenAI, BaseURL: "http://localhost:11434/v1", Model: "llama3",
		Timeout: 30 * time.Second, MaxRetries: 1, BackoffBase: 500 * time.Millisecond,
		BackoffMax: 10 * time.Second, MaxRetryWait: 10 * time.Second, FailureThreshold: 3,
		Cooldown: 10 * time.Minute, MaxCooldown: time.Hour, TripWindow: time.Hour, AuthCooldown: time.Hour,
	}, {
		Name: "template", Type: TypeRules,
		Timeout: 30 * time.Second, MaxRetries: 1, BackoffBase: 500 * time.Millisecond,
		BackoffMax: 10 * time.Second, MaxRetryWait: 10 * time.Second, FailureThreshold: 3,
		Cooldown: 10 * time.Minute, MaxCooldown: time.Hour, TripWindow: time.Hour, AuthCooldown: time.Hour,
		Rules:        []Rule{{Match: []string{"weather", "天气"}, Reply: "Weather is unavailable right now."}},
		DefaultReply: "Please try again shortly.",
	}}
	for i := range want {
		if !reflect.DeepEqual(f.Providers[i], want[i]) {
			t.Errorf("provider %d:\n got %#v %+v\nwant %#v", i, f.Providers[i], f.Providers[i].Timeout, want[i])
		}
	}
	if got := f.ChainNames(); !reflect.DeepEqual(got, []string{"cheap", "default"}) {
		t.Errorf("ChainNames() = %v", got)
	}
	if got := f.Chains["default"]; !reflect.DeepEqual(got, []string{"primary", "backup", "economy", "template"}) {
		t.Errorf("default chain = %v", got)
	}
	if p, ok := f.Provider("economy"); !ok || p.Model != "llama3" {
		t.Errorf("Provider(economy) = %v, %v", p, ok)
	}
	if _, ok := f.Provider("nope"); ok {
		t.Error("Provider(nope) found")
	}
}

// provider wraps one provider body in a file whose only chain uses it.
func provider(body string) string {
	body = strings.ReplaceAll(strings.TrimSpace(body), "\n", "\n    ")
	return "providers:\n  - " + body + "\nchains:\n  default: [p]\n"
}

func TestParseErrors(t *testing.T) {
	const base = "name: p\ntype: openai\nmodel: m\n"
	tests := []struct {
		name string
		yaml string
		want []string
	}{
		{"empty file", "", []string{"providers: must list at least one provider", "chains: must define at least one chain"}},
		{"broken yaml", "providers: [", []string{"yaml:"}},
		{"not a mapping", "- a\n- b\n", []string{"cannot unmarshal", "chain file"}},
		{"unknown top key", provider(base) + "extra: 1\n", []string{`line 7: unknown key "extra"`, "known keys: providers, chains"}},
		{"unknown provider key", provider(base + "timout: 3s"), []string{`line 5: unknown key "timout"`, "timeout"}},
		{"unknown rule key", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - match: [a]\n    reply: b\n    weight: 1"), []string{`unknown key "weight"`}},
		{"two documents", provider(base) + "---\nproviders: []\n", []string{"only one YAML document"}},
		{"bare number duration", provider(base + "timeout: 30"), []string{`line 5: want a duration such as 500ms, 30s or 10m, got "30"`}},
		{"bad duration", provider(base + "cooldown: soon"), []string{`got "soon"`}},
		{"fraction count", provider(base + "max_retries: 1.5"), []string{`want a whole number, got "1.5"`}},
		{"huge count", provider(base + "failure_threshold: 99999999999999999999999"), []string{"whole number"}},
		{"list as string", provider(base + "api_key_env: [a, b]"), []string{"cannot unmarshal"}},
		{"no name", "providers:\n  - type: openai\n    model: m\nchains:\n  d: [x]\n", []string{"providers[0]: name: required"}},
		{"bad name", provider("name: a.b\ntype: openai\nmodel: m"), []string{`providers[0] "a.b": name: must match [A-Za-z0-9_-]+`}},
		{"duplicate name", "providers:\n  - {name: p, type: openai, model: m}\n  - {name: p, type: openai, model: m}\nchains:\n  d: [p]\n",
			[]string{`providers[1] "p": name: already used by providers[0]`}},
		{"no type", provider("name: p\nmodel: m"), []string{`providers[0] "p": type: required`}},
		{"bad type", provider("name: p\ntype: gemini\nmodel: m"), []string{`providers[0] "p": type: must be openai, anthropic or rules (got "gemini")`}},
		{"no model", provider("name: p\ntype: anthropic"), []string{`providers[0] "p": model: required for type anthropic`}},
		{"bad base_url", provider(base + "base_url: localhost:8080"), []string{`providers[0] "p": base_url: must be an http or https URL`}},
		{"rules on openai", provider(base + "default_reply: x"), []string{"default_reply: only allowed for type rules"}},
		{"zero timeout", provider(base + "timeout: 0s"), []string{`providers[0] "p": timeout: must be positive`}},
		{"negative timeout", provider(base + "timeout: -1s"), []string{"timeout: must be positive"}},
		{"zero backoff_base", provider(base + "backoff_base: 0"), []string{"backoff_base: must be positive"}},
		{"zero cooldown", provider(base + "cooldown: 0s"), []string{"cooldown: must be positive"}},
		{"zero auth_cooldown", provider(base + "auth_cooldown: 0s"), []string{"auth_cooldown: must be positive"}},
		{"negative retry wait", provider(base + "max_retry_wait: -1s"), []string{"max_retry_wait: must not be negative"}},
		{"negative trip window", provider(base + "trip_window: -1m"), []string{"trip_window: must not be negative"}},
		{"negative retries", provider(base + "max_retries: -1"), []string{"max_retries: must not be negative"}},
		{"negative threshold", provider(base + "failure_threshold: -2"), []string{"failure_threshold: must not be negative"}},
		{"backoff_max < base", provider(base + "backoff_base: 2s\nbackoff_max: 1s"), []string{"backoff_max: must be at least backoff_base (2s)"}},
		{"max_cooldown < cooldown", provider(base + "cooldown: 10m\nmax_cooldown: 5m"), []string{"max_cooldown: must be at least cooldown (10m0s)"}},
		{"fractional cooldown", provider(base + "cooldown: 1500ms"), []string{"cooldown: must be a whole number of seconds"}},
		{"fractional max_cooldown", provider(base + "max_cooldown: 3600.5s"), []string{"max_cooldown: must be a whole number of seconds"}},
		{"fractional auth_cooldown", provider(base + "auth_cooldown: 90.5s"), []string{"auth_cooldown: must be a whole number of seconds"}},
		{"key unset", provider(base + "api_key_env: MISSING_KEY"), []string{"api_key_env: environment variable MISSING_KEY is not set or empty"}},
		{"key blank", provider(base + "api_key_env: EMPTY_KEY"), []string{"api_key_env: environment variable EMPTY_KEY is not set or empty"}},
		{"key name", provider(base + "api_key_env: 'A-B'"), []string{`api_key_env: "A-B" is not a valid environment variable name`}},
		{"rules no default", provider("name: p\ntype: rules"), []string{"default_reply: required for type rules"}},
		{"rules with model", provider("name: p\ntype: rules\ndefault_reply: x\nmodel: m\nbase_url: http://x\napi_key_env: OPENAI_API_KEY"),
			[]string{"model: not allowed for type rules", "base_url: not allowed for type rules", "api_key_env: not allowed for type rules"}},
		{"rule without match", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - reply: r"), []string{"rules[0]: match: must list at least one phrase"}},
		{"rule empty match", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - match: [a, ' ']\n    reply: r"), []string{"rules[0]: match[1]: must not be empty"}},
		{"rule without reply", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - match: [a]"), []string{"rules[0]: reply: required"}},
		{"no chains", "providers:\n  - {name: p, type: openai, model: m}\n", []string{"chains: must define at least one chain"}},
		{"empty chain", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  default: []\n", []string{"chains.default: must list at least one provider"}},
		{"bad chain name", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  a.b: [p]\n", []string{`chains."a.b": chain name must match`}},
		{"unknown in chain", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  default: [p, econmy]\n", []string{`chains.default[1]: unknown provider "econmy"`}},
		{"twice in chain", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  default: [p, p]\n", []string{`chains.default[1]: provider "p" already at [0]`}},
		{"rules not last", "providers:\n  - {name: p, type: openai, model: m}\n  - {name: r, type: rules, default_reply: x}\nchains:\n  default: [r, p]\n",
			[]string{`chains.default[0]: rules provider "r" may only be last in a chain`}},
		{"all reported", provider("name: p\ntype: openai\ntimeout: 0s\nmax_retries: -1") + "  other: [q]\n",
			[]string{"model: required", "timeout: must be positive", "max_retries: must not be negative", `chains.other[0]: unknown provider "q"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.yaml), env)
			if err == nil {
				t.Fatalf("Parse() = %+v, want an error", f)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q\ndoes not contain %q", err, want)
				}
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error reveals the API key: %v", err)
			}
		})
	}
}

func TestParseAcceptsEdgeValues(t *testing.T) {
	for name, body := range map[string]string{
		"zero durations allowed": "max_retry_wait: 0\ntrip_window: 0s\nbackoff_max: 500ms",
		"null means default":     "timeout: ~",
		"hex count":              "max_retries: 0x2",
		"no api key":             "base_url: http://127.0.0.1:9/v1",
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := Parse([]byte(provider("name: p\ntype: openai\nmodel: m\n"+body)), env); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestProviderNeverPrintsKey(t *testing.T) {
	f, err := Parse([]byte(validFile), env)
	if err != nil {
		t.Fatal(err)
	}
	p := f.Providers[0]
	if p.APIKey != secret {
		t.Fatalf("APIKey not resolved")
	}
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", "provider", p, "ptr", &p)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("x", "provider", p)
	js, _ := json.Marshal(p)
	outputs := []string{
		fmt.Sprint(p), fmt.Sprintf("%v %+v %#v %s %q %d %x", p, p, p, p, p, p, p),
		fmt.Sprintf("%v %+v %#v", &p, f, *f), logs.String(), string(js),
	}
	for _, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("output reveals the API key: %s", out)
		}
	}
	if got := fmt.Sprint(p); got != "primary (openai gpt-4o at https://api.openai.com/v1)" {
		t.Errorf("String() = %q", got)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DETOUR_TEST_KEY", "k")
	good := filepath.Join(dir, "good.yaml")
	os.WriteFile(good, []byte(provider("name: p\ntype: openai\nmodel: m\napi_key_env: DETOUR_TEST_KEY")), 0o600)
	f, err := Load(good)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := f.Provider("p"); p.APIKey != "k" {
		t.Errorf("APIKey from the environment not resolved")
	}

	bad := filepath.Join(dir, "bad.yaml")
	os.WriteFile(bad, []byte("providers: []\n"), 0o600)
	if _, err := Load(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("Load(bad) = %v, want an error naming %s", err, bad)
	}
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist naming the path", err)
	}
}

func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		validFile,
		"",
		"providers: [",
		"{{{",
		provider("name: p\ntype: openai\nmodel: m\ntimout: 1s"),
		provider("name: p\ntype: openai\nmodel: m\nmax_retries: 99999999999999999999999999"),
		provider("name: p\ntype: openai\nmodel: m\nfailure_threshold: 9223372036854775807\ntimeout: 2562047h"),
		provider("name: p\ntype: openai\nmodel: m\ntimeout: 9999999999999999999h"),
		provider("name: p\ntype: openai\nmodel: m\nmax_retries: 1e300"),
		"a: &a [*a, *a]\n",
		"providers:\n  - &p {name: p, type: rules, default_reply: x}\nchains:\n  default: [p]\n",
		"---\n---\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(data, env)
		if err != nil {
			if !bytes.Contains(data, []byte(secret)) && strings.Contains(err.Error(), secret) {
				t.Fatalf("error reveals the API key: %v", err)
			}
			return
		}
		if err := file.Validate(); err != nil {
			t.Fatalf("accepted file fails Validate: %v", err)
		}
		again, err := Parse(data, env)
		if err != nil || !reflect.DeepEqual(file, again) {
			t.Fatalf("Parse is not deterministic: %v", err)
		}
		if len(file.Providers) == 0 || len(file.ChainNames()) == 0 {
			t.Fatalf("accepted a file without providers or chains")
		}
	})
}

func ExampleParse() {
	const yaml = `
providers:
  - name: primary
    type: openai
    model: gpt-4o
    api_key_env: OPENAI_API_KEY
  - name: template
    type: rules
    default_reply: "Please try again shortly."
chains:
  default: [primary, template]
`
	lookupEnv := func(name string) (string, bool) {
		if name == "OPENAI_API_KEY" {
			return "sk-example", true
		}
		return "", false
	}
	f, err := Parse([]byte(yaml), lookupEnv)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, chain := range f.ChainNames() {
		for _, name := range f.Chains[chain] {
			p, _ := f.Provider(name)
			fmt.Printf("%s: %v timeout=%s retries=%d\n", chain, p, p.Timeout, p.MaxRetries)
		}
	}

	_, err = Parse([]byte(strings.Replace(yaml, "[primary, template]", "[template, primary, econmy]", 1)), lookupEnv)
	fmt.Println(err)
	// Output:
	// default: primary (openai gpt-4o at https://api.openai.com/v1) timeout=30s retries=1
	// default: template (rules) timeout=30s retries=1
	// chains.default[0]: rules provider "template" may only be last in a chain
	// chains.default[2]: unknown provider "econmy"
}
