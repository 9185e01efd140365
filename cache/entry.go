package cache

import (
	"time"

	"github.com/detourhq/detour/chain"
)

// EntryVersion is the v of the entries this code writes; an entry of
// another version is treated as absent (and replaced).
const EntryVersion = 1

// Entry is one stored answer, the JSON value of a key in the bucket. Times
// are RFC 3339 in UTC.
type Entry struct {
	V          int         `json:"v"`
	CreatedAt  time.Time   `json:"created_at"`
	FreshUntil time.Time   `json:"fresh_until"`
	StaleUntil time.Time   `json:"stale_until"`
	Provider   string      `json:"provider"`
	Model      string      `json:"model"`
	Content    string      `json:"content"`
	Usage      chain.Usage `json:"usage"`
}

// Fresh reports whether the entry may answer at now.
func (e Entry) Fresh(now time.Time) bool { return now.Before(e.FreshUntil) }

// Settings are a chain's cache periods (config.ChainCache).
type Settings struct {
	// TTL is the fresh period; whole seconds, positive.
	TTL time.Duration
	// StaleTTL is how long after TTL an entry may stand in when no
	// provider answers; whole seconds, 0 for never.
	StaleTTL time.Duration
}

// newEntry is the entry for an answer given at now.
func newEntry(res chain.Result, s Settings, now time.Time) Entry {
	now = now.UTC()
	return Entry{V: EntryVersion, CreatedAt: now, FreshUntil: now.Add(s.TTL), StaleUntil: now.Add(s.TTL + s.StaleTTL),
		Provider: res.Provider, Model: res.Model, Content: res.Content, Usage: res.Usage}
}

// keyTTL is how long the server keeps an entry: until its stale_until, in
// whole seconds rounded up, at least one (the server's minimum).
func keyTTL(e Entry) time.Duration {
	d := e.StaleUntil.Sub(e.CreatedAt)
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return max(d, time.Second)
}
