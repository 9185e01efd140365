package config

import (
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/detourhq/detour/internal/text"
)

// File is a parsed, defaulted and validated chain file.
type File struct {
	// Providers in file order; names are unique.
	Providers []Provider
	// Chains maps a chain name to provider names in fallback order.
	Chains map[string][]string
	// Caches maps a chain name to its response cache settings; a chain
	// not in it has no cache. Read it with Cache.
	Caches map[string]ChainCache
}

// ChainCache is a chain's response cache, from the mapping form of the
// chain (docs/settings.md). The zero value is a chain without a cache.
type ChainCache struct {
	// TTL is how long a stored answer is fresh and answers an identical
	// request without a provider call; whole seconds, 0 turns the cache off.
	TTL time.Duration
	// StaleTTL is how long after TTL a stored answer may stand in, degraded,
	// when no provider answers; whole seconds, DefaultStaleTTL when the
	// cache is on and the key is left out, 0 for no stale answers.
	StaleTTL time.Duration
}

// On reports whether the chain has a cache.
func (c ChainCache) On() bool { return c.TTL > 0 }

// Cache returns the response cache settings of the chain called name.
func (f *File) Cache(name string) ChainCache { return f.Caches[name] }

// ProviderType says which API a provider speaks.
type ProviderType string

// Provider types of the chain file's "type" key.
const (
	// TypeOpenAI is any OpenAI-compatible chat completions endpoint.
	TypeOpenAI ProviderType = "openai"
	// TypeAnthropic is the Anthropic messages API.
	TypeAnthropic ProviderType = "anthropic"
	// TypeRules answers from fixed templates; it is the last resort of a chain.
	TypeRules ProviderType = "rules"
)

// Default provider settings, applied when the chain file leaves a key out.
const (
	DefaultTimeout          = 30 * time.Second
	DefaultMaxRetries       = 1
	DefaultBackoffBase      = 500 * time.Millisecond
	DefaultBackoffMax       = 10 * time.Second
	DefaultMaxRetryWait     = 10 * time.Second
	DefaultFailureThreshold = 3
	DefaultCooldown         = 10 * time.Minute
	DefaultMaxCooldown      = time.Hour
	DefaultTripWindow       = time.Hour
	DefaultAuthCooldown     = time.Hour
	DefaultOpenAIBaseURL    = "https://api.openai.com/v1"
	DefaultAnthropicBaseURL = "https://api.anthropic.com/v1"
	// DefaultStaleTTL is a cached chain's stale_ttl when the file leaves
	// it out.
	DefaultStaleTTL = 24 * time.Hour
)

// Provider is one entry of the chain file with defaults applied. Printing it
// (fmt, slog) never shows APIKey.
type Provider struct {
	Name    string       // [A-Za-z0-9_-]+; also its KV key token
	Type    ProviderType // openai, anthropic or rules
	BaseURL string       // API root without trailing slash; empty for rules
	Model   string       // model sent to the API; empty for rules

	// APIKeyEnv names the environment variable holding the key; APIKey is
	// its value, resolved at parse time. APIKey is empty when APIKeyEnv is.
	APIKeyEnv string
	APIKey    string `json:"-" yaml:"-"`

	Timeout      time.Duration // per attempt
	MaxRetries   int           // extra attempts within one pass; 0 means one attempt
	BackoffBase  time.Duration // first retry delay before jitter
	BackoffMax   time.Duration // cap of the exponential backoff
	MaxRetryWait time.Duration // a longer Retry-After opens a cooldown instead of sleeping

	FailureThreshold int           // consecutive failures that open a cooldown; 0 disables cooldowns
	Cooldown         time.Duration // first cooldown, whole seconds
	MaxCooldown      time.Duration // cap of the doubling cooldown, whole seconds
	TripWindow       time.Duration // trips within this window double the cooldown
	AuthCooldown     time.Duration // cooldown opened at once by an auth failure, whole seconds

	Rules        []Rule // rules providers: tried in order, first match answers
	DefaultReply string // rules providers: the answer when no rule matches

	// Price is what the provider charges; nil when the chain file gives
	// none, and then detour reports no cost for its answers.
	Price *Price
}

