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
		want string
	}{
		{"empty file", "", "providers: must list at least one provider\nchains: must define at least one chain"},
		{"broken yaml", "providers: [", "line 1: not valid YAML: did not find expected node content"},
		{"not a mapping", "- a\n- b\n", "line 1: the chain file must be a mapping with the keys providers and chains (got a list)"},
		{"unknown top key", provider(base) + "extra: 1\n", "line 7: unknown key \"extra\"\nkeys of the file: providers, chains"},
		{"unknown provider key", provider(base + "timout: 3s"), "line 5: providers[0] \"p\": unknown key \"timout\"; did you mean \"timeout\"?"},
		{"unknown rule key", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - match: [a]\n    reply: b\n    weight: 1"), "line 8: providers[0] \"p\": rules[0]: unknown key \"weight\"\nkeys of a rule: match, reply"},
		{"two documents", provider(base) + "---\nproviders: []\n", "line 7: only one YAML document is allowed (remove the second ---)"},
		{"key given twice", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  d: [p]\n  d: [q]\n", "line 5: chains: key \"d\" is given twice (first on line 4)"},
		{"wrong kind in a flow mapping", "providers:\n  - {name: p, type: openai, model: m, rules: 3, timeout: -1s}\nchains:\n  d: [p]\n",
			"line 2: providers[0] \"p\": rules: must be a list of rules, each - match: [...] and reply: (got \"3\")\nline 2: providers[0] \"p\": timeout: must be positive"},
		{"key that is a list", "providers:\n  - {name: p, type: openai, model: m, [x]: 1}\nchains:\n  d: [p]\n", "line 2: providers[0] \"p\": a key must be a plain word (got a list)"},
		{"empty key", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  d: [p]\n  ~: [p]\n", "line 5: chains: a key must be a plain word (got nothing)"},
		{"empty provider key", provider(base + "~: 3s"), "line 5: providers[0] \"p\": a key must be a plain word (got nothing)"},
		{"empty list item", "providers:\n  - ~\n  - {name: p, type: openai, model: m}\nchains:\n  d: [p]\n", "line 2: providers[0]: must not be empty"},
		{"bare number duration", provider(base + "timeout: 30"), "line 5: providers[0] \"p\": timeout: must be a duration such as 500ms, 30s or 10m (got \"30\")"},
		{"bad duration", provider(base + "cooldown: soon"), "line 5: providers[0] \"p\": cooldown: must be a duration such as 500ms, 30s or 10m (got \"soon\")"},
		{"fraction count", provider(base + "max_retries: 1.5"), "line 5: providers[0] \"p\": max_retries: must be a whole number (got \"1.5\")"},
		{"count with digit separators", provider(base + "max_retries: 1_0"), "line 5: providers[0] \"p\": max_retries: must be a whole number (got \"1_0\")"},
		{"huge count", provider(base + "failure_threshold: 99999999999999999999999"), "line 5: providers[0] \"p\": failure_threshold: is too large (got \"99999999999999999999999\")"},
		{"list as string", provider(base + "api_key_env: [a, b]"), "line 5: providers[0] \"p\": api_key_env: must be a single value (got a list)"},
		{"no name", "providers:\n  - type: openai\n    model: m\nchains:\n  d: [x]\n", "line 2: providers[0]: name: required\nline 5: chains.d[0]: unknown provider \"x\""},
		{"bad name", provider("name: a.b\ntype: openai\nmodel: m"), "line 2: providers[0] \"a.b\": name: must match [A-Za-z0-9_-]+\nline 6: chains.default[0]: unknown provider \"p\""},
		{"name too long", provider("name: " + strings.Repeat("p", 65) + "\ntype: openai\nmodel: m"),
			"line 2: providers[0] \"" + strings.Repeat("p", 65) + "\": name: must be at most 64 characters (got 65)\nline 6: chains.default[0]: unknown provider \"p\""},
		{"chain name too long", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  " + strings.Repeat("c", 249) + ": [p]\n",
			"line 4: chains." + strings.Repeat("c", 249) + ": chain name must be at most 64 characters (got 249)"},
		{"duplicate name", "providers:\n  - {name: p, type: openai, model: m}\n  - {name: p, type: openai, model: m}\nchains:\n  d: [p]\n",
			"line 3: providers[1] \"p\": name: already used by providers[0]"},
		{"no type", provider("name: p\nmodel: m"), "line 2: providers[0] \"p\": type: required (openai, anthropic or rules)"},
		{"bad type", provider("name: p\ntype: gemini\nmodel: m"), "line 3: providers[0] \"p\": type: must be openai, anthropic or rules (got \"gemini\")"},
		{"no model", provider("name: p\ntype: anthropic"), "line 2: providers[0] \"p\": model: required for type anthropic"},
		{"bad base_url", provider(base + "base_url: localhost:8080"), "line 5: providers[0] \"p\": base_url: must be an http or https URL (got \"localhost:8080\")"},
		{"base_url with a fragment", provider(base + "base_url: 'http://h/v1#x'"), "line 5: providers[0] \"p\": base_url: must have no #fragment, which no request sends (got \"http://h/v1\" and a fragment)"},
		{"rules on openai", provider(base + "default_reply: x"), "line 5: providers[0] \"p\": default_reply: only allowed for type rules"},
		{"zero timeout", provider(base + "timeout: 0s"), "line 5: providers[0] \"p\": timeout: must be positive"},
		{"negative timeout", provider(base + "timeout: -1s"), "line 5: providers[0] \"p\": timeout: must be positive"},
		{"zero backoff_base", provider(base + "backoff_base: 0"), "line 5: providers[0] \"p\": backoff_base: must be positive"},
		{"zero cooldown", provider(base + "cooldown: 0s"), "line 5: providers[0] \"p\": cooldown: must be positive"},
		{"zero auth_cooldown", provider(base + "auth_cooldown: 0s"), "line 5: providers[0] \"p\": auth_cooldown: must be positive"},
		{"negative retry wait", provider(base + "max_retry_wait: -1s"), "line 5: providers[0] \"p\": max_retry_wait: must not be negative"},
		{"negative trip window", provider(base + "trip_window: -1m"), "line 5: providers[0] \"p\": trip_window: must not be negative"},
		{"negative retries", provider(base + "max_retries: -1"), "line 5: providers[0] \"p\": max_retries: must not be negative"},
		{"negative threshold", provider(base + "failure_threshold: -2"), "line 5: providers[0] \"p\": failure_threshold: must not be negative"},
		{"backoff_max < base", provider(base + "backoff_base: 2s\nbackoff_max: 1s"), "line 6: providers[0] \"p\": backoff_max: must be at least backoff_base (2s)"},
		{"max_cooldown < cooldown", provider(base + "cooldown: 10m\nmax_cooldown: 5m"), "line 6: providers[0] \"p\": max_cooldown: must be at least cooldown (10m0s)"},
		{"fractional cooldown", provider(base + "cooldown: 1500ms"), "line 5: providers[0] \"p\": cooldown: must be a whole number of seconds (got 1.5s)"},
		{"fractional max_cooldown", provider(base + "max_cooldown: 3600.5s"), "line 5: providers[0] \"p\": max_cooldown: must be a whole number of seconds (got 1h0m0.5s)"},
		{"fractional auth_cooldown", provider(base + "auth_cooldown: 90.5s"), "line 5: providers[0] \"p\": auth_cooldown: must be a whole number of seconds (got 1m30.5s)"},
		{"key unset", provider(base + "api_key_env: MISSING_KEY"), "line 5: providers[0] \"p\": api_key_env: environment variable MISSING_KEY is not set or empty"},
		{"key blank", provider(base + "api_key_env: EMPTY_KEY"), "line 5: providers[0] \"p\": api_key_env: environment variable EMPTY_KEY is not set or empty"},
		{"key name", provider(base + "api_key_env: 'A-B'"), "line 5: providers[0] \"p\": api_key_env: \"A-B\" is not a valid environment variable name"},
		{"rules no default", provider("name: p\ntype: rules"), "line 2: providers[0] \"p\": default_reply: required for type rules"},
		{"rules with model", provider("name: p\ntype: rules\ndefault_reply: x\nmodel: m\nbase_url: http://x\napi_key_env: OPENAI_API_KEY"),
			"line 5: providers[0] \"p\": model: not allowed for type rules\nline 6: providers[0] \"p\": base_url: not allowed for type rules\nline 7: providers[0] \"p\": api_key_env: not allowed for type rules"},
		{"rule without match", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - reply: r"), "line 6: providers[0] \"p\": rules[0]: match: must list at least one phrase"},
		{"rule empty match", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - match: [a, ' ']\n    reply: r"), "line 6: providers[0] \"p\": rules[0]: match[1]: must not be empty"},
		{"rule without reply", provider("name: p\ntype: rules\ndefault_reply: x\nrules:\n  - match: [a]"), "line 6: providers[0] \"p\": rules[0]: reply: required"},
		{"not UTF-8", "providers:\n  - name: t\n    type: rules\n    default_reply: \"\xff\xfe\"\nchains:\n  default: [t]\n",
			"line 4: not valid YAML: the file is not UTF-8 text (byte 0xff in column 21)"},
		{"control character", "providers:\n  - name: t\n    type: rules\n    default_reply: \"x\x01y\"\nchains:\n  default: [t]\n",
			"line 4: not valid YAML: control character U+0001 in column 22 (only tabs and line breaks are allowed)"},
		{"noncharacter after CR line breaks", "providers:\r  - {name: t, type: rules, default_reply: \"x\xef\xbf\xbf\"}\rchains:\r  default: [t]\r",
			"line 2: not valid YAML: control character U+FFFF in column 45 (only tabs and line breaks are allowed)"},
		{"NUL in a comment", "# a\x00b\nproviders:\n  - {name: t, type: rules, default_reply: x}\nchains:\n  default: [t]\n",
			"line 1: not valid YAML: control character U+0000 in column 4 (only tabs and line breaks are allowed)"},
		{"no chains", "providers:\n  - {name: p, type: openai, model: m}\n", "chains: must define at least one chain"},
		{"empty chain", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  default: []\n", "line 4: chains.default: must list at least one provider"},
		{"bad chain name", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  a.b: [p]\n", "line 4: chains.\"a.b\": chain name must match [A-Za-z0-9_-]+"},
		{"unknown in chain", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  default: [p, econmy]\n", "line 4: chains.default[1]: unknown provider \"econmy\""},
		{"twice in chain", "providers:\n  - {name: p, type: openai, model: m}\nchains:\n  default: [p, p]\n", "line 4: chains.default[1]: provider \"p\" already at [0]"},
		{"rules not last", "providers:\n  - {name: p, type: openai, model: m}\n  - {name: r, type: rules, default_reply: x}\nchains:\n  default: [r, p]\n",
			"line 5: chains.default[0]: rules provider \"r\" may only be last in a chain"},
		{"all reported", provider("name: p\ntype: openai\ntimeout: 0s\nmax_retries: -1") + "  other: [q]\n",
			"line 2: providers[0] \"p\": model: required for type openai\nline 4: providers[0] \"p\": timeout: must be positive\nline 5: providers[0] \"p\": max_retries: must not be negative\nline 8: chains.other[0]: unknown provider \"q\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Parse([]byte(tt.yaml), env)
			if err == nil {
				t.Fatalf("Parse() = %+v, want an error", f)
			}
			if got := err.Error(); got != tt.want {
				t.Errorf("error:\n%s\nwant:\n%s", got, tt.want)
			}
			var fe *FileError
			if !errors.Is(err, ErrInvalid) || !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FileError matching ErrInvalid", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error reveals the API key: %v", err)
			}
		})
	}
}

