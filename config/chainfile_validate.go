package config

import (
	"errors"
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
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

// Validate checks a File as Parse does and returns every problem joined, each
// prefixed by where it is, for example
// `providers[1] "backup": timeout: must be positive` or
// `chains.default[2]: unknown provider "econmy"; did you mean "economy"?`.
// It is exported for files built in code (the demo) and never reveals an API
// key. Parse's errors name each problem's line as well.
func (f *File) Validate() error {
	names := make([]string, len(f.Providers))
	for i, p := range f.Providers {
		names[i] = p.Name
	}
	var errs []error
	for _, p := range f.problems() {
		errs = append(errs, errors.New(join(where(p.path, names), p.text)))
	}
	return errors.Join(errs...)
}

// problems lists what is wrong with f, each problem with the place it is
// about, so that Parse can name its line.
func (f *File) problems() []problem {
	var out []problem
	bad := func(p path, format string, args ...any) {
		out = append(out, problem{path: p, text: fmt.Sprintf(format, args...)})
	}
	if len(f.Providers) == 0 {
		bad(path{"providers"}, "must list at least one provider")
	}
	names := make([]string, len(f.Providers))
	for i, p := range f.Providers {
		at := path{"providers", strconv.Itoa(i)}
		if j := slices.Index(names[:i], p.Name); j >= 0 && p.Name != "" {
			bad(at.child("name"), "already used by providers[%d]", j)
		}
		names[i] = p.Name
		p.check(func(key path, format string, args ...any) { bad(append(at, key...), format, args...) })
	}
	if len(f.Chains) == 0 {
		bad(path{"chains"}, "must define at least one chain")
	}
	for _, name := range f.ChainNames() {
		at, chain, c := path{"chains", name}, f.Chains[name], f.Cache(name)
		if !nameRE.MatchString(name) {
			bad(at, "chain name must match [A-Za-z0-9_-]+")
		} else if len(name) > MaxNameLen {
			bad(at, "chain name must be at most %d characters (got %d)", MaxNameLen, len(name))
		}
		period := func(key string, d time.Duration) {
			switch {
			case d < 0:
				bad(at.child(key), "must not be negative")
			case d%time.Second != 0:
				bad(at.child(key), "must be a whole number of seconds (got %s)", d)
			case d > MaxCachePeriod:
				bad(at.child(key), "must be at most %s (got %s)", MaxCachePeriod, d)
			}
		}
		period("cache_ttl", c.TTL)
		period("stale_ttl", c.StaleTTL)
		if c.TTL <= 0 && c.StaleTTL > 0 {
			bad(at.child("stale_ttl"), "needs a cache_ttl above 0 (the cache is off without one)")
		}
		if len(chain) == 0 {
			bad(at, "must list at least one provider")
		}
		for i, pname := range chain {
			ip := at.child(strconv.Itoa(i))
			p, ok := f.Provider(pname)
			s, close := suggest.Closest(pname, names)
			switch j := slices.Index(chain, pname); {
			case j < i:
				bad(ip, "provider %q already at [%d]", pname, j)
			case !ok && close:
				bad(ip, "unknown provider %q; did you mean %q?", pname, s)
			case !ok:
				bad(ip, "unknown provider %q", pname)
			case p.Type == TypeRules && i != len(chain)-1:
				// A rules provider always answers, so anything after it
				// could never be reached.
				bad(ip, "rules provider %q may only be last in a chain", pname)
			}
		}
	}
	return out
}

// MaxPricePerMTok bounds a price per million tokens: far above any
// provider's, and low enough that a cost stays finite for any usage.
const MaxPricePerMTok = 1e6

// check reports what is wrong with one provider, each place under the
// provider's.
func (p Provider) check(bad func(key path, format string, args ...any)) {
	want := func(ok bool, key string, format string, args ...any) {
		if !ok {
			bad(path{key}, format, args...)
		}
	}
	switch {
	case p.Name == "":
		bad(path{"name"}, "required")
	case !nameRE.MatchString(p.Name):
		bad(path{"name"}, "must match [A-Za-z0-9_-]+")
	case len(p.Name) > MaxNameLen:
		bad(path{"name"}, "must be at most %d characters (got %d)", MaxNameLen, len(p.Name))
	}

	switch p.Type {
	case "":
		bad(path{"type"}, "required (openai, anthropic or rules)")
	case TypeOpenAI, TypeAnthropic:
		want(p.Model != "", "model", "required for type %s", p.Type)
		if err := checkBaseURL(p.BaseURL); err != nil {
			bad(path{"base_url"}, "%v", err)
		}
		want(len(p.Rules) == 0, "rules", "only allowed for type rules")
		want(p.DefaultReply == "", "default_reply", "only allowed for type rules")
	case TypeRules:
		want(p.DefaultReply != "", "default_reply", "required for type rules")
		want(p.BaseURL == "", "base_url", "not allowed for type rules")
		want(p.Model == "", "model", "not allowed for type rules")
		want(p.APIKeyEnv == "", "api_key_env", "not allowed for type rules")
		want(p.Price == nil, "price", "not allowed for type rules, which calls no paid API")
		for i, r := range p.Rules {
			at := path{"rules", strconv.Itoa(i)}
			if len(r.Match) == 0 {
				bad(at.child("match"), "must list at least one phrase")
			}
			for j, m := range r.Match {
				if strings.TrimSpace(m) == "" {
					bad(at.child("match").child(strconv.Itoa(j)), "must not be empty")
				}
			}
			if r.Reply == "" {
				bad(at.child("reply"), "required")
			}
		}
	default:
		bad(path{"type"}, "must be openai, anthropic or rules (got %q)", p.Type)
	}

	// Only the variable's name is ever printed, never its value.
	if p.APIKeyEnv != "" && p.Type != TypeRules {
		switch {
		case !envNameRE.MatchString(p.APIKeyEnv):
			bad(path{"api_key_env"}, "%q is not a valid environment variable name", p.APIKeyEnv)
		case p.APIKey == "":
			bad(path{"api_key_env"}, "environment variable %s is not set or empty", p.APIKeyEnv)
		}
	}

	if p.Price != nil && p.Type != TypeRules {
		price := func(key string, v float64) {
			switch at := (path{"price", key}); {
			case math.IsInf(v, 0) || math.IsNaN(v):
				bad(at, "must be a number such as 2.5 (got %g)", v)
			case v < 0:
				bad(at, "must not be negative (got %g)", v)
			case v > MaxPricePerMTok:
				bad(at, "must be at most %g (got %g)", float64(MaxPricePerMTok), v)
			}
		}
		price("input_per_mtok", p.Price.InputPerMTok)
		price("output_per_mtok", p.Price.OutputPerMTok)
	}

	want(p.Timeout > 0, "timeout", "must be positive")
	want(p.BackoffBase > 0, "backoff_base", "must be positive")
	want(p.BackoffMax >= 0, "backoff_max", "must not be negative")
	want(p.MaxRetryWait >= 0, "max_retry_wait", "must not be negative")
	want(p.Cooldown > 0, "cooldown", "must be positive")
	want(p.MaxCooldown >= 0, "max_cooldown", "must not be negative")
	want(p.TripWindow >= 0, "trip_window", "must not be negative")
	// The KV store cannot hold a TTL shorter than a second.
	want(p.AuthCooldown > 0, "auth_cooldown", "must be positive")
	want(p.MaxRetries >= 0, "max_retries", "must not be negative")
	want(p.FailureThreshold >= 0, "failure_threshold", "must not be negative")
	want(p.BackoffBase <= 0 || p.BackoffMax < 0 || p.BackoffMax >= p.BackoffBase, "backoff_max", "must be at least backoff_base (%s)", p.BackoffBase)
	want(p.Cooldown <= 0 || p.MaxCooldown < 0 || p.MaxCooldown >= p.Cooldown, "max_cooldown", "must be at least cooldown (%s)", p.Cooldown)
	// Cooldowns become KV key TTLs, which are whole seconds.
	want(p.Cooldown <= 0 || p.Cooldown%time.Second == 0, "cooldown", "must be a whole number of seconds (got %s)", p.Cooldown)
	want(p.MaxCooldown <= 0 || p.MaxCooldown%time.Second == 0, "max_cooldown", "must be a whole number of seconds (got %s)", p.MaxCooldown)
	want(p.AuthCooldown <= 0 || p.AuthCooldown%time.Second == 0, "auth_cooldown", "must be a whole number of seconds (got %s)", p.AuthCooldown)
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

// MaxNameLen bounds a provider or chain name, in bytes. A name goes into
// KV subjects and consumer names: a provider named with 4,000 characters
// made the subject of its state key too long for the connection's control
// line, and the server refuses a consumer name over 255 bytes.
const MaxNameLen = 64

// ValidName reports whether name is a valid provider or chain name of the
// chain file: [A-Za-z0-9_-]+ and at most MaxNameLen bytes, so that it can
// stand as one subject or KV key token.
func ValidName(name string) bool { return nameRE.MatchString(name) && len(name) <= MaxNameLen }
