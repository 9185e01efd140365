package kvstate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/detourhq/detour/internal/topology"
	"github.com/nats-io/nats.go/jetstream"
)

// openCooldown writes the cooldown key with its TTL. A key still there
// (another worker's cooldown, or a stale one the server has not removed
// yet) that ends no sooner than c is left alone and returned as running, so
// a cooldown is never shortened; any other, or one the last reset ended, is
// replaced at its revision with a fresh TTL.
func (s *Store) openCooldown(ctx context.Context, provider string, c Cooldown, ttl time.Duration) (running *Cooldown, err error) {
	key := CooldownKey(provider)
	data, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("kvstate: encoding %s: %w", key, err)
	}
	for attempt := range maxCASRetries {
		// The trip is recorded in the health value already; the key must
		// not be lost to a deleted bucket either (create recreates it).
		rev, err := s.create(ctx, key, data, jetstream.KeyTTL(ttl))
		if err == nil {
			s.opened(provider, c, rev)
			return nil, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("kvstate: opening %s: %w", key, err)
		}
		cur, err := s.kv.Get(ctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
			continue // expired meanwhile: create it afresh
		}
		if err != nil {
			return nil, fmt.Errorf("kvstate: reading %s: %w", key, err)
		}
		held, err := decode[Cooldown](cur.Value())
		h, _ := s.Health(provider)
		if err == nil && !held.Until.Before(c.Until) && !resetEnds(held, h) {
			s.keep(func(m *mirror) bool { return m.cooldowns.set(provider, held, cur.Revision()) })
			return &held, nil
		}
		rev, err = s.replace(ctx, key, data, cur.Revision(), ttl)
		if err == nil {
			s.opened(provider, c, rev)
			return nil, nil
		}
		if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			return nil, fmt.Errorf("kvstate: replacing %s: %w", key, err)
		}
		if err := casPause(ctx, attempt); err != nil {
			return nil, fmt.Errorf("kvstate: opening %s: %w", key, err)
		}
	}
	return nil, fmt.Errorf("kvstate: opening %s: %d compare-and-set conflicts in a row", key, maxCASRetries)
}

// replace writes value to key at revision rev with a fresh TTL, in one
// atomic step: KeyValue.Update would make the key permanent. A conflict is
// jetstream.ErrKeyRevisionMismatch.
func (s *Store) replace(ctx context.Context, key string, value []byte, rev uint64, ttl time.Duration) (uint64, error) {
	return topology.Replace(ctx, s.js, "$KV."+Bucket+"."+key, value, rev, ttl)
}

// opened applies a cooldown this store wrote to its mirror at once and
// announces it.
func (s *Store) opened(provider string, c Cooldown, rev uint64) {
	s.keep(func(m *mirror) bool { return m.cooldowns.set(provider, c, rev) })
	if s.opts.OnCooldown != nil {
		s.opts.OnCooldown(provider, c)
	}
	if c.Operator {
		s.opts.Logger.Info("provider tripped by an operator", "provider", provider, "until", c.Until, "reason", c.Reason, "by", c.By)
		return
	}
	s.opts.Logger.Warn("provider cooling down", "provider", provider, "until", c.Until, "class", c.Class, "trip", c.Trip, "by", c.By)
}