// Price is what a provider charges per million tokens, in whatever currency
// the operator prices in: detour reports cost in that same unit. The
// chain's chain.Price, built from it, computes costs.
type Price struct {
	InputPerMTok  float64 // per million prompt (input) tokens, at least 0
	OutputPerMTok float64 // per million completion (output) tokens, at least 0
}

// Rule is one template of a rules provider: when the prompt contains any of
// Match, the provider answers Reply.
type Rule struct {
	Match []string `yaml:"match"`
	Reply string   `yaml:"reply"`
}

// String describes the provider without its API key, and its base URL
// without a user part or query values (text.URL).
func (p Provider) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s", p.Name, p.Type)
	if p.Model != "" {
		fmt.Fprintf(&b, " %s", p.Model)
	}
	if p.BaseURL != "" {
		fmt.Fprintf(&b, " at %s", text.URL(p.BaseURL))
	}
	b.WriteString(")")
	return b.String()
}

// Format makes every fmt verb, not only %v and %s, print String (and %#v a
// Go-like form), so a stray %d or %+v cannot dump the API key field.
func (p Provider) Format(f fmt.State, verb rune) {
	if verb == 'v' && f.Flag('#') {
		fmt.Fprintf(f, "config.Provider{Name:%q, Type:%q, Model:%q, BaseURL:%q, APIKeyEnv:%q}",
			p.Name, p.Type, p.Model, text.URL(p.BaseURL), p.APIKeyEnv)
		return
	}
	_, _ = f.Write([]byte(p.String()))
}

// LongestCooldown is the longest cooldown a processor running this
// provider opens: the larger of MaxCooldown and AuthCooldown. Processors
// read no cooldown of the provider in the bucket as longer.
func (p Provider) LongestCooldown() time.Duration { return max(p.MaxCooldown, p.AuthCooldown) }

// LogValue logs the provider's identity; the API key is left out.
func (p Provider) LogValue() slog.Value {
	attrs := []slog.Attr{slog.String("name", p.Name), slog.String("type", string(p.Type))}
	if p.Model != "" {
		attrs = append(attrs, slog.String("model", p.Model))
	}
	if p.BaseURL != "" {
		attrs = append(attrs, slog.String("base_url", text.URL(p.BaseURL)))
	}
	return slog.GroupValue(attrs...)
}

// Load reads and parses the chain file at path, resolving API keys from the
// process environment. A refused file's error is a *[FileError] naming path;
// every error matches [ErrInvalid].
func Load(path string) (*File, error) {
	return load(path, os.LookupEnv)
}

// LoadWithoutKeys is Load for a command that never calls a provider
// (`processor status` lists their names): an api_key_env variable need not
// be set, and every provider's APIKey is left empty. Every other problem is
// refused as Load refuses it.
func LoadWithoutKeys(path string) (*File, error) {
	f, err := load(path, func(string) (string, bool) { return "unresolved", true })
	if f != nil {
		for i := range f.Providers {
			f.Providers[i].APIKey = ""
		}
	}
	return f, err
}

func load(path string, lookupEnv func(string) (string, bool)) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, &readError{fmt.Errorf("read chain file: %w", err)}
	}
	f, err := Parse(data, lookupEnv)
	if fe, ok := err.(*FileError); ok {
		fe.Path = path
	}
	return f, err
}

// Parse decodes a chain file strictly (unknown keys are errors), applies
// defaults, resolves each api_key_env through lookupEnv (nil means
// os.LookupEnv) and validates the result. It reports every problem at once,
// each with its line, as a *[FileError].
func Parse(data []byte, lookupEnv func(string) (string, bool)) (*File, error) {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	raw, r := decode(data)
	var f *File
	if raw != nil {
		f = raw.build(lookupEnv, r)
	}
	if e := r.fileError(f); e != nil {
		return nil, e
	}
	return f, nil
}

// Provider returns the provider called name.
func (f *File) Provider(name string) (Provider, bool) {
	i := slices.IndexFunc(f.Providers, func(p Provider) bool { return p.Name == name })
	if i < 0 {
		return Provider{}, false
	}
	return f.Providers[i], true
}

// ChainNames returns the chain names in sorted order.
func (f *File) ChainNames() []string { return slices.Sorted(maps.Keys(f.Chains)) }
