package cache

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/config"
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

// ErrInvalidEntry is returned for a stored value that is not a valid
// entry of EntryVersion (Check). Such an entry is never served; the next
// answer stored replaces it.
var ErrInvalidEntry = errors.New("cache: invalid entry")

// errOtherVersion is an entry of another version: absent, not invalid.
var errOtherVersion = errors.New("cache: entry of another version")

// Bounds of a valid entry, in bytes.
const (
	MaxEntryBytes = 64 << 20            // NATS's largest max_payload
	maxNameBytes  = chain.MaxModelBytes // provider and model, as the chain bounds a model
)

// Times of a valid entry lie in [minEntryTime, maxEntryTime).
var (
	minEntryTime = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxEntryTime = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)
)

// DecodeEntry decodes a stored value and checks it (Entry.Check). Errors:
// one wrapping ErrInvalidEntry, or errOtherVersion.
func DecodeEntry(data []byte) (Entry, error) {
	if len(data) > MaxEntryBytes {
		return Entry{}, fmt.Errorf("%w: %d bytes, more than %d", ErrInvalidEntry, len(data), MaxEntryBytes)
	}
	var e Entry
	if err := json.Unmarshal(data, &e); err != nil {
		return Entry{}, fmt.Errorf("%w: %w", ErrInvalidEntry, err)
	}
	if e.V != EntryVersion {
		return Entry{}, errOtherVersion
	}
	if err := e.Check(); err != nil {
		return Entry{}, err
	}
	return e, nil
}

// Check reports whether e may be served: content not blank, provider and
// model set and at most 256 bytes, usage not negative, and
// created_at <= fresh_until <= stale_until, all in years 2000 to 2199.
// The error wraps ErrInvalidEntry and names the first rule broken.
func (e Entry) Check() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidEntry, fmt.Sprintf(format, a...))
	}
	switch {
	case strings.TrimSpace(e.Content) == "":
		return bad("blank content")
	case e.Provider == "" || len(e.Provider) > maxNameBytes:
		return bad("provider %d bytes, want 1 to %d", len(e.Provider), maxNameBytes)
	case e.Model == "" || len(e.Model) > maxNameBytes:
		return bad("model %d bytes, want 1 to %d", len(e.Model), maxNameBytes)
	case e.Usage.PromptTokens < 0 || e.Usage.CompletionTokens < 0:
		return bad("negative usage %+v", e.Usage)
	case e.CreatedAt.Before(minEntryTime) || !e.StaleUntil.Before(maxEntryTime):
		return bad("times outside %s to %s", minEntryTime.Format(time.RFC3339), maxEntryTime.Format(time.RFC3339))
	case e.FreshUntil.Before(e.CreatedAt) || e.StaleUntil.Before(e.FreshUntil):
		return bad("times out of order: created_at %s, fresh_until %s, stale_until %s",
			e.CreatedAt.Format(time.RFC3339Nano), e.FreshUntil.Format(time.RFC3339Nano), e.StaleUntil.Format(time.RFC3339Nano))
	}
	return nil
}

// Fresh reports whether the entry may answer at now.
func (e Entry) Fresh(now time.Time) bool { return now.Before(e.FreshUntil) }

// Settings are a chain's cache periods, as its chain file gives them.
type Settings = config.ChainCache

// newEntry is the entry for an answer given at now.
func newEntry(res chain.Result, s Settings, now time.Time) Entry {
	now = now.UTC()
	return Entry{V: EntryVersion, CreatedAt: now, FreshUntil: now.Add(s.TTL), StaleUntil: now.Add(s.TTL + s.StaleTTL),
		Provider: res.Provider, Model: res.Model, Content: res.Content, Usage: res.Usage}
}

// keyTTL is how long the server keeps an entry: until its stale_until, in
// whole seconds rounded up, at least one (the server's minimum).
func keyTTL(e Entry) time.Duration {
	return max((e.StaleUntil.Sub(e.CreatedAt) + time.Second - 1).Truncate(time.Second), time.Second)
}
