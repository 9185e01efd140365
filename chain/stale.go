package chain

import (
	"slices"
	"time"
)

// CacheStatus says how the response cache took part in a result; empty
// for a chain without a cache.
type CacheStatus string

// Cache statuses of a result (docs/results.md).
const (
	// CacheHit: a fresh stored answer answered, and no provider was called.
	CacheHit CacheStatus = "hit"
	// CacheMiss: nothing fresh was stored; the chain answered, or failed.
	CacheMiss CacheStatus = "miss"
	// CacheStale: no provider answered; a stale stored answer stood in.
	CacheStale CacheStatus = "stale"
)

// CacheControl is what a request asks of the response cache in front of
// the chain.
type CacheControl struct {
	// Scope separates the entries of different callers; "" means "shared".
	Scope string
	// NoCache: answer from a provider even when a fresh entry is stored.
	NoCache bool
	// NoStore: store nothing for this request.
	NoStore bool
	// StaleIfError bounds how long past its fresh period an entry may stand
	// in; nil means the chain's stale_ttl, zero none.
	StaleIfError *time.Duration
	// Fingerprint returns the hex SHA-256 of what in the request changes
	// the answer; "" (or nil) keeps it out of the cache. A function, so only
	// a chain with a cache pays for the hash.
	Fingerprint func() string
}

// StaleAnswer is an earlier answer that may stand in, degraded, when no
// provider answers, before the rules provider; never for a poison request.
type StaleAnswer struct {
	Content  string
	Provider string
	Model    string
	Usage    Usage
	// CreatedAt is when the answer was given; Until is the end of its window.
	CreatedAt time.Time
	Until     time.Time
}

// staleResult makes res the stale answer standing in at position pos, or
// reports false, leaving res alone, when there is none still in its window.
func (c *Chain) staleResult(req *Request, res *Result, pos int, now time.Time) bool {
	s := req.Stale
	if s == nil || !now.Before(s.Until) {
		return false
	}
	res.Status = StatusOK
	res.Content, res.Provider, res.Model, res.Usage = s.Content, s.Provider, s.Model, s.Usage
	if i := slices.IndexFunc(c.Steps, func(st Step) bool { return st.Provider.Name() == s.Provider }); i >= 0 {
		pos = i
	}
	res.Position = pos
	res.Degraded = true
	res.Cache = CacheStale
	res.AgeS = AgeSeconds(s.CreatedAt, now)
	res.Error = ""
	return true
}

// AgeSeconds is the whole seconds from created to now, never negative.
func AgeSeconds(created, now time.Time) int64 { return max(int64(now.Sub(created)/time.Second), 0) }
