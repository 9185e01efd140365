package wire

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/detourhq/detour/chain"
	"github.com/detourhq/detour/internal/msgpackwalk"
	"github.com/detourhq/detour/internal/suggest"
)

// DefaultCacheScope is the cache scope of a request that names none.
const DefaultCacheScope = "shared"

// Limits of the cache fields (docs/requests.md).
const (
	// MaxCacheScopeLen is the longest cache_scope, in bytes, a token of a
	// key in the cache bucket.
	MaxCacheScopeLen = 64
	// MaxStaleIfError is the largest stale_if_error, in seconds (31 years).
	MaxStaleIfError = 1_000_000_000
)

// cacheScopeRE holds characters every KV key token allows.
var cacheScopeRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// cacheKeys are the keys of a request's cache object.
var cacheKeys = []string{"no_cache", "no_store", "stale_if_error"}

// CacheControl is a request's "cache" object (docs/requests.md). Unknown
// keys are refused, so that a misspelt control does not go unnoticed.
type CacheControl struct {
	// NoCache: call the chain even when a fresh entry is stored.
	NoCache bool `msgpack:"no_cache,omitempty" json:"no_cache,omitempty"`
	// NoStore: do not store this request's answer.
	NoStore bool `msgpack:"no_store,omitempty" json:"no_store,omitempty"`
	// StaleIfError is how long past its fresh period an entry may stand in,
	// in whole seconds; 0 turns stale answers off, nil leaves stale_ttl.
	StaleIfError *int64 `msgpack:"stale_if_error,omitempty" json:"stale_if_error,omitempty"`
}

// UnmarshalJSON reads the cache object strictly.
func (c *CacheControl) UnmarshalJSON(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return c.set(v)
}

// decodeMsgpackCache decodes the msgpack value of the cache field.
func decodeMsgpackCache(v []byte) (*CacheControl, error) {
	var raw any
	if err := msgpack.Unmarshal(v, &raw); err != nil {
		// The body is valid msgpack: a map key is not a string.
		if kind := msgpackwalk.Kind(v); kind != "a map" {
			return nil, fieldError("cache", fieldWants["cache"], kind)
		}
		return nil, fmt.Errorf("%w: cache must be an object whose keys are strings", ErrBadRequest)
	}
	if raw == nil {
		return nil, nil
	}
	var c CacheControl
	if err := c.set(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
	}
	return &c, nil
}

// set fills c from a decoded object (JSON with json.Number, or msgpack).
func (c *CacheControl) set(v any) error {
	*c = CacheControl{}
	obj, ok := v.(map[string]any)
	if !ok && v != nil {
		return fmt.Errorf(`cache must be an object such as {"no_store": true}, not %s`, valueKind(v))
	}
	for _, k := range slices.Sorted(maps.Keys(obj)) {
		val := obj[k]
		switch k {
		case "no_cache", "no_store":
			b, ok := val.(bool)
			if !ok && val != nil {
				return fmt.Errorf("cache.%s must be true or false, not %s", k, valueKind(val))
			}
			if k == "no_cache" {
				c.NoCache = b
			} else {
				c.NoStore = b
			}
		case "stale_if_error":
			if val == nil {
				c.StaleIfError = nil
				continue
			}
			n, ok := wholeNumber(val)
			if !ok || n < 0 || n > MaxStaleIfError {
				return fmt.Errorf("cache.stale_if_error must be a whole number of seconds from 0 to %d, not %s", MaxStaleIfError, valueKind(val))
			}
			c.StaleIfError = &n
		default:
			msg := fmt.Sprintf("cache has no key %s (it has %s, %s and %s)", quote(k), cacheKeys[0], cacheKeys[1], cacheKeys[2])
			if s, ok := suggest.Closest(k, cacheKeys); ok {
				msg = fmt.Sprintf("cache has no key %s; did you mean %q?", quote(k), s)
			}
			return errors.New(msg)
		}
	}
	return nil
}

func wholeNumber(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		return i, err == nil
	case int8, int16, int32, int64, uint8, uint16, uint32:
		i, _ := strconv.ParseInt(fmt.Sprint(n), 10, 64)
		return i, true
	case uint64:
		return int64(n), n <= math.MaxInt64
	}
	return 0, false
}

// valueKind words a decoded value for an error.
func valueKind(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case bool:
		return "true or false"
	case string:
		return "the string " + quote(x)
	case json.Number:
		return quote(string(x))
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64:
		return quote(fmt.Sprint(x))
	}
	return "another kind of value"
}

// validateCacheScope checks that a cache_scope is one key token.
func validateCacheScope(scope string) error {
	if scope == "" {
		return nil
	}
	if len(scope) > MaxCacheScopeLen || !cacheScopeRE.MatchString(scope) {
		return fmt.Errorf("%w: cache_scope %s must be one token of at most %d letters, digits, '-' or '_'",
			ErrBadRequest, quote(scope), MaxCacheScopeLen)
	}
	return nil
}

func (d Decoded) cacheControl() chain.CacheControl {
	c := chain.CacheControl{Scope: cmp.Or(d.CacheScope, DefaultCacheScope), Fingerprint: d.Fingerprint}
	if d.Cache != nil {
		c.NoCache, c.NoStore = d.Cache.NoCache, d.Cache.NoStore
		if s := d.Cache.StaleIfError; s != nil {
			dur := time.Duration(*s) * time.Second
			c.StaleIfError = &dur
		}
	}
	return c
}
