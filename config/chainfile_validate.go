package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// Names become NATS subject tokens, consumer names and KV key tokens, so they
// are held to the characters all three accept.
var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func validEnvName(s string) bool { return envNameRE.MatchString(s) }

// Validate checks a File as Parse does and returns every problem joined, each
// prefixed by where it is, for example
// `providers[1] "backup": timeout: must be positive` or
// `chains.default[2]: unknown provider "econmy"`. It is exported for files
// built in code (the demo) and never reveals an API key.
func (f *File) Validate() error {
	var errs []error
	if len(f.Providers) == 0 {
		errs = append(errs, errors.New("providers: must list at least one provider"))
	}
	seen := make(map[string]int, len(f.Providers))
	for i, p := range f.Providers {
		where := fmt.Sprintf("providers[%d]", i)
		if p.Name != "" {
			where += fmt.Sprintf(" %q", p.Name)
		}
		for _, err := range p.problems() {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
		if first, dup := seen[p.Name]; dup && p.Name != "" {
			errs = append(errs, fmt.Errorf("%s: name: already used by providers[%d]", where, first))
		} else {
			seen[p.Name] = i
		}
	}

	if len(f.Chains) == 0 {
		errs = append(errs, errors.New("chains: must define at least one chain"))
	}
	for _, name := range f.ChainNames() {
		errs = append(errs, f.chainProblems(name)...)
	}
	return errors.Join(errs...)
}

func (f *File) chainProblems(name string) []error {
	var errs []error
	where := "chains." + name
	if !nameRE.MatchString(name) {
		where = fmt.Sprintf("chains.%q", name)
		errs = append(errs, fmt.Errorf("%s: chain name must match [A-Za-z0-9_-]+", where))
	}
	chain := f.Chains[name]
	if len(chain) == 0 {
		return append(errs, fmt.Errorf("%s: must list at least one provider", where))
	}
	at := make(map[string]int, len(chain))
	for i, pname := range chain {
		if first, dup := at[pname]; dup {
			errs = append(errs, fmt.Errorf("%s[%d]: provider %q already at [%d]", where, i, pname, first))
			continue
		}
		at[pname] = i
		p, ok := f.Provider(pname)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s[%d]: unknown provider %q", where, i, pname))
		case p.Type == TypeRules && i != len(chain)-1:
			// A rules provider always answers, so anything after it could
			// never be reached.
			errs = append(errs, fmt.Errorf("%s[%d]: rules provider %q may only be last in a chain", where, i, pname))
		}
	}
	return errs
}

// problems lists what is wrong with one provider, each error starting with
// the key at fault.
func (p Provider) problems() []error {
	var errs []error
	bad := func(key, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: %s", key, fmt.Sprintf(format, args...)))
	}

	switch {
	case p.Name == "":
		bad("name", "required")
	case !nameRE.MatchString(p.Name):
		bad("name", "must match [A-Za-z0-9_-]+")
	}

	switch p.Type {
	case "":
		bad("type", "required (openai, anthropic or rules)")
	case TypeOpenAI, TypeAnthropic:
		if p.Model == "" {
			bad("model", "required for type %s", p.Type)
		}
		if err := checkBaseURL(p.BaseURL); err != nil {
			bad("base_url", "%v", err)
		}
		if len(p.Rules) > 0 {
			bad("rules", "only allowed for type rules")
		}
		if p.DefaultReply != "" {
			bad("default_reply", "only allowed for type rules")
		}
	case TypeRules:
		if p.DefaultReply == "" {
			bad("default_reply", "required for type rules")
		}
		for _, kv := range [][2]string{{"base_url", p.BaseURL}, {"model", p.Model}, {"api_key_env", p.APIKeyEnv}} {
			if kv[1] != "" {
				bad(kv[0], "not allowed for type rules")
			}
		}
		for i, r := range p.Rules {
			errs = append(errs, r.problems(i)...)
		}
	default:
		bad("type", "must be openai, anthropic or rules (got %q)", p.Type)
	}

	// Only the variable's name is ever printed, never its value.
	if p.APIKeyEnv != "" && p.Type != TypeRules {
		switch {
		case !validEnvName(p.APIKeyEnv):
			bad("api_key_env", "%q is not a valid environment variable name", p.APIKeyEnv)
		case p.APIKey == "":
			bad("api_key_env", "environment variable %s is not set or empty", p.APIKeyEnv)
		}
	}

	positive := func(key string, d time.Duration) {
		if d <= 0 {
			bad(key, "must be positive")
		}
	}
	nonNegative := func(key string, d time.Duration) {
		if d < 0 {
			bad(key, "must not be negative")
		}
	}
	positive("timeout", p.Timeout)
	positive("backoff_base", p.BackoffBase)
	nonNegative("backoff_max", p.BackoffMax)
	nonNegative("max_retry_wait", p.MaxRetryWait)
	positive("cooldown", p.Cooldown)
	nonNegative("max_cooldown", p.MaxCooldown)
	nonNegative("trip_window", p.TripWindow)
	// The KV store cannot hold a TTL shorter than a second.
	positive("auth_cooldown", p.AuthCooldown)
	if p.MaxRetries < 0 {
		bad("max_retries", "must not be negative")
	}
	if p.FailureThreshold < 0 {
		bad("failure_threshold", "must not be negative")
	}
	if p.BackoffBase > 0 && p.BackoffMax >= 0 && p.BackoffMax < p.BackoffBase {
		bad("backoff_max", "must be at least backoff_base (%s)", p.BackoffBase)
	}
	if p.Cooldown > 0 && p.MaxCooldown >= 0 && p.MaxCooldown < p.Cooldown {
		bad("max_cooldown", "must be at least cooldown (%s)", p.Cooldown)
	}
	// Cooldowns become KV key TTLs, which are whole seconds.
	for _, c := range []struct {
		key string
		d   time.Duration
	}{{"cooldown", p.Cooldown}, {"max_cooldown", p.MaxCooldown}, {"auth_cooldown", p.AuthCooldown}} {
		if c.d > 0 && c.d%time.Second != 0 {
			bad(c.key, "must be a whole number of seconds (got %s)", c.d)
		}
	}
	return errs
}

func (r Rule) problems(i int) []error {
	var errs []error
	if len(r.Match) == 0 {
		errs = append(errs, fmt.Errorf("rules[%d]: match: must list at least one phrase", i))
	}
	for j, m := range r.Match {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, fmt.Errorf("rules[%d]: match[%d]: must not be empty", i, j))
		}
	}
	if r.Reply == "" {
		errs = append(errs, fmt.Errorf("rules[%d]: reply: required", i))
	}
	return errs
}

func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("must be an http or https URL (got %q)", s)
	}
	return nil
}
