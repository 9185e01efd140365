package config

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/suggest"
	"github.com/detourhq/detour/internal/text"
)

// Names become NATS subject tokens, consumer names and KV key tokens, so they
// are held to the characters all three accept, and to MaxNameLen.
var (
	nameRE    = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)
	envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

func validEnvName(s string) bool { return envNameRE.MatchString(s) }

// Validate checks a File as Parse does and returns every problem joined, each
// prefixed by where it is, for example
// `providers[1] "backup": timeout: must be positive` or
// `chains.default[2]: unknown provider "econmy"; did you mean "economy"?`.
// It is exported for files built in code (the demo) and never reveals an API
// key. Parse's errors name each problem's line as well.
func (f *File) Validate() error {
	var errs []error
	for _, p := range f.problems() {
		errs = append(errs, errors.New(p.text))
	}
	return errors.Join(errs...)
}

// problems lists what is wrong with f, each problem with the place it is
// about (see decoder), so that Parse can name its line.
func (f *File) problems() []pathProblem {
	var out []pathProblem
	if len(f.Providers) == 0 {
		out = append(out, pathProblem{path: "providers", text: "providers: must list at least one provider"})
	}
	seen := make(map[string]int, len(f.Providers))
	for i, p := range f.Providers {
		where := fmt.Sprintf("providers[%d]", i)
		if p.Name != "" {
			where += fmt.Sprintf(" %q", p.Name)
		}
		path := child("providers", i)
		for _, pp := range p.problems() {
			out = append(out, pathProblem{path: child(path, pp.path), text: join(where, pp.text)})
		}
		if first, dup := seen[p.Name]; dup && p.Name != "" {
			out = append(out, pathProblem{path: child(path, "name"), text: fmt.Sprintf("%s: name: already used by providers[%d]", where, first)})
		} else {
			seen[p.Name] = i
		}
	}

	if len(f.Chains) == 0 {
		out = append(out, pathProblem{path: "chains", text: "chains: must define at least one chain"})
	}
	for _, name := range f.ChainNames() {
		out = append(out, f.chainProblems(name)...)
	}
	return out
}

func (f *File) chainProblems(name string) []pathProblem {
	var out []pathProblem
	path := child("chains", name)
	bad := func(path, format string, args ...any) {
		out = append(out, pathProblem{path: path, text: fmt.Sprintf(format, args...)})
	}
	where := "chains." + name
	if !nameRE.MatchString(name) {
		where = fmt.Sprintf("chains.%q", name)
		bad(path, "%s: chain name must match [A-Za-z0-9_-]+", where)
	} else if len(name) > MaxNameLen {
		bad(path, "%s: chain name must be at most %d characters (got %d)", where, MaxNameLen, len(name))
	}
	out = append(out, f.cacheProblems(name, path, where)...)
	chain := f.Chains[name]
	if len(chain) == 0 {
		bad(path, "%s: must list at least one provider", where)
		return out
	}
	names := make([]string, len(f.Providers))
	for i, p := range f.Providers {
		names[i] = p.Name
	}
	at := make(map[string]int, len(chain))
	for i, pname := range chain {
		ip := child(path, i)
		if first, dup := at[pname]; dup {
			bad(ip, "%s[%d]: provider %q already at [%d]", where, i, pname, first)
			continue
		}
		at[pname] = i
		p, ok := f.Provider(pname)
		switch {
		case !ok:
			msg := fmt.Sprintf("%s[%d]: unknown provider %q", where, i, pname)
			if s, ok := suggest.Closest(pname, names); ok {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			bad(ip, "%s", msg)
		case p.Type == TypeRules && i != len(chain)-1:
			// A rules provider always answers, so anything after it could
			// never be reached.
			bad(ip, "%s[%d]: rules provider %q may only be last in a chain", where, i, pname)
		}
	}
	return out
}

// problems lists what is wrong with one provider, each text starting with
// the key at fault and each path relative to the provider.
func (p Provider) problems() []pathProblem {
	var out []pathProblem
	bad := func(key, format string, args ...any) {
		out = append(out, pathProblem{path: key, text: fmt.Sprintf("%s: %s", key, fmt.Sprintf(format, args...))})
	}

	switch {
	case p.Name == "":
		bad("name", "required")
	case !nameRE.MatchString(p.Name):
		bad("name", "must match [A-Za-z0-9_-]+")
	case len(p.Name) > MaxNameLen:
		bad("name", "must be at most %d characters (got %d)", MaxNameLen, len(p.Name))
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
		if p.Price != nil {
			bad("price", "not allowed for type rules, which calls no paid API")
		}
		for i, r := range p.Rules {
			out = append(out, r.problems(i)...)
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
	return out
}

func (r Rule) problems(i int) []pathProblem {
	var out []pathProblem
	path := child("rules", i)
	bad := func(path, format string, args ...any) {
		out = append(out, pathProblem{path: path, text: fmt.Sprintf(format, args...)})
	}
	if len(r.Match) == 0 {
		bad(child(path, "match"), "rules[%d]: match: must list at least one phrase", i)
	}
	for j, m := range r.Match {
		if strings.TrimSpace(m) == "" {
			bad(child(child(path, "match"), j), "rules[%d]: match[%d]: must not be empty", i, j)
		}
	}
	if r.Reply == "" {
		bad(child(path, "reply"), "rules[%d]: reply: required", i)
	}
	return out
}

func checkBaseURL(s string) error {
	u, err := url.Parse(s)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return fmt.Errorf("must be an http or https URL (got %q)", s)
	case strings.Contains(s, "#"):
		// The API's path would go after it, and no request sends it.
		return fmt.Errorf("must have no #fragment, which no request sends (got %q and a fragment)", text.URL(s))
	}
	return nil
}

// MaxCachePeriod bounds cache_ttl and stale_ttl: a year each, so that
// their sum, an entry's TTL, cannot overflow.
const MaxCachePeriod = 365 * 24 * time.Hour

// cacheProblems lists what is wrong with a chain's cache settings.
func (f *File) cacheProblems(name, path, where string) []pathProblem {
	var out []pathProblem
	c := f.Cache(name)
	check := func(key string, d time.Duration) {
		text := ""
		switch {
		case d < 0:
			text = "must not be negative"
		case d%time.Second != 0:
			text = fmt.Sprintf("must be a whole number of seconds (got %s)", d)
		case d > MaxCachePeriod:
			text = fmt.Sprintf("must be at most %s (got %s)", MaxCachePeriod, d)
		}
		if text != "" {
			out = append(out, pathProblem{path: child(path, key), text: fmt.Sprintf("%s: %s: %s", where, key, text)})
		}
	}
	check("cache_ttl", c.TTL)
	check("stale_ttl", c.StaleTTL)
	if c.TTL <= 0 && c.StaleTTL > 0 {
		out = append(out, pathProblem{path: child(path, "stale_ttl"),
			text: fmt.Sprintf("%s: stale_ttl: needs a cache_ttl above 0 (the cache is off without one)", where)})
	}
	return out
}

// MaxNameLen bounds a provider or chain name, in bytes. A name goes into
// KV subjects and consumer names: a provider named with 4,000 characters
// made the subject of its state key too long for the connection's control
// line, and the server refuses a consumer name over 255 bytes.
const MaxNameLen = 64

// ValidName reports whether name is a valid provider or chain name of the
// chain file: [A-Za-z0-9_-]+ and at most MaxNameLen bytes, so that it can
// stand as one subject or KV key token.
func ValidName(name string) bool { return nameRE.MatchString(name) && len(name) <= MaxNameLen }
