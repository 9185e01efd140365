package fleet

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/detourhq/detour/config"
)

// Definition is what a processor runs under one provider name, free of
// secrets.
type Definition struct {
	// Fingerprint is a digest of the other fields: two processors agree on
	// a provider when their fingerprints are equal.
	Fingerprint string `json:"fingerprint"`
	Type        string `json:"type"`
	BaseURL     string `json:"base_url,omitempty"`
	Model       string `json:"model,omitempty"`
	// Policy spells the retry and cooldown settings, for instance
	// "timeout=30s max_retries=1 backoff=500ms..10s …".
	Policy string `json:"policy"`
	// Rules is a digest of a rules provider's rules and default reply.
	Rules string `json:"rules,omitempty"`
	// FailureThreshold and LongestCooldownS, the provider's longest
	// cooldown in whole seconds (config.Provider.LongestCooldown), are what
	// an operator's trip needs to know of it; both are spelled in Policy
	// too, so they are no part of Fingerprint.
	FailureThreshold int   `json:"failure_threshold,omitempty"`
	LongestCooldownS int64 `json:"longest_cooldown_s,omitempty"`
}

// Define returns the definition of p, fingerprint included.
func Define(p config.Provider) Definition {
	d := Definition{
		Type:    string(p.Type),
		BaseURL: redactURL(p.BaseURL),
		Model:   p.Model,
		Policy: fmt.Sprintf("timeout=%s max_retries=%d backoff=%s..%s max_retry_wait=%s failure_threshold=%d cooldown=%s..%s trip_window=%s auth_cooldown=%s",
			p.Timeout, p.MaxRetries, p.BackoffBase, p.BackoffMax, p.MaxRetryWait, p.FailureThreshold,
			p.Cooldown, p.MaxCooldown, p.TripWindow, p.AuthCooldown),
	}
	d.FailureThreshold, d.LongestCooldownS = p.FailureThreshold, int64(p.LongestCooldown()/time.Second)
	if p.Type == config.TypeRules {
		b, _ := json.Marshal(struct {
			Rules        []config.Rule
			DefaultReply string
		}{p.Rules, p.DefaultReply})
		d.Rules = digest(b)
	}
	b, _ := json.Marshal([]string{d.Type, d.BaseURL, d.Model, d.Policy, d.Rules})
	d.Fingerprint = digest(b)
	return d
}

// String is the definition on one line, for logs and status.
func (d Definition) String() string {
	var rules string
	if d.Rules != "" {
		rules = "rules=" + d.Rules
	}
	parts := []string{d.Type, d.BaseURL, d.Model, rules, d.Policy}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), " ")
}

// digest is the first 16 hex digits of b's SHA-256: enough to tell
// definitions apart, short enough to read.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// redactURL keeps scheme, host and path: a user, password, query or
// fragment could carry a credential and is left out.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return ""
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