// TestParseAcceptsNamesOf64Characters: names become KV key tokens and
// consumer names, bounded at 64 characters; 64 is within.
func TestParseAcceptsNamesOf64Characters(t *testing.T) {
	name, chainName := strings.Repeat("p", 64), strings.Repeat("c", 64)
	f, err := Parse([]byte("providers:\n  - {name: "+name+", type: openai, model: m}\nchains:\n  "+chainName+": ["+name+"]\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.ChainNames(); len(got) != 1 || got[0] != chainName {
		t.Errorf("chains %q, want %q", got, chainName)
	}
}

func TestParseAcceptsEdgeValues(t *testing.T) {
	for name, body := range map[string]string{
		"zero durations allowed":  "max_retry_wait: 0\ntrip_window: 0s\nbackoff_max: 500ms",
		"null means default":      "timeout: ~",
		"hex count":               "max_retries: 0x2",
		"leading zero is decimal": "failure_threshold: 010",
		"no api key":              "base_url: http://127.0.0.1:9/v1",
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
	// The second problem has no line: the file leaves chains out.
	if _, err := Load(bad); !errors.Is(err, ErrInvalid) || err.Error() != "chain file "+bad+" has 2 problems:\n  line 1: providers: must list at least one provider\n  chains: must define at least one chain" {
		t.Errorf("Load(bad) = %v", err)
	}
	missing := filepath.Join(dir, "missing.yaml")
	if _, err := Load(missing); !errors.Is(err, fs.ErrNotExist) || !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) = %v, want fs.ErrNotExist and ErrInvalid naming the path", err)
	}
}

