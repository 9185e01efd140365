package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// rawFile mirrors the YAML. Tunables are pointers so that a key left out
// takes its default while an explicit 0 (failure_threshold: 0 disables
// cooldowns, max_retries: 0 means one attempt) is kept.
type rawFile struct {
	Providers []rawProvider       `yaml:"providers"`
	Chains    map[string][]string `yaml:"chains"`
}

type rawProvider struct {
	Name             string       `yaml:"name"`
	Type             ProviderType `yaml:"type"`
	BaseURL          string       `yaml:"base_url"`
	Model            string       `yaml:"model"`
	APIKeyEnv        string       `yaml:"api_key_env"`
	Timeout          *duration    `yaml:"timeout"`
	MaxRetries       *count       `yaml:"max_retries"`
	BackoffBase      *duration    `yaml:"backoff_base"`
	BackoffMax       *duration    `yaml:"backoff_max"`
	MaxRetryWait     *duration    `yaml:"max_retry_wait"`
	FailureThreshold *count       `yaml:"failure_threshold"`
	Cooldown         *duration    `yaml:"cooldown"`
	MaxCooldown      *duration    `yaml:"max_cooldown"`
	TripWindow       *duration    `yaml:"trip_window"`
	AuthCooldown     *duration    `yaml:"auth_cooldown"`
	Rules            []Rule       `yaml:"rules"`
	DefaultReply     string       `yaml:"default_reply"`
}

// duration accepts only Go duration strings ("500ms", "30s", "10m") and 0.
// yaml's own time.Duration handling already refuses bare numbers, but its
// message names a Go type instead of saying what to write.
type duration time.Duration

func (d *duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && (n.ShortTag() == "!!str" || n.ShortTag() == "!!int") {
		if v, err := time.ParseDuration(n.Value); err == nil {
			*d = duration(v)
			return nil
		}
	}
	return typeError(n, "want a duration such as 500ms, 30s or 10m")
}

// count accepts only YAML integers: yaml would otherwise truncate 1.5 to 1.
type count int

func (c *count) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" {
		return typeError(n, "want a whole number")
	}
	var v int
	if err := n.Decode(&v); err != nil {
		return typeError(n, "want a whole number that fits in an int")
	}
	*c = count(v)
	return nil
}

// typeError is a *yaml.TypeError so that decoding goes on and every bad
// value in the file is reported, not only the first.
func typeError(n *yaml.Node, want string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s, got %s", n.Line, want, quoteValue(n))}}
}

func quoteValue(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode {
		return "a " + strings.TrimPrefix(n.ShortTag(), "!!")
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:40] + "..."
	}
	return fmt.Sprintf("%q", v)
}

// decode parses data into a rawFile, rejecting unknown keys and a second
// YAML document (which the decoder would otherwise ignore).
func decode(data []byte) (*rawFile, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var raw rawFile
	if err := dec.Decode(&raw); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlError(err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, yamlError(err)
		}
		return nil, fmt.Errorf("line %d: only one YAML document is allowed", extra.Line)
	}
	return &raw, nil
}

var (
	unknownFieldRE = regexp.MustCompile(`^(line \d+): field (.*) not found in type (\S+)$`)
	// The types yaml names in its messages are ours, not the user's.
	typeNames = strings.NewReplacer(
		"[]config.rawProvider", "list of providers",
		"[]config.Rule", "list of rules",
		"map[string][]string", "mapping of chain names to provider lists",
		"[]string", "list of strings",
		"config.rawFile", "chain file (a mapping with providers and chains)",
		"config.rawProvider", "provider (a mapping)",
		"config.Rule", "rule (a mapping with match and reply)",
	)
	knownKeys = map[string]string{
		"config.rawFile":     "providers, chains",
		"config.rawProvider": "name, type, base_url, model, api_key_env, timeout, max_retries, backoff_base, backoff_max, max_retry_wait, failure_threshold, cooldown, max_cooldown, trip_window, auth_cooldown, rules, default_reply",
		"config.Rule":        "match, reply",
	}
)

// yamlError turns yaml's messages into ones that speak of chain file keys:
// one error per problem, "line N: ..." each.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err // a syntax error: yaml's text already has the line
	}
	errs := make([]error, 0, len(te.Errors))
	for _, msg := range te.Errors {
		if m := unknownFieldRE.FindStringSubmatch(msg); m != nil {
			msg = fmt.Sprintf("%s: unknown key %q", m[1], m[2])
			if keys, ok := knownKeys[m[3]]; ok {
				msg += " (known keys: " + keys + ")"
			}
		}
		errs = append(errs, errors.New(typeNames.Replace(msg)))
	}
	return errors.Join(errs...)
}

// build applies defaults and resolves API keys; it does not validate.
func (r *rawFile) build(lookupEnv func(string) (string, bool)) *File {
	f := &File{Providers: make([]Provider, 0, len(r.Providers)), Chains: r.Chains}
	if f.Chains == nil {
		f.Chains = map[string][]string{}
	}
	for _, rp := range r.Providers {
		f.Providers = append(f.Providers, rp.build(lookupEnv))
	}
	return f
}

func (rp *rawProvider) build(lookupEnv func(string) (string, bool)) Provider {
	p := Provider{
		Name:             rp.Name,
		Type:             rp.Type,
		BaseURL:          strings.TrimRight(rp.BaseURL, "/"),
		Model:            rp.Model,
		APIKeyEnv:        rp.APIKeyEnv,
		Timeout:          durOr(rp.Timeout, DefaultTimeout),
		MaxRetries:       countOr(rp.MaxRetries, DefaultMaxRetries),
		BackoffBase:      durOr(rp.BackoffBase, DefaultBackoffBase),
		BackoffMax:       durOr(rp.BackoffMax, DefaultBackoffMax),
		MaxRetryWait:     durOr(rp.MaxRetryWait, DefaultMaxRetryWait),
		FailureThreshold: countOr(rp.FailureThreshold, DefaultFailureThreshold),
		Cooldown:         durOr(rp.Cooldown, DefaultCooldown),
		MaxCooldown:      durOr(rp.MaxCooldown, DefaultMaxCooldown),
		TripWindow:       durOr(rp.TripWindow, DefaultTripWindow),
		AuthCooldown:     durOr(rp.AuthCooldown, DefaultAuthCooldown),
		Rules:            rp.Rules,
		DefaultReply:     rp.DefaultReply,
	}
	if p.BaseURL == "" {
		switch p.Type {
		case TypeOpenAI:
			p.BaseURL = DefaultOpenAIBaseURL
		case TypeAnthropic:
			p.BaseURL = DefaultAnthropicBaseURL
		}
	}
	if p.APIKeyEnv != "" && validEnvName(p.APIKeyEnv) {
		v, _ := lookupEnv(p.APIKeyEnv)
		// Keys pasted with a stray newline or space would only fail later
		// as an invalid HTTP header.
		p.APIKey = strings.TrimSpace(v)
	}
	return p
}

func durOr(d *duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	return time.Duration(*d)
}

func countOr(c *count, def int) int {
	if c == nil {
		return def
	}
	return int(*c)
}