// TestParseMergeKeys: a provider may take keys from another with a YAML
// merge key; the keys it writes out win.
func TestParseMergeKeys(t *testing.T) {
	f, err := Parse([]byte(`
providers:
  - &base {name: p, type: openai, model: m, timeout: 5s, max_retries: 3}
  - <<: *base
    name: q
    timeout: 7s
chains:
  default: [p, q]
`), env)
	if err != nil {
		t.Fatal(err)
	}
	if q := f.Providers[1]; q.Name != "q" || q.Model != "m" || q.Timeout != 7*time.Second || q.MaxRetries != 3 {
		t.Errorf("merged provider = %#v timeout=%s retries=%d", q, q.Timeout, q.MaxRetries)
	}
}

// TestParseAliasBomb: aliases that expand a small file into billions of
// values are refused quickly instead of being walked.
func TestParseAliasBomb(t *testing.T) {
	var b strings.Builder
	b.WriteString("x: &m [")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("a")
	}
	b.WriteString("]\nproviders:\n  - &p\n    name: p\n    type: rules\n    default_reply: x\n    rules: &r\n")
	for range 1000 {
		b.WriteString("      - {match: *m, reply: y}\n")
	}
	b.WriteString("  - *p\n  - {name: q, type: rules, default_reply: x, rules: [")
	for i := range 1000 {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("*r")
	}
	b.WriteString("]}\nchains:\n  default: [p]\n")
	start := time.Now()
	_, err := Parse([]byte(b.String()), env)
	if err == nil || !strings.Contains(err.Error(), "too many aliases") {
		t.Fatalf("Parse() = %.300v, want too many aliases", err)
	}
	// What could not be read for the budget is not reported missing too.
	for _, followOn := range []string{"required", "must define", "must list"} {
		if strings.Contains(err.Error(), followOn) {
			t.Errorf("Parse() reports what it left unread (%q): %.300v", followOn, err)
		}
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("Parse took %s", d)
	}
}

// TestParseLargeFileWithoutAliases: the alias budget bounds what aliases
// add to a file, not the file: a rules provider with 100,000 phrases and
// no alias is read whole.
func TestParseLargeFileWithoutAliases(t *testing.T) {
	var b strings.Builder
	b.WriteString("providers:\n  - name: t\n    type: rules\n    default_reply: x\n    rules:\n      - reply: y\n        match:\n")
	for i := range 100_000 {
		fmt.Fprintf(&b, "          - phrase%d\n", i)
	}
	b.WriteString("chains:\n  default: [t]\n")
	f, err := Parse([]byte(b.String()), env)
	if err != nil {
		t.Fatalf("Parse() = %.300v", err)
	}
	if p, _ := f.Provider("t"); len(p.Rules) != 1 || len(p.Rules[0].Match) != 100_000 {
		t.Errorf("rules %d, want one with 100000 phrases", len(p.Rules))
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
		"providers:\n  - {name: p, type: openai, model: m}\nchains:\n  c: {providers: [p], cache_ttl: 10m, stale_ttl: 1h}\n",
		"providers:\n  - {name: p, type: openai, model: m}\nchains:\n  c: {providers: p, cache_tll: -1.5s, stale_ttl: 1h}\n",
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
	// line 11: chains.default[0]: rules provider "template" may only be last in a chain
	// line 11: chains.default[2]: unknown provider "econmy"
}

// TestParseReadsLeadingZerosInDecimal: yaml.v3 reads 010 as octal, as
// YAML 1.1 did; YAML 1.2, and the settings, read it as ten.
func TestParseReadsLeadingZerosInDecimal(t *testing.T) {
	f, err := Parse([]byte("providers:\n  - {name: p, type: openai, model: m, failure_threshold: 010, max_retries: 08}\nchains:\n  default: [p]\n"), env)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := f.Provider("p")
	if p.FailureThreshold != 10 || p.MaxRetries != 8 {
		t.Errorf("failure_threshold %d, max_retries %d; want 10 and 8", p.FailureThreshold, p.MaxRetries)
	}
}
